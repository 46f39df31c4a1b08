"""FIFO (latest object per key) and RealFIFO (every event, in order)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from kubereflector import (
    FIFO,
    DeletedFinalStateUnknown,
    Delta,
    Deltas,
    DeltaType,
    KeyFuncError,
    Queue,
    QueueClosed,
    QueueEmpty,
    RealFIFO,
    ReplacedAllInfo,
    new_store,
)

ADDED = DeltaType.ADDED
UPDATED = DeltaType.UPDATED
DELETED = DeltaType.DELETED
REPLACED = DeltaType.REPLACED
SYNC = DeltaType.SYNC
REPLACED_ALL = DeltaType.REPLACED_ALL
SYNC_ALL = DeltaType.SYNC_ALL


def obj(name: str, rv: str = "1", namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}}


def key(name: str) -> str:
    return f"ns/{name}"


def tomb(name: str, o: Any) -> DeletedFinalStateUnknown:
    return DeletedFinalStateUnknown(key(name), o)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, bool]] = []

    def __call__(self, item: Any, is_in_initial_list: bool) -> None:
        self.calls.append((item, is_in_initial_list))


def drain(q: FIFO | RealFIFO) -> list[tuple[Any, bool]]:
    rec = Recorder()
    while len(q):
        q.pop_nowait(rec)
    with pytest.raises(QueueEmpty):
        q.pop_nowait(rec)
    return rec.calls


def queued(q: RealFIFO) -> list[Delta]:
    """Every queued delta, popped in order (drains the queue)."""
    return [d for deltas, _ in drain(q) for d in deltas]


def real_fifo(*known: dict[str, Any], transformer: Any = None) -> tuple[RealFIFO, Any]:
    store = new_store()
    for o in known:
        store.add(o)
    return RealFIFO(known_objects=store, transformer=transformer), store


# == FIFO =========================================================================


def test_fifo_is_a_queue() -> None:
    assert isinstance(FIFO(), Queue)


def test_fifo_keeps_the_latest_object_per_key_in_first_queued_order() -> None:
    q = FIFO()
    q.add(obj("a", "1"))
    q.add(obj("b", "1"))
    q.update(obj("a", "2"))
    assert q.list_keys() == [key("a"), key("b")]
    assert q.list() == [obj("a", "2"), obj("b", "1")]
    assert q.get(obj("a")) == obj("a", "2")
    assert q.get_by_key(key("b")) == obj("b", "1")
    assert [item for item, _ in drain(q)] == [obj("a", "2"), obj("b", "1")]


def test_fifo_delete_drops_the_item() -> None:
    q = FIFO()
    q.add(obj("a"))
    q.add(obj("b"))
    q.delete(obj("a"))
    q.delete(obj("never"))
    assert q.list_keys() == [key("b")]
    assert q.get_by_key(key("a")) is None
    q.add(obj("a", "2"))  # back at the end
    assert q.list_keys() == [key("b"), key("a")]


def test_fifo_replace_swaps_the_content() -> None:
    q = FIFO()
    q.add(obj("a"))
    q.replace([obj("c"), obj("b"), obj("c", "2")], "1")
    assert q.list_keys() == [key("c"), key("b")]
    assert q.get_by_key(key("c")) == obj("c", "2")


def test_fifo_resync_changes_nothing() -> None:
    q = FIFO()
    q.add(obj("a"))
    q.resync()
    assert q.list_keys() == [key("a")]


def test_fifo_has_synced_after_the_first_replace_is_popped() -> None:
    q = FIFO()
    assert not q.has_synced()
    q.replace([obj("a"), obj("b")], "1")
    q.add(obj("c"))
    flags: list[bool] = []
    synced: list[bool] = []
    for _ in range(3):
        q.pop_nowait(lambda o, initial: flags.append(initial))
        synced.append(q.has_synced())
    assert flags == [True, True, False]
    assert synced == [False, True, True]


def test_fifo_has_synced_counts_a_deleted_initial_item_as_done() -> None:
    q = FIFO()
    q.replace([obj("a"), obj("b")], "1")
    q.pop_nowait(Recorder())
    q.delete(obj("b"))
    assert q.has_synced()


def test_fifo_has_synced_at_once_when_an_add_comes_first() -> None:
    q = FIFO()
    q.add(obj("a"))
    assert q.has_synced()
    q.replace([obj("b")], "1")
    assert [initial for _, initial in drain(q)] == [False]


def test_fifo_pop_hands_the_object_and_exceptions_do_not_requeue() -> None:
    q = FIFO()
    q.add(obj("a"))
    q.add(obj("b"))
    rec = Recorder()
    assert q.pop_nowait(rec) == obj("a")
    assert rec.calls == [(obj("a"), False)]

    def fail(o: Any, initial: bool) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        q.pop_nowait(fail)
    assert q.list_keys() == []


def test_fifo_key_error_leaves_the_queue_unchanged() -> None:
    q = FIFO()
    q.add(obj("a"))
    with pytest.raises(KeyFuncError):
        q.add({"metadata": {}})
    with pytest.raises(KeyFuncError):
        q.replace([obj("x"), {}], "1")
    assert q.list_keys() == [key("a")]


def test_fifo_close() -> None:
    q = FIFO()
    q.add(obj("a"))
    q.close()
    assert q.is_closed()
    assert q.pop_nowait(Recorder()) == obj("a")
    with pytest.raises(QueueClosed):
        q.pop_nowait(Recorder())


@pytest.mark.asyncio
async def test_fifo_blocking_pop_is_woken_by_add_replace_and_close() -> None:
    q = FIFO()
    task = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    await asyncio.to_thread(q.add, obj("a"))
    assert await asyncio.wait_for(task, 10) == obj("a")
    t1 = asyncio.create_task(q.pop(Recorder()))
    t2 = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    q.replace([obj("b"), obj("c")], "1")
    assert sorted(o["metadata"]["name"] for o in await asyncio.gather(t1, t2)) == ["b", "c"]
    t3 = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    q.close()
    with pytest.raises(QueueClosed):
        await asyncio.wait_for(t3, 10)


# == RealFIFO =====================================================================


def test_real_fifo_requires_known_objects() -> None:
    with pytest.raises(TypeError):
        RealFIFO()
    q, _ = real_fifo()
    assert isinstance(q, Queue)


def test_real_fifo_keeps_every_event_in_order() -> None:
    q, _ = real_fifo()
    q.add(obj("a", "1"))
    q.update(obj("b", "1"))
    q.update(obj("a", "2"))
    q.delete(obj("a", "3"))
    q.delete(obj("a", "3"))  # no dedup either
    assert len(q) == 5
    assert q.list_keys() == [key("a"), key("b")]
    assert queued(q) == [
        Delta(ADDED, obj("a", "1")),
        Delta(UPDATED, obj("b", "1")),
        Delta(UPDATED, obj("a", "2")),
        Delta(DELETED, obj("a", "3")),
        Delta(DELETED, obj("a", "3")),
    ]


def test_real_fifo_pop_hands_a_one_element_deltas() -> None:
    q, _ = real_fifo()
    q.add(obj("a"))
    q.add(obj("a", "2"))
    rec = Recorder()
    result = q.pop_nowait(rec)
    assert isinstance(result, Deltas)
    assert result == [Delta(ADDED, obj("a"))]
    assert rec.calls == [(result, False)]
    assert len(q) == 1


def test_real_fifo_delete_is_never_ignored() -> None:
    q, _ = real_fifo()
    q.delete(obj("unknown"))
    assert queued(q) == [Delta(DELETED, obj("unknown"))]


def test_real_fifo_replace_order() -> None:
    # queued: q1 (Added), q2 (Added then Deleted), kept (Added)
    # known:  k1, kept; new items: kept, fresh
    q, _ = real_fifo(obj("k1"), obj("kept"))
    q.add(obj("q1"))
    q.add(obj("q2"))
    q.add(obj("kept", "2"))
    q.update(obj("q1", "2"))
    q.delete(obj("q2"))
    q.replace([obj("kept", "3"), obj("fresh")], "9")
    assert queued(q) == [
        Delta(ADDED, obj("q1")),
        Delta(ADDED, obj("q2")),
        Delta(ADDED, obj("kept", "2")),
        Delta(UPDATED, obj("q1", "2")),
        Delta(DELETED, obj("q2")),
        # 1. queued keys missing from items, unless already deleted: q1 (its last object)
        Delta(DELETED, tomb("q1", obj("q1", "2"))),
        # 2. known keys missing from items and not queued: k1
        Delta(DELETED, tomb("k1", obj("k1"))),
        # 3. the items, in order
        Delta(REPLACED, obj("kept", "3")),
        Delta(REPLACED, obj("fresh")),
    ]


def test_real_fifo_replace_key_error_leaves_the_queue_unchanged() -> None:
    q, _ = real_fifo(obj("k"))
    q.add(obj("a"))
    with pytest.raises(KeyFuncError):
        q.replace([obj("b"), {"metadata": {"namespace": "x"}}], "1")
    assert queued(q) == [Delta(ADDED, obj("a"))]


def test_real_fifo_resync_queues_sync_for_known_objects_with_nothing_queued() -> None:
    q, _ = real_fifo(obj("a"), obj("b"))
    q.update(obj("a", "2"))
    q.resync()
    assert queued(q) == [Delta(UPDATED, obj("a", "2")), Delta(SYNC, obj("b"))]


def test_real_fifo_has_synced_and_initial_list_flags() -> None:
    q, _ = real_fifo(obj("gone"))
    assert not q.has_synced()
    q.replace([obj("a"), obj("b")], "1")  # tombstone(gone), a, b
    q.add(obj("c"))
    flags: list[bool] = []
    synced: list[bool] = []
    for _ in range(4):
        q.pop_nowait(lambda d, initial: flags.append(initial))
        synced.append(q.has_synced())
    assert flags == [True, True, True, False]
    assert synced == [False, False, True, True]


def test_real_fifo_has_synced_at_once_when_an_add_comes_first() -> None:
    q, _ = real_fifo()
    q.add(obj("a"))
    assert q.has_synced()
    q.replace([obj("b")], "1")  # tombstone for a, Replaced b
    assert [initial for _, initial in drain(q)] == [False, False, False]


def test_real_fifo_has_synced_false_while_processing_the_last_initial_delta() -> None:
    q, _ = real_fifo()
    q.replace([obj("a")], "1")
    seen: list[bool] = []
    q.pop_nowait(lambda d, initial: seen.append(q.has_synced()))
    assert seen == [False]
    assert q.has_synced()


def test_real_fifo_transformer_skips_sync_and_tombstones() -> None:
    calls: list[Any] = []

    def transform(o: Any) -> Any:
        calls.append(o)
        return {**o, "t": True}

    q, store = real_fifo(obj("k"), transformer=transform)
    q.add(obj("a"))
    q.update(obj("a", "2"))
    q.delete(obj("a", "2"))
    assert len(calls) == 3
    q.delete(tomb("x", obj("x")))
    q.replace([obj("b")], "1")  # tombstones for k; Replaced b (transformed)
    assert len(calls) == 4
    q.resync()  # Sync for k is skipped (k queued); nothing transformed
    drain(q)
    q.resync()  # Sync k from the store: not transformed
    assert len(calls) == 4
    assert queued(q) == [Delta(SYNC, obj("k"))]
    assert store.get_by_key(key("k")) == obj("k")


def test_real_fifo_exception_from_process_does_not_requeue() -> None:
    q, _ = real_fifo()
    q.add(obj("a"))
    q.add(obj("b"))

    def fail(d: Deltas, initial: bool) -> None:
        raise LookupError("x")

    with pytest.raises(LookupError):
        q.pop_nowait(fail)
    assert q.list_keys() == [key("b")]


# -- atomic mode (client-go's AtomicFIFO) -------------------------------------------


def test_atomic_real_fifo_takes_no_known_objects() -> None:
    with pytest.raises(TypeError, match="no known_objects"):
        RealFIFO(known_objects=new_store(), atomic=True)
    q = RealFIFO(atomic=True)
    assert q.atomic
    assert isinstance(q, Queue)
    assert not real_fifo()[0].atomic


def test_atomic_replace_queues_one_replaced_all_after_what_is_queued() -> None:
    q = RealFIFO(atomic=True)
    q.add(obj("a"))
    items = [obj("b"), obj("c")]
    q.replace(items, "9")
    items.append(obj("late"))  # the queue keeps its own list
    assert len(q) == 2
    assert q.list_keys() == [key("a")]
    assert queued(q) == [
        Delta(ADDED, obj("a")),
        Delta(REPLACED_ALL, ReplacedAllInfo("9", [obj("b"), obj("c")])),
    ]


def test_atomic_replace_applies_the_transformer_and_checks_keys_first() -> None:
    q = RealFIFO(transformer=lambda o: {**o, "t": True}, atomic=True)
    with pytest.raises(KeyFuncError):
        q.replace([obj("b"), {"metadata": {"namespace": "x"}}], "1")
    assert len(q) == 0
    assert not q.has_synced()
    q.replace([obj("b")], "2")
    ((deltas, initial),) = drain(q)
    assert deltas == [Delta(REPLACED_ALL, ReplacedAllInfo("2", [{**obj("b"), "t": True}]))]
    assert initial


def test_atomic_first_replace_is_the_initial_list_in_one_delta() -> None:
    q = RealFIFO(atomic=True)
    q.replace([obj("a"), obj("b")], "1")
    q.add(obj("c"))
    seen: list[tuple[bool, bool]] = []
    for _ in range(2):
        q.pop_nowait(lambda d, initial: seen.append((initial, q.has_synced())))
    assert seen == [(True, False), (False, True)]
    assert q.has_synced()


def test_atomic_resync_queues_one_sync_all() -> None:
    q = RealFIFO(atomic=True)
    q.update(obj("a", "2"))
    q.resync()
    assert queued(q) == [Delta(UPDATED, obj("a", "2")), Delta(SYNC_ALL, None)]


def test_pop_batch_takes_a_replaced_all_or_sync_all_alone() -> None:
    q = RealFIFO(atomic=True)
    q.replace([obj("a")], "1")
    q.add(obj("b"))
    q.add(obj("c"))
    q.resync()
    q.add(obj("d"))
    q.replace([obj("e")], "2")
    rec = Recorder()
    batches = []
    while len(q):
        batches.append([d.type for d in q.pop_batch_nowait(rec, max_items=10)])
    assert batches == [[REPLACED_ALL], [ADDED, ADDED], [SYNC_ALL], [ADDED], [REPLACED_ALL]]
    assert [initial for _, initial in rec.calls] == [True, False, False, False, False]


# -- pop_batch ----------------------------------------------------------------------


def test_pop_batch_takes_up_to_max_items_consecutive_deltas() -> None:
    q, _ = real_fifo()
    for i in range(5):
        q.add(obj(f"o{i}"))
    rec = Recorder()
    batch = q.pop_batch_nowait(rec, max_items=3)
    assert [d.object for d in batch] == [obj("o0"), obj("o1"), obj("o2")]
    assert rec.calls == [(batch, False)]
    assert [d.object for d in q.pop_batch_nowait(rec, max_items=3)] == [obj("o3"), obj("o4")]
    with pytest.raises(QueueEmpty):
        q.pop_batch_nowait(rec)


def test_pop_batch_ends_before_a_repeated_key() -> None:
    q, _ = real_fifo()
    q.add(obj("a"))
    q.add(obj("b"))
    q.update(obj("a", "2"))
    q.add(obj("c"))
    batch = q.pop_batch_nowait(Recorder(), max_items=10)
    assert [d.object for d in batch] == [obj("a"), obj("b")]
    batch = q.pop_batch_nowait(Recorder(), max_items=10)
    assert [d.object for d in batch] == [obj("a", "2"), obj("c")]


def test_pop_batch_never_mixes_initial_list_and_later_deltas() -> None:
    q, _ = real_fifo()
    q.replace([obj("a"), obj("b")], "1")
    q.add(obj("c"))
    q.add(obj("d"))
    rec = Recorder()
    first = q.pop_batch_nowait(rec, max_items=10)
    assert [d.object for d in first] == [obj("a"), obj("b")]
    assert q.has_synced()
    second = q.pop_batch_nowait(rec, max_items=10)
    assert [d.object for d in second] == [obj("c"), obj("d")]
    assert [initial for _, initial in rec.calls] == [True, False]


def test_pop_batch_rejects_a_non_positive_max_items() -> None:
    q, _ = real_fifo()
    q.add(obj("a"))
    with pytest.raises(ValueError, match="max_items"):
        q.pop_batch_nowait(Recorder(), max_items=0)


@pytest.mark.asyncio
async def test_pop_batch_waits_and_is_woken() -> None:
    q, _ = real_fifo()
    task = asyncio.create_task(q.pop_batch(Recorder(), max_items=10))
    await asyncio.sleep(0)
    assert not task.done()
    await asyncio.to_thread(q.replace, [obj("a"), obj("b")], "1")
    batch = await asyncio.wait_for(task, 10)
    assert [d.object for d in batch] == [obj("a"), obj("b")]  # replace queues atomically
    q.close()
    with pytest.raises(QueueClosed):
        await q.pop_batch(Recorder())


@pytest.mark.asyncio
async def test_real_fifo_close_wakes_a_blocked_pop() -> None:
    q, _ = real_fifo()
    task = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    q.close()
    with pytest.raises(QueueClosed):
        await asyncio.wait_for(task, 10)


def test_real_fifo_pop_on_another_threads_loop_is_woken_by_add() -> None:
    q, _ = real_fifo()
    result: list[Deltas] = []
    started = threading.Event()

    async def consumer() -> None:
        started.set()
        result.append(await q.pop(Recorder()))

    thread = threading.Thread(target=asyncio.run, args=(consumer(),))
    thread.start()
    assert started.wait(10)
    q.add(obj("a"))
    thread.join(10)
    assert not thread.is_alive()
    assert result == [[Delta(ADDED, obj("a"))]]
