"""EnqueueHandler: an informer's notifications become keys on a work queue."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from kubereflector import (
    DeletedFinalStateUnknown,
    KeyFuncError,
    ResourceEventHandler,
    SharedIndexInformer,
    wait_for_cache_sync,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle
from kubereflector.workqueue import (
    LOW_PRIORITY,
    EnqueueHandler,
    QueueEmpty,
    WorkQueue,
    namespaced_name,
)

pytestmark = pytest.mark.asyncio


def pod(name: str, namespace: str = "default", rv: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if rv is not None:
        meta["resourceVersion"] = rv
    return {"kind": "Pod", "metadata": meta}


def drain(q: WorkQueue[Any]) -> list[Any]:
    out = []
    while True:
        try:
            item = q.get_nowait()
        except QueueEmpty:
            return out
        out.append(item)
        q.done(item)


async def test_each_kind_of_notification_adds_the_key() -> None:
    q: WorkQueue[str] = WorkQueue()
    handler = EnqueueHandler(q)
    assert isinstance(handler, ResourceEventHandler)
    await handler.on_add(pod("a"), False)
    await handler.on_update(pod("b", rv="1"), pod("b", rv="2"))
    await handler.on_delete(pod("c", namespace="kube-system"))
    await handler.on_delete(DeletedFinalStateUnknown("default/gone", None))
    await handler.on_add({"kind": "Namespace", "metadata": {"name": "cluster-wide"}}, False)
    await handler.on_add(pod("a"), False)  # queued already
    assert drain(q) == ["default/a", "default/b", "kube-system/c", "default/gone", "cluster-wide"]


async def test_requests_as_namespace_name_tuples() -> None:
    q: WorkQueue[tuple[str, str]] = WorkQueue()
    handler = EnqueueHandler(q, namespaced_name)
    await handler.on_add(pod("a"), False)
    await handler.on_delete(DeletedFinalStateUnknown("kube-system/b", pod("b", "kube-system")))
    await handler.on_add({"metadata": {"name": "node-1"}}, False)
    assert drain(q) == [("default", "a"), ("kube-system", "b"), ("", "node-1")]


async def test_an_object_without_a_name_raises_key_func_error() -> None:
    handler = EnqueueHandler(WorkQueue[str]())
    with pytest.raises(KeyFuncError, match="no metadata"):
        await handler.on_add({"kind": "Pod"}, False)
    with pytest.raises(KeyFuncError, match=r"no metadata\.name"):
        namespaced_name({"metadata": {"namespace": "x"}})


async def test_low_priority_for_the_initial_list_and_unchanged_updates() -> None:
    q: WorkQueue[str] = WorkQueue()
    handler = EnqueueHandler(q, low_priority=LOW_PRIORITY)
    await handler.on_add(pod("initial-1"), True)
    await handler.on_add(pod("initial-2"), True)
    await handler.on_update(pod("resync", rv="5"), pod("resync", rv="5"))
    await handler.on_add(pod("live-add"), False)
    await handler.on_update(pod("live-update", rv="5"), pod("live-update", rv="6"))
    await handler.on_delete(pod("live-delete"))
    assert drain(q) == [
        "default/live-add",
        "default/live-update",
        "default/live-delete",
        "default/initial-1",
        "default/initial-2",
        "default/resync",
    ]


async def test_without_low_priority_everything_is_first_come() -> None:
    q: WorkQueue[str] = WorkQueue()
    handler = EnqueueHandler(q)
    await handler.on_add(pod("initial"), True)
    await handler.on_update(pod("resync", rv="5"), pod("resync", rv="5"))
    await handler.on_add(pod("live"), False)
    assert drain(q) == ["default/initial", "default/resync", "default/live"]


async def test_wired_to_an_informer() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    for name in ("a", "b", "c"):
        source.add(pod(name))
    q: WorkQueue[str] = WorkQueue()
    informer = SharedIndexInformer(source, clock=clock)
    registration = informer.add_event_handler(EnqueueHandler(q, low_priority=LOW_PRIORITY))
    task = asyncio.create_task(informer.run())
    try:
        assert await wait_for_cache_sync(informer, registration)
        source.modify(pod("b"))
        source.add(pod("d"))
        source.delete(pod("c"))
        store = informer.store
        while (
            store.get_by_key("default/c") is not None
            or store.get_by_key("default/d") is None
            or registration.pending
        ):
            await settle(1)
        # The live changes first: b (modified), d (added), c (deleted); then a,
        # left at the initial list's low priority.
        assert drain(q) == ["default/b", "default/d", "default/c", "default/a"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
