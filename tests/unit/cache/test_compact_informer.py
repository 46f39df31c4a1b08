"""SharedIndexInformer(object_mode="compact"): the cache and every handler get
CompactObjects, and keys, indexers, listers, selectors, transforms and relists
work as in dict mode."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubereflector import (
    NAMESPACE_INDEX,
    CompactObject,
    DeletedFinalStateUnknown,
    FieldSelector,
    ListOptions,
    ListResult,
    ReadOnlyObjectError,
    SharedIndexInformer,
    WatchStream,
    meta_namespace_index_func,
    strip_managed_fields,
    wait_for_cache_sync,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle

pytestmark = pytest.mark.asyncio

WAIT = 10.0


def pod(name: str, node: str = "n1", **labels: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": dict(labels),
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
    }


def node_index(obj: Any) -> list[str]:
    return [obj["spec"]["nodeName"]]


class Recorder:
    """A handler (plain or coroutine methods) keeping what it gets; thread-safe."""

    def __init__(self) -> None:
        self.got: list[tuple[str, Any, Any]] = []
        self.cond = threading.Condition()

    def _record(self, *event: Any) -> None:
        with self.cond:
            self.got.append(event)
            self.cond.notify_all()

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._record("add", obj, None)

    def on_update(self, old: Any, new: Any) -> None:
        self._record("update", old, new)

    def on_delete(self, obj: Any) -> None:
        self._record("delete", obj, None)

    async def wait_for(self, count: int) -> list[tuple[str, Any, Any]]:
        def wait() -> bool:
            with self.cond:
                return self.cond.wait_for(lambda: len(self.got) >= count, WAIT)

        assert await asyncio.to_thread(wait), self.got
        return list(self.got)


class AsyncRecorder(Recorder):
    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:  # type: ignore[override]
        self._record("add", obj, None)

    async def on_update(self, old: Any, new: Any) -> None:  # type: ignore[override]
        self._record("update", old, new)

    async def on_delete(self, obj: Any) -> None:  # type: ignore[override]
        self._record("delete", obj, None)


def setup(*names: str, **kwargs: Any) -> tuple[SharedIndexInformer, FakeControllerSource, Any]:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    for name in names:
        source.add(pod(name, app="web"))
    informer = SharedIndexInformer(source, clock=clock, object_mode="compact", **kwargs)
    return informer, source, clock


@contextlib.asynccontextmanager
async def running(informer: SharedIndexInformer) -> AsyncIterator[None]:
    task = asyncio.create_task(informer.run())
    await settle()
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("handler_class", [Recorder, AsyncRecorder])
async def test_the_cache_and_the_handlers_get_compact_objects(
    handler_class: type[Recorder],
) -> None:
    informer, source, _clock = setup("a", "b")
    assert informer.object_mode == "compact"
    recorder = handler_class()
    informer.add_event_handler(recorder)
    async with running(informer):
        assert await asyncio.wait_for(wait_for_cache_sync(informer), WAIT)
        source.modify(pod("a", node="n2", app="web"))
        source.delete(pod("b"))
        got = await recorder.wait_for(4)
        cached = informer.store.get_by_key("shop/a")
        assert type(cached) is CompactObject
        assert cached["spec"]["nodeName"] == "n2"
        assert [kind for kind, _, _ in got] == ["add", "add", "update", "delete"]
        for _, first, second in got:
            assert type(first) is CompactObject
            assert second is None or type(second) is CompactObject
        _, old, new = got[2]
        assert (old["spec"]["nodeName"], new["spec"]["nodeName"]) == ("n1", "n2")
        assert new is cached
        with pytest.raises(ReadOnlyObjectError):
            new["spec"]["nodeName"] = "x"


async def test_indexers_listers_and_selectors_work_unchanged() -> None:
    informer, source, _ = setup(
        indexers={NAMESPACE_INDEX: meta_namespace_index_func, "node": node_index}
    )
    source.add(pod("a", node="n1", app="web"))
    source.add(pod("b", node="n2", app="web"))
    source.add(pod("c", node="n2", app="db"))
    async with running(informer):
        assert await asyncio.wait_for(wait_for_cache_sync(informer), WAIT)
        indexer = informer.indexer
        assert sorted(o["metadata"]["name"] for o in indexer.by_index("node", "n2")) == ["b", "c"]
        assert len(indexer.by_index(NAMESPACE_INDEX, "shop")) == 3
        lister = informer.lister.namespaced("shop")
        assert sorted(o["metadata"]["name"] for o in lister.list("app=web")) == ["a", "b"]
        assert lister.get("c") is indexer.get_by_key("shop/c")
        on_n2 = FieldSelector.parse("spec.nodeName=n2,metadata.name!=b")
        assert [o["metadata"]["name"] for o in indexer.list() if on_n2.matches_object(o)] == ["c"]
        source.modify(pod("a", node="n2", app="web"))
        await settle()
        assert sorted(indexer.index_keys("node", "n2")) == ["shop/a", "shop/b", "shop/c"]


async def test_strip_managed_fields_keeps_objects_compact() -> None:
    informer, _source, _ = setup("a")
    informer.set_transform(strip_managed_fields)
    async with running(informer):
        assert await asyncio.wait_for(wait_for_cache_sync(informer), WAIT)
        cached = informer.store.get_by_key("shop/a")
        assert type(cached) is CompactObject
        assert "managedFields" not in cached["metadata"]
        assert cached["spec"]["nodeName"] == "n1"


async def test_a_transform_returning_a_dict_is_made_compact() -> None:
    informer, _source, _ = setup("a")

    def relabel(obj: Any) -> Any:
        plain = obj.to_dict()
        plain["metadata"]["labels"]["seen"] = "yes"
        return plain

    informer.set_transform(relabel)
    async with running(informer):
        assert await asyncio.wait_for(wait_for_cache_sync(informer), WAIT)
        cached = informer.store.get_by_key("shop/a")
        assert type(cached) is CompactObject
        assert cached["metadata"]["labels"] == {"app": "web", "seen": "yes"}


async def test_a_transform_that_writes_still_works_on_a_decoded_copy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    informer, _source, _ = setup("a", "b")

    def drop_spec(obj: Any) -> Any:  # written for dicts: it writes to its input
        obj.pop("spec", None)
        return obj

    informer.set_transform(drop_spec)
    with caplog.at_level(logging.WARNING, logger="kubereflector.compact"):
        async with running(informer):
            assert await asyncio.wait_for(wait_for_cache_sync(informer), WAIT)
            for key in ("shop/a", "shop/b"):
                cached = informer.store.get_by_key(key)
                assert type(cached) is CompactObject
                assert "spec" not in cached
    warnings = [r for r in caplog.records if "writes to the objects" in r.getMessage()]
    assert len(warnings) == 1
    assert "drop_spec" in warnings[0].getMessage()


async def test_a_relist_tombstone_holds_the_compact_object() -> None:
    informer, source, clock = setup("a", "b")
    recorder = Recorder()
    informer.add_event_handler(recorder)
    async with running(informer):
        await recorder.wait_for(2)
        last_a = informer.store.get_by_key("shop/a")
        source.delete_drop_watch(pod("a"))
        source.compact()
        source.reset_watch()
        await clock.advance(5)  # past the backoff: relist
        source.add(pod("s"))
        got = await recorder.wait_for(5)
        deletes = [obj for kind, obj, _ in got if kind == "delete"]
        assert len(deletes) == 1
        assert isinstance(deletes[0], DeletedFinalStateUnknown)
        assert deletes[0].key == "shop/a"
        assert deletes[0].obj is last_a
        assert sorted(informer.store.list_keys()) == ["shop/b", "shop/s"]


async def test_a_lister_watcher_that_decodes_compactly_is_asked_to() -> None:
    modes: list[str] = []

    class Modal:
        """A ListerWatcher with ``with_object_mode`` (as ResourceListWatch has)."""

        def __init__(self, inner: FakeControllerSource) -> None:
            self.inner = inner

        async def list(self, options: ListOptions) -> ListResult:
            return await self.inner.list(options)

        def watch(self, options: ListOptions) -> WatchStream:
            return self.inner.watch(options)

        def with_object_mode(self, mode: str) -> Modal:
            modes.append(mode)
            return self

    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a"))
    informer = SharedIndexInformer(Modal(source), object_mode="compact", clock=clock)
    assert modes == ["compact"]
    async with running(informer):
        assert await asyncio.wait_for(wait_for_cache_sync(informer), WAIT)
        # This one still sends dicts: they are made compact on the way in.
        assert type(informer.store.get_by_key("shop/a")) is CompactObject
    assert SharedIndexInformer(Modal(source)).object_mode == "dict"
    assert modes == ["compact"]


async def test_an_unknown_object_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="object_mode must be 'dict', 'compact' or 'compact-pro"):
        SharedIndexInformer(FakeControllerSource(), object_mode="lazy")  # type: ignore[arg-type]
