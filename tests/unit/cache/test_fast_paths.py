"""The informers' fast paths: RealFIFO.process_or_queue, batches through the
Controller, per-delta error handling, and coroutine handlers that suspend.

Sources are FakeControllerSources on a FakeClock; coroutine handlers run on the
test's loop, so ``settle()`` is enough to let everything in flight finish.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from kubereflector import (
    Cache,
    Controller,
    DeletedFinalStateUnknown,
    Delta,
    DeltaFIFO,
    Deltas,
    DeltaType,
    KeyFuncError,
    QueueEmpty,
    RealFIFO,
    Registration,
    ResourceEventHandlerDetailedFuncs,
    SharedIndexInformer,
    get_labels,
    new_indexer_informer,
    new_store,
    wait_for_cache_sync,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle
from running_task import running

ADDED = DeltaType.ADDED
UPDATED = DeltaType.UPDATED
DELETED = DeltaType.DELETED
REPLACED = DeltaType.REPLACED
SYNC = DeltaType.SYNC

WAIT = 10.0
"""Upper bound (seconds) on a wait that returns at once when things work."""


def pod(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta}


def key(obj: Any) -> str:
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def name_of(obj: Any) -> str:
    return str(obj["metadata"]["name"])


class Recorder:
    """A ``process``/``process_batch`` recording each call's deltas and flag."""

    def __init__(self) -> None:
        self.calls: list[tuple[Deltas, bool]] = []

    def __call__(self, deltas: Deltas, is_in_initial_list: bool) -> None:
        self.calls.append((deltas, is_in_initial_list))


def real_fifo(transformer: Any = None) -> tuple[RealFIFO, Cache]:
    known = new_store()
    return RealFIFO(known_objects=known, transformer=transformer), known


def drain(q: RealFIFO) -> list[Delta]:
    """Every queued delta, in order (empties the queue)."""
    rec = Recorder()
    while len(q):
        q.pop_nowait(rec)
    return [d for deltas, _ in rec.calls for d in deltas]


def synced_and_empty(q: RealFIFO) -> RealFIFO:
    """``q`` after its initial list (one object) has been popped."""
    q.replace([pod("first")], "1")
    q.pop_batch_nowait(Recorder())
    assert q.has_synced()
    assert len(q) == 0
    return q


# == RealFIFO.process_or_queue =====================================================


def one(q: RealFIFO, delta_type: DeltaType, obj: Any, process_batch: Any) -> None:
    """``process_or_queue`` of one change; raises the error it was left out for."""
    for _, err in q.process_or_queue([(delta_type, obj)], process_batch):
        raise err


@pytest.mark.parametrize("delta_type", [ADDED, UPDATED, DELETED])
def test_process_or_queue_processes_at_once_once_the_initial_list_is_popped(
    delta_type: DeltaType,
) -> None:
    q = synced_and_empty(real_fifo()[0])
    rec = Recorder()
    one(q, delta_type, pod("a"), rec)
    assert rec.calls == [(Deltas([Delta(delta_type, pod("a"))]), False)]
    assert isinstance(rec.calls[0][0], Deltas)
    assert len(q) == 0
    assert q.list_keys() == []


def test_process_or_queue_processes_at_once_after_a_write_was_popped() -> None:
    q, _ = real_fifo()
    q.add(pod("a"))
    q.pop_nowait(Recorder())
    rec = Recorder()
    one(q, UPDATED, pod("a"), rec)
    assert rec.calls == [(Deltas([Delta(UPDATED, pod("a"))]), False)]
    assert len(q) == 0


def test_process_or_queue_queues_before_any_replace_or_write() -> None:
    q, _ = real_fifo()
    assert not q.has_synced()
    rec = Recorder()
    one(q, ADDED, pod("a"), rec)
    assert rec.calls == []
    assert q.has_synced()  # the queue is now populated
    assert drain(q) == [Delta(ADDED, pod("a"))]


def test_process_or_queue_queues_behind_what_is_queued() -> None:
    q = synced_and_empty(real_fifo()[0])
    q.add(pod("a"))
    rec = Recorder()
    one(q, DELETED, pod("b"), rec)
    one(q, UPDATED, pod("a"), rec)
    assert rec.calls == []
    assert q.list_keys() == ["default/a", "default/b"]
    assert drain(q) == [
        Delta(ADDED, pod("a")),
        Delta(DELETED, pod("b")),
        Delta(UPDATED, pod("a")),
    ]


def test_process_or_queue_queues_while_the_initial_list_is_not_fully_popped() -> None:
    q, _ = real_fifo()
    q.replace([pod("a"), pod("b")], "1")
    q.pop_batch_nowait(Recorder(), max_items=1)
    assert not q.has_synced()
    rec = Recorder()
    one(q, ADDED, pod("c"), rec)
    assert rec.calls == []
    popped = Recorder()
    q.pop_batch_nowait(popped)
    q.pop_batch_nowait(popped)
    assert popped.calls == [
        (Deltas([Delta(REPLACED, pod("b"))]), True),
        (Deltas([Delta(ADDED, pod("c"))]), False),
    ]


def test_process_or_queue_after_an_empty_initial_list_processes_at_once() -> None:
    q, _ = real_fifo()
    q.replace([], "1")
    assert q.has_synced()
    rec = Recorder()
    one(q, ADDED, pod("a"), rec)
    assert rec.calls == [(Deltas([Delta(ADDED, pod("a"))]), False)]


@pytest.mark.parametrize("synced", [False, True])
def test_process_or_queue_refuses_a_keyless_object_first(synced: bool) -> None:
    q, _ = real_fifo()
    if synced:
        synced_and_empty(q)
    rec = Recorder()
    with pytest.raises(KeyFuncError):
        one(q, ADDED, {"metadata": {"namespace": "default"}}, rec)
    assert rec.calls == []
    assert len(q) == 0
    assert q.has_synced() is synced  # a refused object does not populate the queue


def test_process_or_queue_applies_the_transformer_except_to_tombstones() -> None:
    def transform(obj: Any) -> Any:
        return {**obj, "transformed": True}

    q = synced_and_empty(real_fifo(transformer=transform)[0])
    rec = Recorder()
    one(q, ADDED, pod("a"), rec)
    tombstone = DeletedFinalStateUnknown("default/b", pod("b"))
    one(q, DELETED, tombstone, rec)
    (first, _), (second, _) = rec.calls
    assert first == [Delta(ADDED, {**pod("a"), "transformed": True})]
    assert second[0].object is tombstone
    q.add(pod("c"))  # the queued path transforms too
    one(q, UPDATED, pod("d"), rec)
    assert [d.object.get("transformed") for d in drain(q)] == [True, True]


def test_an_exception_from_process_or_queue_propagates_and_queues_nothing() -> None:
    q = synced_and_empty(real_fifo()[0])

    def fail(deltas: Deltas, is_in_initial_list: bool) -> None:
        raise LookupError("processing failed")

    with pytest.raises(LookupError, match="processing failed"):
        one(q, ADDED, pod("a"), fail)
    assert len(q) == 0
    with pytest.raises(QueueEmpty):
        q.pop_nowait(Recorder())
    rec = Recorder()
    one(q, ADDED, pod("b"), rec)  # the next change still goes straight through
    assert rec.calls == [(Deltas([Delta(ADDED, pod("b"))]), False)]


def test_process_or_queue_hands_a_batch_to_one_call_in_order() -> None:
    q = synced_and_empty(real_fifo()[0])
    rec = Recorder()
    changes = [(ADDED, pod("a")), (UPDATED, pod("a")), (DELETED, pod("b"))]
    assert q.process_or_queue(changes, rec) == []
    assert rec.calls == [(Deltas([Delta(t, o) for t, o in changes]), False)]
    assert len(q) == 0


def test_process_or_queue_queues_a_whole_batch_behind_a_backlog() -> None:
    q = synced_and_empty(real_fifo()[0])
    q.add(pod("z"))
    rec = Recorder()
    assert q.process_or_queue([(ADDED, pod("a")), (UPDATED, pod("b"))], rec) == []
    assert rec.calls == []
    assert drain(q) == [Delta(ADDED, pod("z")), Delta(ADDED, pod("a")), Delta(UPDATED, pod("b"))]


def test_process_or_queue_leaves_out_only_the_changes_it_cannot_take() -> None:
    def transform(obj: Any) -> Any:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("cannot transform bad")
        return obj

    q = synced_and_empty(real_fifo(transformer=transform)[0])
    rec = Recorder()
    keyless = {"metadata": {"namespace": "default"}}
    failed = q.process_or_queue(
        [(ADDED, pod("a")), (ADDED, keyless), (UPDATED, pod("bad")), (DELETED, pod("c"))], rec
    )
    assert [(i, type(err)) for i, err in failed] == [(1, KeyFuncError), (2, ValueError)]
    assert rec.calls == [(Deltas([Delta(ADDED, pod("a")), Delta(DELETED, pod("c"))]), False)]
    assert q.process_or_queue([(ADDED, keyless)], rec)[0][0] == 0
    assert len(rec.calls) == 1  # nothing left to process: no call


# == RealFIFO keys ================================================================


def test_real_fifo_keys_stay_in_step_across_writes_replace_resync_and_batches() -> None:
    q, known = real_fifo()
    known.add(pod("k"))
    q.add(pod("b"))
    q.update(pod("a"))
    q.delete(pod("c"))
    # Tombstones for b (queued, last not Deleted) and k (known only); c is
    # already Deleted; then the items.
    q.replace([pod("a", v="2"), pod("d")], "5")
    known.add(pod("e"))
    q.resync()  # only e has nothing queued
    assert q.list_keys() == [f"default/{n}" for n in ("b", "a", "c", "k", "d", "e")]
    first = q.pop_batch_nowait(Recorder())
    # Ends before the tombstone of b: the same key as the first delta.
    assert [(d.type, key(d.object)) for d in first] == [
        (ADDED, "default/b"),
        (UPDATED, "default/a"),
        (DELETED, "default/c"),
    ]
    assert q.list_keys() == [f"default/{n}" for n in ("b", "k", "a", "d", "e")]
    second = q.pop_batch_nowait(Recorder())
    assert [(d.type, key(d.object)) for d in second] == [
        (DELETED, "default/b"),
        (DELETED, "default/k"),
        (REPLACED, "default/a"),
        (REPLACED, "default/d"),
        (SYNC, "default/e"),
    ]
    assert q.list_keys() == []


# == the Controller with process_batch ==============================================


class BatchRecorder:
    """A ``process_batch`` keeping the known objects up to date and recording each
    call: its ``(type, key)`` pairs, its flag and the task it ran in."""

    def __init__(self, known: Cache) -> None:
        self.known = known
        self.batches: list[tuple[list[tuple[DeltaType, str]], bool]] = []
        self.tasks: list[asyncio.Task[Any] | None] = []

    def __call__(self, deltas: Deltas, is_in_initial_list: bool) -> None:
        for delta in deltas:
            if delta.type is DELETED:
                self.known.delete(delta.object)
            else:
                self.known.update(delta.object)
        self.batches.append(([(d.type, key(d.object)) for d in deltas], is_in_initial_list))
        self.tasks.append(asyncio.current_task())


def controller_setup(
    *names: str, **kwargs: Any
) -> tuple[Controller, FakeControllerSource, BatchRecorder, Recorder, FakeClock]:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    for name in names:
        source.add(pod(name))
    known = new_store()
    batches = BatchRecorder(known)
    singles = Recorder()
    controller = Controller(
        RealFIFO(known_objects=known),
        source,
        singles,
        process_batch=batches,
        clock=clock,
        **kwargs,
    )
    return controller, source, batches, singles, clock


@pytest.mark.asyncio
async def test_the_initial_list_reaches_process_batch_in_batches_each_delta_once_in_order() -> None:
    names = [f"p{i:04d}" for i in range(1500)]
    controller, _source, batches, singles, _ = controller_setup(*names)
    async with running(controller):
        assert controller.has_synced()
    sizes = [len(deltas) for deltas, _ in batches.batches]
    assert len(sizes) >= 2
    assert all(1 < size <= 1000 for size in sizes)
    delivered = [pair for deltas, _ in batches.batches for pair in deltas]
    assert delivered == [(REPLACED, f"default/{name}") for name in names]
    assert all(initial for _, initial in batches.batches)
    assert singles.calls == []


@pytest.mark.asyncio
async def test_after_sync_a_change_is_processed_at_once_in_the_reflectors_task() -> None:
    controller, source, batches, singles, _ = controller_setup("a", "b")
    async with running(controller) as task:
        assert batches.tasks == [task]  # the initial list: popped by run()'s loop
        source.add(pod("c"))
        source.delete(pod("a"))
        await settle()
        assert len(controller.queue) == 0
    assert batches.batches[1:] == [
        ([(ADDED, "default/c")], False),
        ([(DELETED, "default/a")], False),
    ]
    assert all(t is not None and t is not task for t in batches.tasks[1:])
    assert singles.calls == []


@pytest.mark.asyncio
async def test_a_resync_reaches_process_batch_as_one_batch() -> None:
    controller, _source, batches, _, clock = controller_setup("a", "b", "c", full_resync_period=10)
    async with running(controller):
        await clock.advance(10)
        await settle()
    assert batches.batches[1:] == [
        ([(SYNC, "default/a"), (SYNC, "default/b"), (SYNC, "default/c")], False)
    ]


@pytest.mark.asyncio
async def test_with_a_delta_fifo_the_controller_uses_process() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    for name in ("a", "b"):
        source.add(pod(name))
    singles = Recorder()
    batches = Recorder()
    controller = Controller(
        DeltaFIFO(known_objects=new_store()), source, singles, process_batch=batches, clock=clock
    )
    async with running(controller):
        source.add(pod("c"))
        await settle()
    assert batches.calls == []
    assert [(key(d.newest().object), initial) for d, initial in singles.calls] == [
        ("default/a", True),
        ("default/b", True),
        ("default/c", False),
    ]


@pytest.mark.asyncio
async def test_a_failing_process_batch_is_logged_and_processing_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    for name in ("a", "b"):
        source.add(pod(name))
    known = new_store()
    batches = BatchRecorder(known)

    def process_batch(deltas: Deltas, is_in_initial_list: bool) -> None:
        batches(deltas, is_in_initial_list)
        if is_in_initial_list or any(name_of(d.object) == "bad" for d in deltas):
            raise RuntimeError("cannot process")

    controller = Controller(
        RealFIFO(known_objects=known),
        source,
        Recorder(),
        process_batch=process_batch,
        full_resync_period=10,
        clock=clock,
    )
    with caplog.at_level(logging.ERROR, logger="kubereflector.controller"):
        async with running(controller):
            assert controller.has_synced()
            await clock.advance(10)  # a resync: the next batch from the pop loop
            source.add(pod("bad"))
            source.add(pod("good"))
            await settle()
    assert batches.batches == [
        ([(REPLACED, "default/a"), (REPLACED, "default/b")], True),
        ([(SYNC, "default/a"), (SYNC, "default/b")], False),
        ([(ADDED, "default/bad")], False),
        ([(ADDED, "default/good")], False),
    ]
    failures = [r for r in caplog.records if "processing a batch failed" in r.getMessage()]
    assert len(failures) == 2
    assert all(r.exc_info is not None for r in failures)


# == per-delta error handling in informers ==============================================


def refuses_bad(obj: Any) -> list[str]:
    if name_of(obj) == "bad" or get_labels(obj).get("bad"):
        raise ValueError("cannot index this object")
    return [name_of(obj)]


class AsyncRecorder:
    """A handler whose methods are coroutine functions, recording what they get;
    ``gates`` makes the handler of a name wait for an event first."""

    def __init__(self, gates: dict[str, asyncio.Event] | None = None) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.gates = gates or {}

    async def _record(self, *event: Any) -> None:
        gate = self.gates.get(event[1])
        if gate is not None:
            self.events.append(("start", *event))
            await gate.wait()
        self.events.append(event)

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        await self._record("add", name_of(obj), is_in_initial_list)

    async def on_update(self, old: Any, new: Any) -> None:
        await self._record("update", name_of(new))

    async def on_delete(self, obj: Any) -> None:
        await self._record("delete", key(obj).split("/")[-1])


def setup(
    *names: str, **kwargs: Any
) -> tuple[SharedIndexInformer, FakeControllerSource, FakeClock]:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    for name in names:
        source.add(pod(name))
    informer = SharedIndexInformer(source, clock=clock, **kwargs)
    return informer, source, clock


def could_not_apply(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "kubereflector.controller" and "could not apply" in r.getMessage()
    ]


@pytest.mark.asyncio
async def test_an_object_the_indexer_refuses_is_skipped_and_the_rest_of_the_list_applied(
    caplog: pytest.LogCaptureFixture,
) -> None:
    informer, source, _ = setup("a", "bad", "c", indexers={"by_name": refuses_bad})
    handler = AsyncRecorder()
    registration = informer.add_event_handler(handler)
    with caplog.at_level(logging.ERROR, logger="kubereflector.controller"):
        async with running(informer) as task:
            assert sorted(informer.store.list_keys()) == ["default/a", "default/c"]
            assert handler.events == [("add", "a", True), ("add", "c", True)]
            assert await asyncio.wait_for(wait_for_cache_sync(registration), WAIT)
            (message,) = could_not_apply(caplog)
            assert "'default/bad'" in message
            source.modify(pod("a", v="2"))
            await settle()
            assert handler.events[-1] == ("update", "a")
            assert not task.done()


@pytest.mark.asyncio
async def test_a_refused_update_keeps_the_cached_object_and_notifies_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    informer, source, _ = setup("a", indexers={"by_name": refuses_bad})
    handler = AsyncRecorder()
    informer.add_event_handler(handler)
    with caplog.at_level(logging.ERROR, logger="kubereflector.controller"):
        async with running(informer):
            cached = informer.store.get_by_key("default/a")
            source.modify(pod("a", bad="yes"))
            source.add(pod("b"))
            await settle()
            assert informer.store.get_by_key("default/a") is cached
            assert handler.events == [("add", "a", True), ("add", "b", False)]
    (message,) = could_not_apply(caplog)
    assert "'default/a'" in message


@pytest.mark.asyncio
async def test_new_indexer_informer_skips_a_refused_object_and_applies_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    for name in ("a", "bad", "c"):
        source.add(pod(name))
    handler = AsyncRecorder()
    indexer, controller = new_indexer_informer(
        source, handler, {"by_name": refuses_bad}, clock=clock
    )
    with caplog.at_level(logging.ERROR, logger="kubereflector.controller"):
        async with running(controller):
            assert sorted(indexer.list_keys()) == ["default/a", "default/c"]
            assert controller.has_synced()
            source.add(pod("d"))
            await settle()
    assert handler.events == [("add", "a", True), ("add", "c", True), ("add", "d", False)]
    (message,) = could_not_apply(caplog)
    assert "'default/bad'" in message


# == coroutine handlers that suspend =================================================


@pytest.mark.asyncio
async def test_a_suspended_coroutine_handler_finishes_before_the_next_notifications() -> None:
    gate = asyncio.Event()
    handler = AsyncRecorder(gates={"b": gate})
    informer, source, _ = setup()
    registration = informer.add_event_handler(handler)
    async with running(informer):
        for name in ("a", "b", "c", "d"):
            source.add(pod(name))
        await settle()
        assert handler.events == [("add", "a", False), ("start", "add", "b", False)]
        assert registration.pending == 2  # c and d wait behind b
        source.add(pod("e"))
        await settle()
        assert registration.pending == 3
        gate.set()
        await settle()
        assert registration.pending == 0
    assert handler.events == [
        ("add", "a", False),
        ("start", "add", "b", False),
        ("add", "b", False),
        ("add", "c", False),
        ("add", "d", False),
        ("add", "e", False),
    ]


@pytest.mark.asyncio
async def test_a_suspension_in_the_middle_of_a_batch_keeps_the_rest_of_it_in_order() -> None:
    gate = asyncio.Event()
    handler = AsyncRecorder(gates={"b": gate})
    informer, source, _ = setup("a", "b", "c", "d")
    informer.add_event_handler(handler)
    async with running(informer):
        assert handler.events == [("add", "a", True), ("start", "add", "b", True)]
        source.add(pod("e"))
        await settle()
        assert handler.events[-1] == ("start", "add", "b", True)
        gate.set()
        await settle()
    assert handler.events[2:] == [
        ("add", "b", True),
        ("add", "c", True),
        ("add", "d", True),
        ("add", "e", False),
    ]


@pytest.mark.asyncio
async def test_a_coroutine_handler_raising_before_any_await_is_logged_and_delivery_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    async def on_add(obj: Any, is_in_initial_list: bool) -> None:
        if name_of(obj) == "bad":
            raise RuntimeError("handler failure")
        seen.append(name_of(obj))

    informer, source, _ = setup("a")
    informer.add_event_handler(ResourceEventHandlerDetailedFuncs(on_add=on_add))
    with caplog.at_level(logging.ERROR, logger="kubereflector.shared_informer"):
        async with running(informer):
            source.add(pod("bad"))
            source.add(pod("c"))
            await settle()
            stats = informer.stats().handlers[0]
    assert seen == ["a", "c"]
    assert (stats.failures, stats.delivered) == (1, 2)
    (record,) = caplog.records
    assert "failed on the add of 'default/bad'" in record.getMessage()
    assert record.exc_info is not None


@pytest.mark.asyncio
async def test_a_suspended_coroutine_handler_is_cancelled_when_the_informer_stops() -> None:
    entered = asyncio.Event()
    outcome: list[str] = []

    async def on_add(obj: Any, is_in_initial_list: bool) -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        finally:
            outcome.append("finally")

    informer, source, _ = setup()
    registration = informer.add_event_handler(ResourceEventHandlerDetailedFuncs(on_add=on_add))
    task = asyncio.create_task(informer.run())
    await settle()
    source.add(pod("a"))
    source.add(pod("b"))  # buffered behind a: never started
    await asyncio.wait_for(entered.wait(), WAIT)
    await settle()
    assert registration.pending == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT)
    assert outcome == ["cancelled", "finally"]
    assert informer.is_stopped()


@pytest.mark.asyncio
async def test_values_and_exceptions_reach_a_resumed_coroutine_handler() -> None:
    loop = asyncio.get_running_loop()
    value: asyncio.Future[str] = loop.create_future()
    failure: asyncio.Future[str] = loop.create_future()
    error = LookupError("from the future")
    seen: list[Any] = []

    async def on_add(obj: Any, is_in_initial_list: bool) -> None:
        if name_of(obj) == "b":
            seen.append(("value", await value))
            try:
                await failure
            except LookupError as caught:
                seen.append(("caught", caught))
            return
        seen.append(name_of(obj))

    informer, source, _ = setup()
    registration = informer.add_event_handler(ResourceEventHandlerDetailedFuncs(on_add=on_add))
    async with running(informer):
        for name in ("a", "b", "c"):
            source.add(pod(name))
        await settle()
        assert seen == ["a"]
        value.set_result("forty-two")
        await settle()
        assert seen == ["a", ("value", "forty-two")]
        failure.set_exception(error)
        await settle()
        stats = informer.stats().handlers[0]
    assert seen == ["a", ("value", "forty-two"), ("caught", error), "c"]
    assert seen[2][1] is error
    assert (stats.delivered, stats.failures) == (3, 0)
    assert registration.pending == 0


@pytest.mark.asyncio
async def test_a_registration_syncs_only_once_a_suspended_initial_add_has_finished() -> None:
    gate = asyncio.Event()
    handler = AsyncRecorder(gates={"b": gate})
    informer, _source, _ = setup("a", "b", "c")
    registration = informer.add_event_handler(handler)
    async with running(informer):
        assert informer.has_synced()
        assert not registration.has_synced()
        waiting = asyncio.create_task(wait_for_cache_sync(registration))
        await settle()
        assert not waiting.done()
        assert not registration.has_synced()
        gate.set()
        assert await asyncio.wait_for(waiting, WAIT) is True
        assert registration.has_synced()
    assert handler.events[-2:] == [("add", "b", True), ("add", "c", True)]


@pytest.mark.asyncio
async def test_a_coroutine_handler_can_remove_its_own_registration() -> None:
    informer, source, _ = setup()
    seen: list[str] = []
    holder: list[Registration] = []

    async def on_add(obj: Any, is_in_initial_list: bool) -> None:
        seen.append(name_of(obj))
        informer.remove_event_handler(holder[0])

    witness = AsyncRecorder()
    holder.append(informer.add_event_handler(ResourceEventHandlerDetailedFuncs(on_add=on_add)))
    kept = informer.add_event_handler(witness)
    async with running(informer):
        source.add(pod("a"))
        source.add(pod("b"))
        await settle()
        assert holder[0].is_removed()
        assert informer.registrations == [kept]
        assert len(informer.stats().handlers) == 1
    assert seen == ["a"]
    assert witness.events == [("add", "a", False), ("add", "b", False)]


@pytest.mark.asyncio
async def test_a_handler_added_from_a_coroutine_handler_gets_the_cache_then_the_changes() -> None:
    informer, source, _ = setup("a", "b")
    late = AsyncRecorder()
    added: list[Registration] = []

    async def on_add(obj: Any, is_in_initial_list: bool) -> None:
        if name_of(obj) == "trigger":
            added.append(informer.add_event_handler(late))

    informer.add_event_handler(ResourceEventHandlerDetailedFuncs(on_add=on_add))
    async with running(informer):
        source.add(pod("trigger"))
        await settle()
        source.add(pod("after"))
        await settle()
        (registration,) = added
        assert await asyncio.wait_for(wait_for_cache_sync(registration), WAIT)
    assert sorted(late.events[:3]) == [
        ("add", "a", True),
        ("add", "b", True),
        ("add", "trigger", True),
    ]
    assert late.events[3:] == [("add", "after", False)]
