"""The Controller, new_informer/new_indexer_informer, and event handlers through them.

Sources are FakeControllerSources on a FakeClock: nothing waits for wall-clock
time. Plain handlers run on worker threads; the tests wait for what they record
through a threading.Condition (with a timeout), never by sleeping.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from kubereflector import (
    AlreadyStartedError,
    Controller,
    DeletedFinalStateUnknown,
    DeltaFIFO,
    Deltas,
    DeltaType,
    FilteringResourceEventHandler,
    ListOptions,
    ListResult,
    RealFIFO,
    ReflectorOptions,
    ResourceEventHandlerFuncs,
    WatchStream,
    meta_namespace_index_func,
    new_indexer_informer,
    new_informer,
    new_store,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle
from running_task import running

pytestmark = pytest.mark.asyncio

WAIT = 10.0
"""Upper bound (seconds) on waiting for a worker thread; never reached when things work."""


def pod(name: str, namespace: str | None = "default", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta}


def key(obj: Any) -> str:
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def rv(obj: Any) -> str:
    if isinstance(obj, DeletedFinalStateUnknown):
        return "tombstone"
    return str(obj["metadata"]["resourceVersion"])


class Recorder:
    """A plain-function handler recording ``(kind, key, detail)`` tuples, thread-safely."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.threads: set[int] = set()
        self._cond = threading.Condition()

    def record(self, *event: Any) -> None:
        with self._cond:
            self.events.append(event)
            self.threads.add(threading.get_ident())
            self._cond.notify_all()

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self.record("add", key(obj), is_in_initial_list)

    def on_update(self, old: Any, new: Any) -> None:
        self.record("update", key(new), rv(old), rv(new))

    def on_delete(self, obj: Any) -> None:
        self.record("delete", key(obj), type(obj).__name__)

    async def wait_for(self, count: int) -> list[tuple[Any, ...]]:
        """The events, once there are at least ``count`` (fails after WAIT seconds)."""

        def wait() -> bool:
            with self._cond:
                return self._cond.wait_for(lambda: len(self.events) >= count, WAIT)

        if not await asyncio.to_thread(wait):
            raise AssertionError(f"expected {count} events, got {self.events}")
        with self._cond:
            return list(self.events)


# -- the Controller ------------------------------------------------------------------------


async def test_a_controller_that_deletes_whatever_is_added() -> None:
    """The seeds' program: process deletes every object it sees added and reports
    the key of every deletion it sees."""
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    downstream = new_store()
    fifo = DeltaFIFO(known_objects=downstream)
    deleted: list[str] = []

    def process(deltas: Deltas, is_in_initial_list: bool) -> None:
        newest = deltas.newest()
        assert newest is not None
        if newest.type is not DeltaType.DELETED:
            downstream.add(newest.object)
            source.delete(newest.object)
        else:
            downstream.delete(newest.object)
            deleted.append(fifo.key_of(newest.object))

    controller = Controller(fifo, source, process, full_resync_period=0.1, clock=clock)
    async with running(controller):
        for name in ("a-hello", "b-controller", "c-framework"):
            source.add(pod(name, namespace=None))
        await settle()
        assert sorted(deleted) == ["a-hello", "b-controller", "c-framework"]
        assert downstream.list() == []
        assert source.keys() == []


async def test_has_synced_and_last_sync_resource_version() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a"))
    source.add(pod("b"))
    store = new_store()
    seen: list[tuple[str, bool]] = []
    controller = Controller(
        RealFIFO(known_objects=store),
        source,
        lambda deltas, initial: seen.append((key(deltas[0].object), initial)),
        clock=clock,
    )
    assert not controller.has_synced()
    assert controller.last_sync_resource_version() == ""
    async with running(controller):
        assert controller.has_synced()
        assert controller.last_sync_resource_version() == "2"
        source.add(pod("c"))
        await settle()
        assert controller.last_sync_resource_version() == "3"
    assert seen == [("default/a", True), ("default/b", True), ("default/c", False)]


async def test_stopping_closes_the_stream_and_a_second_run_is_refused() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    queue = RealFIFO(known_objects=new_store())
    controller = Controller(queue, source, lambda d, i: None, clock=clock)
    async with running(controller):
        assert source.open_watches == 1
        assert not controller.is_stopped()
        with pytest.raises(AlreadyStartedError):
            await controller.run()
    assert source.open_watches == 0
    assert queue.is_closed()
    assert controller.is_stopped()
    with pytest.raises(AlreadyStartedError, match="only once"):
        await controller.run()


class _Crash(BaseException):
    """Not an Exception: the Reflector does not retry it (stands for a bug)."""


class _CrashingSource(FakeControllerSource):
    async def list(self, options: ListOptions) -> ListResult:
        raise _Crash("reflector bug")


async def test_a_reflector_failure_ends_run_with_its_error() -> None:
    clock = FakeClock()
    queue = RealFIFO(known_objects=new_store())
    controller = Controller(
        queue,
        _CrashingSource(clock=clock),
        lambda d, i: None,
        reflector_options=ReflectorOptions(use_watch_list=False),
        clock=clock,
    )
    task = asyncio.create_task(controller.run())
    await settle()
    assert task.done()
    with pytest.raises(_Crash, match="reflector bug"):
        task.result()
    assert queue.is_closed()
    assert controller.is_stopped()


async def test_closing_the_queue_ends_run() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    queue = RealFIFO(known_objects=new_store())
    controller = Controller(queue, source, lambda d, i: None, clock=clock)
    task = asyncio.create_task(controller.run())
    await settle()
    queue.close()
    await asyncio.wait_for(task, WAIT)
    assert controller.is_stopped()
    assert source.open_watches == 0


async def test_a_failing_process_is_logged_with_the_key_and_popping_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    seen: list[str] = []

    def process(deltas: Deltas, is_in_initial_list: bool) -> None:
        name = key(deltas[0].object)
        if name == "default/bad":
            raise RuntimeError("boom")
        seen.append(name)

    controller = Controller(RealFIFO(known_objects=new_store()), source, process, clock=clock)
    with caplog.at_level(logging.ERROR, logger="kubereflector.controller"):
        async with running(controller):
            for name in ("one", "bad", "two"):
                source.add(pod(name))
            await settle()
    assert seen == ["default/one", "default/two"]
    (record,) = caplog.records
    assert "'default/bad'" in record.getMessage()
    assert record.exc_info is not None


async def test_the_controller_resyncs_through_should_resync() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a"))
    store = new_store()
    types: list[DeltaType] = []
    allow = [False]

    def process(deltas: Deltas, is_in_initial_list: bool) -> None:
        store.update(deltas[0].object)
        types.append(deltas[0].type)

    controller = Controller(
        RealFIFO(known_objects=store),
        source,
        process,
        full_resync_period=5,
        should_resync=lambda: allow[0],
        clock=clock,
    )
    async with running(controller):
        await clock.advance(5)
        assert types == [DeltaType.REPLACED]
        allow[0] = True
        await clock.advance(5)
        assert types == [DeltaType.REPLACED, DeltaType.SYNC]


# -- new_informer -----------------------------------------------------------------------------


async def test_new_informer_fills_the_store_and_notifies_off_the_loop() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a"))
    recorder = Recorder()
    store, controller = new_informer(source, recorder, clock=clock)
    async with running(controller):
        assert controller.has_synced()
        await recorder.wait_for(1)
        source.modify(pod("a", app="x"))
        source.add(pod("b"))
        source.delete(pod("a"))
        await settle()
        events = await recorder.wait_for(4)
        assert events == [
            ("add", "default/a", True),
            ("update", "default/a", "1", "2"),
            ("add", "default/b", False),
            ("delete", "default/a", "dict"),
        ]
        assert [key(o) for o in store.list()] == ["default/b"]
    assert threading.get_ident() not in recorder.threads
    assert len(recorder.threads) == 1


async def test_new_informer_with_coroutine_handlers_runs_them_on_the_loop() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a"))
    seen: list[tuple[str, str, int]] = []

    async def on_add(obj: Any) -> None:
        await asyncio.sleep(0)
        seen.append(("add", key(obj), threading.get_ident()))

    async def on_delete(obj: Any) -> None:
        seen.append(("delete", key(obj), threading.get_ident()))

    handler = ResourceEventHandlerFuncs(on_add=on_add, on_delete=on_delete)
    _, controller = new_informer(source, handler, clock=clock)
    async with running(controller):
        source.modify(pod("a", app="x"))  # no on_update: skipped
        source.delete(pod("a"))
        await settle()
    me = threading.get_ident()
    assert seen == [("add", "default/a", me), ("delete", "default/a", me)]


async def test_new_informer_resync_period_redelivers_every_object() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a"))
    source.add(pod("b"))
    recorder = Recorder()
    _, controller = new_informer(source, recorder, resync_period=30, clock=clock)
    async with running(controller):
        await recorder.wait_for(2)
        await clock.advance(30)
        events = await recorder.wait_for(4)
    assert sorted(events[2:]) == [
        ("update", "default/a", "1", "1"),
        ("update", "default/b", "2", "2"),
    ]


async def test_new_indexer_informer_indexes_and_applies_the_transform() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a", namespace="ns1"))
    source.add(pod("b", namespace="ns2"))
    recorder = Recorder()

    def mark(obj: Any) -> Any:
        return {**obj, "transformed": True}

    indexer, controller = new_indexer_informer(
        source,
        recorder,
        {"namespace": meta_namespace_index_func},
        transform=mark,
        clock=clock,
    )
    async with running(controller):
        await recorder.wait_for(2)
        assert [key(o) for o in indexer.by_index("namespace", "ns2")] == ["ns2/b"]
        assert all(o["transformed"] for o in indexer.list())


async def test_a_relist_that_missed_a_delete_reports_a_tombstone() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a"))
    source.add(pod("b"))
    recorder = Recorder()
    store, controller = new_informer(source, recorder, clock=clock)
    async with running(controller):
        await recorder.wait_for(2)
        source.delete_drop_watch(pod("a"))
        source.compact()  # the watch's history is gone: the next watch gets 410
        source.reset_watch()
        await clock.advance(5)  # past the backoff before the relist
        events = await recorder.wait_for(4)
    assert events[2:] == [
        ("delete", "default/a", "DeletedFinalStateUnknown"),
        ("update", "default/b", "2", "2"),
    ]
    assert [key(o) for o in store.list()] == ["default/b"]


async def test_a_handler_without_the_three_methods_is_refused() -> None:
    source = FakeControllerSource()
    with pytest.raises(TypeError, match="on_add"):
        new_informer(source, object())  # type: ignore[arg-type]


# -- handler types through informers --------------------------------------------------------


async def test_filtering_transitions_through_an_informer() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a", tier="web"))
    source.add(pod("b", tier="db"))
    recorder = Recorder()
    handler = FilteringResourceEventHandler(
        lambda obj: obj["metadata"].get("labels", {}).get("tier") == "web", recorder
    )
    _, controller = new_informer(source, handler, clock=clock)
    async with running(controller):
        source.modify(pod("b", tier="web"))  # starts passing: add
        source.modify(pod("a", tier="db"))  # stops passing: delete (of the old a)
        source.modify(pod("b", tier="web", x="1"))  # passes both: update
        source.modify(pod("a", tier="cache"))  # fails both: nothing
        source.delete(pod("a", tier="cache"))  # fails: nothing
        source.delete(pod("b", tier="web", x="1"))  # passes: delete
        await settle()
        events = await recorder.wait_for(5)
    assert events == [
        ("add", "default/a", True),
        ("add", "default/b", False),
        ("delete", "default/a", "dict"),
        ("update", "default/b", "3", "5"),
        ("delete", "default/b", "dict"),
    ]


async def test_a_handler_may_mix_plain_and_coroutine_methods_in_one_ordered_stream() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    seen: list[tuple[str, str, bool]] = []
    loop_thread = threading.get_ident()
    done = threading.Event()

    class Mixed:
        def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
            seen.append(("add", key(obj), threading.get_ident() == loop_thread))

        async def on_update(self, old: Any, new: Any) -> None:
            await asyncio.sleep(0)
            seen.append(("update", key(new), threading.get_ident() == loop_thread))

        def on_delete(self, obj: Any) -> None:
            seen.append(("delete", key(obj), threading.get_ident() == loop_thread))
            done.set()

    _, controller = new_informer(source, Mixed(), clock=clock)
    async with running(controller):
        source.add(pod("a"))
        source.modify(pod("a", v="1"))
        source.add(pod("b"))
        source.delete(pod("a"))
        await settle()
        assert await asyncio.to_thread(done.wait, WAIT)
    assert seen == [
        ("add", "default/a", False),
        ("update", "default/a", True),
        ("add", "default/b", False),
        ("delete", "default/a", False),
    ]


class RecordingLists:
    """FakeControllerSource's ListerWatcher, recording the options of each list."""

    def __init__(self, source: FakeControllerSource) -> None:
        self.source = source
        self.lists: list[ListOptions] = []

    async def list(self, options: ListOptions) -> ListResult:
        self.lists.append(options)
        return await self.source.list(options)

    def watch(self, options: ListOptions) -> WatchStream:
        return self.source.watch(options)


@pytest.mark.parametrize("constructor", ["new_informer", "new_indexer_informer"])
async def test_new_informers_list_and_watch_with_the_reflector_options_given(
    constructor: str,
) -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    for name in "abc":
        source.add(pod(name))
    lw = RecordingLists(source)
    options = ReflectorOptions(use_watch_list=False, page_size=2, idle_timeout=None)
    if constructor == "new_informer":
        store, controller = new_informer(lw, Recorder(), clock=clock, reflector_options=options)
    else:
        store, controller = new_indexer_informer(
            lw, Recorder(), {}, clock=clock, reflector_options=options
        )
    assert controller.reflector.options is options
    async with running(controller):
        assert controller.has_synced()
        assert sorted(store.list_keys()) == ["default/a", "default/b", "default/c"]
    assert [o.limit for o in lw.lists] == [2, 2]  # two pages of at most 2
