"""From objects to requests: enqueue_object, enqueue_owner and the handler's priorities."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kubereflector import DeletedFinalStateUnknown, to_compact
from kubereflector.runtime import (
    EnqueueRequestsHandler,
    Request,
    enqueue_object,
    enqueue_owner,
    generation_changed,
)
from kubereflector.workqueue import LOW_PRIORITY


def obj(name: str, namespace: str = "ns", rv: str = "1", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv, **meta}}


def ref(name: str, kind: str = "Widget", api_version: str = "example.com/v1", **extra: Any) -> Any:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": "u", **extra}


def test_enqueue_object() -> None:
    assert enqueue_object(obj("a")) == (Request("ns", "a"),)
    assert enqueue_object(obj("node-1", namespace="")) == (Request("", "node-1"),)
    assert enqueue_object(DeletedFinalStateUnknown("ns/gone", None)) == (Request("ns", "gone"),)
    assert enqueue_object(DeletedFinalStateUnknown("cluster-thing", None)) == (
        Request("", "cluster-thing"),
    )
    model = SimpleNamespace(metadata=SimpleNamespace(name="m", namespace="ns"))
    assert enqueue_object(model) == (Request("ns", "m"),)
    assert Request("ns", "a").key == "ns/a"
    assert Request("", "a").key == "a"


def test_enqueue_owner_takes_only_the_controller_of_the_kind() -> None:
    owner = enqueue_owner("example.com", "Widget")
    assert owner(obj("c", ownerReferences=[ref("w", controller=True)])) == (Request("ns", "w"),)
    assert owner(obj("c", ownerReferences=[ref("w")])) == ()  # not the controller
    assert owner(obj("c", ownerReferences=[ref("w", kind="Gadget", controller=True)])) == ()
    assert owner(obj("c", ownerReferences=[ref("w", api_version="v1", controller=True)])) == ()
    # Any version of the group.
    other_version = ref("w", api_version="example.com/v2", controller=True)
    assert owner(obj("c", ownerReferences=[other_version])) == (Request("ns", "w"),)
    assert owner(obj("c")) == ()
    assert owner(None) == ()
    core = enqueue_owner("", "ConfigMap")
    assert core(obj("c", ownerReferences=[ref("p", "ConfigMap", "v1", controller=True)])) == (
        Request("ns", "p"),
    )
    cluster = enqueue_owner("example.com", "Widget", namespaced=False)
    assert cluster(obj("c", ownerReferences=[ref("w", controller=True)])) == (Request("", "w"),)


def test_mappers_take_compact_objects() -> None:
    owned = to_compact(obj("c", ownerReferences=[ref("w", controller=True)]))
    assert enqueue_object(owned) == (Request("ns", "c"),)
    assert enqueue_owner("example.com", "Widget")(owned) == (Request("ns", "w"),)


class Queue:
    def __init__(self) -> None:
        self.added: list[tuple[Request, int]] = []

    def add(self, item: Request, *, priority: int = 0) -> None:
        self.added.append((item, priority))


@pytest.mark.asyncio
async def test_priorities_and_both_sides_of_an_update() -> None:
    queue = Queue()
    handler = EnqueueRequestsHandler(queue, enqueue_owner("example.com", "Widget"))
    child = obj("c", ownerReferences=[ref("w1", controller=True)])
    moved = obj("c", rv="2", ownerReferences=[ref("w2", controller=True)])
    await handler.on_add(child, True)
    await handler.on_add(child, False)
    await handler.on_update(child, moved)
    await handler.on_update(moved, moved)  # a resync: unchanged resourceVersion
    await handler.on_delete(DeletedFinalStateUnknown("ns/c", moved))
    assert queue.added == [
        (Request("ns", "w1"), LOW_PRIORITY),
        (Request("ns", "w1"), 0),
        (Request("ns", "w1"), 0),
        (Request("ns", "w2"), 0),
        (Request("ns", "w2"), LOW_PRIORITY),
        (Request("ns", "w2"), 0),
    ]


@pytest.mark.asyncio
async def test_predicates_and_mapped_pairs() -> None:
    queue = Queue()
    handler = EnqueueRequestsHandler(queue, enqueue_object, generation_changed)
    await handler.on_update(obj("a", generation=1), obj("a", rv="2", generation=1))
    assert queue.added == []
    await handler.on_update(obj("a", generation=1), obj("a", rv="2", generation=2))
    assert queue.added == [(Request("ns", "a"), 0)]
    pairs = EnqueueRequestsHandler(queue, lambda o: [("ns", "x"), (None, "y")])
    await pairs.on_add(obj("a"), False)
    assert queue.added[1:] == [(Request("ns", "x"), 0), (Request("", "y"), 0)]
    assert all(type(r) is Request for r, _ in queue.added)
