"""DeltaFIFO: client-go's semantics, the blocking pop and its wakeups."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest

from kubereflector import (
    DeletedFinalStateUnknown,
    Delta,
    DeltaFIFO,
    Deltas,
    DeltaType,
    ExplicitKey,
    KeyFuncError,
    KeyListerGetter,
    Queue,
    QueueClosed,
    QueueEmpty,
    ReflectorStore,
    meta_namespace_key_func,
    new_store,
)

ADDED = DeltaType.ADDED
UPDATED = DeltaType.UPDATED
DELETED = DeltaType.DELETED
REPLACED = DeltaType.REPLACED
SYNC = DeltaType.SYNC


def obj(name: str, rv: str = "1", namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}}


def key(name: str) -> str:
    return f"ns/{name}"


class Recorder:
    """A process function that records what it was handed."""

    def __init__(self) -> None:
        self.calls: list[tuple[Deltas, bool]] = []

    def __call__(self, deltas: Deltas, is_in_initial_list: bool) -> None:
        self.calls.append((deltas, is_in_initial_list))


def drain(q: DeltaFIFO) -> list[tuple[Deltas, bool]]:
    rec = Recorder()
    while len(q):
        q.pop_nowait(rec)
    with pytest.raises(QueueEmpty):
        q.pop_nowait(rec)
    return rec.calls


def types(deltas: Deltas) -> list[DeltaType]:
    return [d.type for d in deltas]


def known(*objs: dict[str, Any]) -> KeyListerGetter:
    store = new_store()
    for o in objs:
        store.add(o)
    return store


# -- types ------------------------------------------------------------------


def test_delta_type_values_and_str() -> None:
    assert [t.value for t in DeltaType] == [
        "Added",
        "Updated",
        "Deleted",
        "Replaced",
        "Sync",
        "ReplacedAll",
        "SyncAll",
    ]
    assert DeltaType("Sync") is SYNC
    assert DeltaType.ADDED == "Added"
    assert str(DeltaType.DELETED) == "Deleted"
    assert f"{DeltaType.REPLACED}" == "Replaced"


def test_deltas_oldest_newest() -> None:
    assert Deltas().oldest() is None
    assert Deltas().newest() is None
    d = Deltas([Delta(ADDED, 1), Delta(UPDATED, 2)])
    assert d.oldest() == Delta(ADDED, 1)
    assert d.newest() == Delta(UPDATED, 2)
    newest = d.newest()
    assert newest is not None
    assert newest.object == 2
    assert isinstance(d, list)
    assert "Deltas(" in repr(d)


def test_delta_fifo_is_a_queue_and_reflector_store() -> None:
    q = DeltaFIFO()
    assert isinstance(q, Queue)
    assert isinstance(q, ReflectorStore)


# -- add / update / delete, order ---------------------------------------------


def test_keys_pop_in_first_queued_order_with_all_their_deltas() -> None:
    q = DeltaFIFO()
    q.add(obj("a", "1"))
    q.add(obj("b", "1"))
    q.update(obj("a", "2"))
    q.add(obj("c", "1"))
    q.delete(obj("b", "1"))
    assert q.list_keys() == [key("a"), key("b"), key("c")]
    calls = drain(q)
    assert [q.key_of(d) for d, _ in calls] == [key("a"), key("b"), key("c")]
    assert calls[0][0] == [Delta(ADDED, obj("a", "1")), Delta(UPDATED, obj("a", "2"))]
    assert types(calls[1][0]) == [ADDED, DELETED]
    assert types(calls[2][0]) == [ADDED]
    assert len(q) == 0
    assert q.list_keys() == []


def test_popped_key_is_gone_and_a_new_add_queues_it_at_the_back() -> None:
    q = DeltaFIFO()
    q.add(obj("a"))
    q.add(obj("b"))
    popped = q.pop_nowait(Recorder())
    assert q.key_of(popped) == key("a")
    assert q.get_by_key(key("a")) is None
    q.update(obj("a", "2"))
    assert q.list_keys() == [key("b"), key("a")]
    assert types(q.get_by_key(key("a")) or Deltas()) == [UPDATED]


def test_pop_returns_the_deltas_handed_to_process() -> None:
    q = DeltaFIFO()
    q.add(obj("a"))
    rec = Recorder()
    result = q.pop_nowait(rec)
    assert rec.calls == [(result, False)]
    assert isinstance(result, Deltas)


def test_list_get_and_get_by_key_return_copies() -> None:
    q = DeltaFIFO()
    q.add(obj("a", "1"))
    q.update(obj("a", "2"))
    q.add(obj("b", "1"))
    assert q.list() == [obj("a", "2"), obj("b", "1")]
    got = q.get(obj("a"))
    assert got == [Delta(ADDED, obj("a", "1")), Delta(UPDATED, obj("a", "2"))]
    assert isinstance(got, Deltas)
    got.clear()
    assert len(q.get_by_key(key("a")) or []) == 2
    assert q.get(obj("zzz")) is None
    assert q.get_by_key("nope") is None


# -- delete dedup and ignoring ----------------------------------------------


def test_two_deletes_collapse_keeping_the_older() -> None:
    q = DeltaFIFO()
    q.add(obj("a", "1"))
    q.delete(obj("a", "2"))
    q.delete(obj("a", "3"))
    assert q.get_by_key(key("a")) == [Delta(ADDED, obj("a", "1")), Delta(DELETED, obj("a", "2"))]


def test_delete_after_a_tombstone_replaces_the_tombstone() -> None:
    q = DeltaFIFO()
    q.add(obj("a", "1"))
    q.replace([], "10")  # tombstone for a
    tombstone = DeletedFinalStateUnknown(key("a"), obj("a", "1"))
    assert q.get_by_key(key("a")) == [Delta(ADDED, obj("a", "1")), Delta(DELETED, tombstone)]
    q.delete(obj("a", "2"))
    assert q.get_by_key(key("a")) == [Delta(ADDED, obj("a", "1")), Delta(DELETED, obj("a", "2"))]


def test_tombstone_after_a_delete_is_dropped() -> None:
    q = DeltaFIFO()
    q.add(obj("a", "1"))
    q.delete(obj("a", "2"))
    q.delete(DeletedFinalStateUnknown(key("a"), obj("a", "1")))
    assert types(q.get_by_key(key("a")) or Deltas()) == [ADDED, DELETED]
    assert (q.get_by_key(key("a")) or Deltas())[-1].object == obj("a", "2")


def test_delete_of_an_unknown_unqueued_key_is_ignored() -> None:
    q = DeltaFIFO()
    q.delete(obj("a"))
    assert q.list_keys() == []
    q2 = DeltaFIFO(known_objects=known(obj("b")))
    q2.delete(obj("a"))
    assert q2.list_keys() == []


def test_delete_of_a_known_key_is_queued() -> None:
    q = DeltaFIFO(known_objects=known(obj("a")))
    q.delete(obj("a", "2"))
    assert q.get_by_key(key("a")) == [Delta(DELETED, obj("a", "2"))]


def test_ignored_delete_still_counts_as_populated() -> None:
    q = DeltaFIFO()
    q.delete(obj("a"))
    assert q.has_synced()


# -- replace ------------------------------------------------------------------


def test_replace_with_known_objects_queues_replaced_then_tombstones() -> None:
    store = known(obj("a", "1"), obj("gone", "1"))
    q = DeltaFIFO(known_objects=store, emit_delta_type_replaced=True)
    q.replace([obj("a", "2"), obj("new", "1")], "5")
    assert q.list_keys() == [key("a"), key("new"), key("gone")]
    assert q.get_by_key(key("a")) == [Delta(REPLACED, obj("a", "2"))]
    assert q.get_by_key(key("new")) == [Delta(REPLACED, obj("new", "1"))]
    assert q.get_by_key(key("gone")) == [
        Delta(DELETED, DeletedFinalStateUnknown(key("gone"), obj("gone", "1")))
    ]


def test_replace_emits_sync_unless_replaced_is_asked_for() -> None:
    q = DeltaFIFO()
    q.replace([obj("a")], "1")
    assert types(q.get_by_key(key("a")) or Deltas()) == [SYNC]


def test_replace_without_known_objects_tombstones_queued_keys_missing_from_items() -> None:
    q = DeltaFIFO()
    q.add(obj("a", "1"))
    q.update(obj("a", "2"))
    q.add(obj("b", "1"))
    q.replace([obj("b", "2")], "7")
    assert q.get_by_key(key("a")) == [
        Delta(ADDED, obj("a", "1")),
        Delta(UPDATED, obj("a", "2")),
        Delta(DELETED, DeletedFinalStateUnknown(key("a"), obj("a", "2"))),
    ]
    assert types(q.get_by_key(key("b")) or Deltas()) == [ADDED, SYNC]


def test_replace_with_known_objects_also_tombstones_queued_keys_missing_from_items() -> None:
    # Newest client-go: the pre-existing keys are the union of queued and known keys.
    q = DeltaFIFO(known_objects=known(obj("k", "1")))
    q.add(obj("queued", "1"))
    q.replace([], "2")
    assert q.get_by_key(key("queued")) == [
        Delta(ADDED, obj("queued", "1")),
        Delta(DELETED, DeletedFinalStateUnknown(key("queued"), obj("queued", "1"))),
    ]
    assert q.get_by_key(key("k")) == [
        Delta(DELETED, DeletedFinalStateUnknown(key("k"), obj("k", "1")))
    ]


def test_replace_tombstone_holds_the_newest_queued_object_over_the_known_one() -> None:
    q = DeltaFIFO(known_objects=known(obj("a", "1")))
    q.update(obj("a", "2"))
    q.replace([], "3")
    newest = (q.get_by_key(key("a")) or Deltas()).newest()
    assert newest == Delta(DELETED, DeletedFinalStateUnknown(key("a"), obj("a", "2")))


def test_replace_unwraps_a_queued_tombstone() -> None:
    q = DeltaFIFO()
    q.add(obj("a", "1"))
    q.replace([], "2")  # queues tombstone(a, obj a1)
    q.replace([], "3")  # tombstone of a tombstone: unwrapped, then deduped away
    deltas = q.get_by_key(key("a")) or Deltas()
    assert deltas == [
        Delta(ADDED, obj("a", "1")),
        Delta(DELETED, DeletedFinalStateUnknown(key("a"), obj("a", "1"))),
    ]
    # The unwrapping is visible when the dedup keeps the newer tombstone.
    q2 = DeltaFIFO()
    q2.add(obj("b", "1"))
    q2.replace([], "2")
    q2.replace([], "3")
    last = (q2.get_by_key(key("b")) or Deltas())[-1].object
    assert last == DeletedFinalStateUnknown(key("b"), obj("b", "1"))
    assert not isinstance(last.obj, DeletedFinalStateUnknown)


def test_replace_tombstone_for_a_key_no_longer_in_known_objects_has_no_object() -> None:
    class Racy:
        def list_keys(self) -> list[str]:
            return [key("ghost")]

        def get_by_key(self, k: str) -> Any | None:
            return None

    q = DeltaFIFO(known_objects=Racy())
    q.replace([], "1")
    assert q.get_by_key(key("ghost")) == [
        Delta(DELETED, DeletedFinalStateUnknown(key("ghost"), None))
    ]


def test_replace_key_error_leaves_queue_unchanged() -> None:
    q = DeltaFIFO(known_objects=known(obj("k")))
    q.add(obj("a"))
    with pytest.raises(KeyFuncError):
        q.replace([obj("b"), {"metadata": {}}], "1")
    assert q.list_keys() == [key("a")]
    assert types(q.get_by_key(key("a")) or Deltas()) == [ADDED]


# -- resync -------------------------------------------------------------------


def test_resync_queues_sync_for_known_objects_with_nothing_pending() -> None:
    store = known(obj("a", "1"), obj("b", "1"))
    q = DeltaFIFO(known_objects=store)
    q.update(obj("a", "2"))
    q.resync()
    assert q.get_by_key(key("a")) == [Delta(UPDATED, obj("a", "2"))]
    assert q.get_by_key(key("b")) == [Delta(SYNC, obj("b", "1"))]
    q.resync()  # b is pending now: nothing more
    assert q.get_by_key(key("b")) == [Delta(SYNC, obj("b", "1"))]


def test_resync_without_known_objects_does_nothing() -> None:
    q = DeltaFIFO()
    q.add(obj("a"))
    q.resync()
    assert types(q.get_by_key(key("a")) or Deltas()) == [ADDED]


# -- has_synced and is_in_initial_list ------------------------------------------


def test_has_synced_after_the_first_replace_is_popped_tombstones_included() -> None:
    q = DeltaFIFO(known_objects=known(obj("gone")))
    assert not q.has_synced()
    q.replace([obj("a"), obj("b")], "1")
    assert not q.has_synced()
    q.add(obj("c"))  # after the first replace: not part of the initial list
    flags: list[bool] = []
    synced: list[bool] = []
    for _ in range(4):
        q.pop_nowait(lambda d, initial: flags.append(initial))
        synced.append(q.has_synced())
    assert flags == [True, True, True, False]
    assert synced == [False, False, True, True]


def test_has_synced_at_once_when_an_add_comes_before_any_replace() -> None:
    q = DeltaFIFO()
    q.add(obj("a"))
    assert q.has_synced()
    q.replace([obj("b"), obj("c")], "1")
    assert q.has_synced()
    assert [initial for _, initial in drain(q)] == [False, False, False]


def test_has_synced_at_once_after_an_empty_first_replace() -> None:
    q = DeltaFIFO()
    q.replace([], "1")
    assert q.has_synced()


def test_has_synced_stays_false_while_the_last_initial_item_is_processed() -> None:
    q = DeltaFIFO()
    q.replace([obj("a")], "1")
    seen: list[bool] = []
    q.pop_nowait(lambda d, initial: seen.append(q.has_synced()))
    assert seen == [False]
    assert q.has_synced()


def test_only_the_first_replace_defines_the_initial_list() -> None:
    q = DeltaFIFO()
    q.replace([obj("a")], "1")
    q.replace([obj("a"), obj("b")], "2")
    flags = [initial for _, initial in drain(q)]
    assert flags == [True, False]
    assert q.has_synced()


# -- transformer --------------------------------------------------------------


def test_transformer_runs_once_per_entering_object_not_for_sync_or_tombstones() -> None:
    seen: list[Any] = []

    def transform(o: Any) -> Any:
        seen.append(o)
        return {**o, "transformed": True}

    store = new_store()
    q = DeltaFIFO(known_objects=store, transformer=transform)
    q.add(obj("a"))
    q.replace([obj("b")], "1")  # a is missing: tombstone, not transformed
    assert len(seen) == 2
    deltas = q.get_by_key(key("a")) or Deltas()
    assert deltas[0].object["transformed"] is True
    assert isinstance(deltas[1].object, DeletedFinalStateUnknown)
    for d, _ in drain(q):
        if d[-1].type is not DELETED:
            store.add(d[-1].object)
    q.resync()  # Sync of b: taken from the store, not transformed again
    assert len(seen) == 2
    assert (q.get_by_key(key("b")) or Deltas())[0] == Delta(SYNC, {**obj("b"), "transformed": True})
    q.delete(obj("b"))
    assert len(seen) == 3
    q.delete(obj("never"))  # ignored: not transformed
    assert len(seen) == 3


def test_transformer_error_propagates_and_queues_nothing() -> None:
    def boom(o: Any) -> Any:
        raise RuntimeError("no")

    q = DeltaFIFO(transformer=boom)
    with pytest.raises(RuntimeError):
        q.add(obj("a"))
    with pytest.raises(RuntimeError):
        q.replace([obj("a")], "1")
    assert q.list_keys() == []
    assert not q.has_synced()


# -- keys -----------------------------------------------------------------------


def test_tombstone_is_keyed_by_its_own_key_whatever_the_key_func() -> None:
    q = DeltaFIFO(key_func=lambda o: "custom-" + o["metadata"]["name"])
    q.add(obj("a"))
    assert q.list_keys() == ["custom-a"]
    tombstone = DeletedFinalStateUnknown("custom-a", obj("a"))
    assert q.key_of(tombstone) == "custom-a"
    q.delete(tombstone)
    assert types(q.get_by_key("custom-a") or Deltas()) == [ADDED, DELETED]


def test_key_of_deltas_uses_the_newest_object() -> None:
    q = DeltaFIFO()
    d = Deltas([Delta(ADDED, obj("x")), Delta(DELETED, DeletedFinalStateUnknown("k", None))])
    assert q.key_of(d) == "k"
    assert q.key_of(Deltas([Delta(ADDED, obj("x"))])) == key("x")
    assert q.key_of(ExplicitKey("explicit")) == "explicit"
    with pytest.raises(KeyFuncError):
        q.key_of(Deltas())


def test_key_func_error_propagates_and_leaves_the_queue_unchanged() -> None:
    q = DeltaFIFO(key_func=meta_namespace_key_func)
    with pytest.raises(KeyFuncError):
        q.add({"metadata": {"namespace": "x"}})
    with pytest.raises(KeyFuncError):
        q.update({"no": "metadata"})
    with pytest.raises(KeyFuncError):
        q.delete({"no": "metadata"})
    assert q.list_keys() == []
    assert not q.has_synced()


# -- pop: errors, closing, waiting -------------------------------------------------


def test_pop_nowait_on_an_empty_queue_raises_queue_empty() -> None:
    q = DeltaFIFO()
    with pytest.raises(QueueEmpty):
        q.pop_nowait(Recorder())


def test_exception_from_process_propagates_and_the_item_is_not_requeued() -> None:
    q = DeltaFIFO()
    q.add(obj("a"))
    q.add(obj("b"))

    def fail(d: Deltas, initial: bool) -> None:
        raise ValueError("handler failed")

    with pytest.raises(ValueError, match="handler failed"):
        q.pop_nowait(fail)
    assert q.list_keys() == [key("b")]


def test_process_may_call_read_methods_under_the_lock() -> None:
    q = DeltaFIFO()
    q.add(obj("a"))
    q.add(obj("b"))
    seen: list[Any] = []
    q.pop_nowait(lambda d, initial: seen.append((q.key_of(d), q.list_keys(), q.has_synced())))
    assert seen == [(key("a"), [key("b")], True)]


def test_closed_queue_pops_remaining_items_then_raises() -> None:
    q = DeltaFIFO()
    q.add(obj("a"))
    q.close()
    assert q.is_closed()
    q.pop_nowait(Recorder())
    with pytest.raises(QueueClosed):
        q.pop_nowait(Recorder())


@pytest.mark.asyncio
async def test_close_wakes_a_blocked_pop() -> None:
    q = DeltaFIFO()
    task = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    assert not task.done()
    q.close()
    with pytest.raises(QueueClosed):
        await asyncio.wait_for(task, 10)


@pytest.mark.asyncio
async def test_close_from_another_thread_wakes_a_blocked_pop() -> None:
    q = DeltaFIFO()
    task = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    await asyncio.to_thread(q.close)
    with pytest.raises(QueueClosed):
        await asyncio.wait_for(task, 10)


@pytest.mark.asyncio
async def test_pop_after_close_on_an_empty_queue_raises() -> None:
    q = DeltaFIFO()
    q.close()
    with pytest.raises(QueueClosed):
        await q.pop(Recorder())


@pytest.mark.asyncio
async def test_add_from_another_thread_wakes_an_asyncio_pop() -> None:
    q = DeltaFIFO()
    rec = Recorder()
    task = asyncio.create_task(q.pop(rec))
    await asyncio.sleep(0)
    assert not task.done()
    thread = threading.Thread(target=q.add, args=(obj("a"),))
    thread.start()
    result = await asyncio.wait_for(task, 10)
    thread.join()
    assert q.key_of(result) == key("a")
    assert rec.calls == [(result, False)]


@pytest.mark.asyncio
async def test_add_on_the_same_loop_wakes_a_pop() -> None:
    q = DeltaFIFO()
    task = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    q.add(obj("a"))
    assert q.key_of(await asyncio.wait_for(task, 10)) == key("a")


@pytest.mark.asyncio
async def test_replace_and_resync_wake_waiting_pops() -> None:
    store = known(obj("k"))
    q = DeltaFIFO(known_objects=store)
    t1 = asyncio.create_task(q.pop(Recorder()))
    t2 = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    q.replace([obj("k"), obj("x")], "1")
    got = {q.key_of(d) for d in await asyncio.wait_for(asyncio.gather(t1, t2), 10)}
    assert got == {key("k"), key("x")}
    t3 = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    q.resync()
    assert q.key_of(await asyncio.wait_for(t3, 10)) == key("k")


def test_pop_on_another_threads_event_loop_is_woken() -> None:
    q = DeltaFIFO()
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
    assert [q.key_of(d) for d in result] == [key("a")]


@pytest.mark.asyncio
async def test_a_cancelled_woken_waiter_passes_its_wakeup_on() -> None:
    q = DeltaFIFO()
    first = asyncio.create_task(q.pop(Recorder()))
    second = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    q.add(obj("a"))  # wakes `first`, the oldest waiter
    first.cancel()  # ...which is cancelled before it could pop
    with pytest.raises(asyncio.CancelledError):
        await first
    assert q.key_of(await asyncio.wait_for(second, 10)) == key("a")


@pytest.mark.asyncio
async def test_a_cancelled_parked_waiter_takes_no_wakeup() -> None:
    q = DeltaFIFO()
    cancelled = [asyncio.create_task(q.pop(Recorder())) for _ in range(5)]
    await asyncio.sleep(0)
    for task in cancelled:
        task.cancel()
    await asyncio.gather(*cancelled, return_exceptions=True)
    waiter = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    q.add(obj("a"))
    assert q.key_of(await asyncio.wait_for(waiter, 10)) == key("a")
    assert all(t.cancelled() for t in cancelled)


@pytest.mark.asyncio
async def test_cancelling_a_pop_pops_nothing() -> None:
    q = DeltaFIFO()
    task = asyncio.create_task(q.pop(Recorder()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    q.add(obj("a"))
    assert q.list_keys() == [key("a")]


@pytest.mark.asyncio
async def test_many_waiters_each_get_one_item() -> None:
    q = DeltaFIFO()
    tasks = [asyncio.create_task(q.pop(Recorder())) for _ in range(10)]
    await asyncio.sleep(0)
    for i in range(10):
        q.add(obj(f"o{i}"))
    results = await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert sorted(q.key_of(d) for d in results) == sorted(key(f"o{i}") for i in range(10))


def test_concurrent_producers_and_consumers_lose_nothing() -> None:
    q = DeltaFIFO()
    n_producers, per_producer = 4, 250
    popped: list[str] = []
    lock = threading.Lock()

    def record(d: Deltas, initial: bool) -> None:
        with lock:
            popped.extend(q.key_of(x.object) for x in d if x.type is ADDED)

    def produce(p: int) -> None:
        for i in range(per_producer):
            q.add(obj(f"p{p}-{i}"))

    async def consume() -> None:
        with contextlib.suppress(QueueClosed):
            while True:
                await q.pop(record)

    consumers = [threading.Thread(target=asyncio.run, args=(consume(),)) for _ in range(3)]
    producers = [threading.Thread(target=produce, args=(p,)) for p in range(n_producers)]
    for t in consumers + producers:
        t.start()
    for t in producers:
        t.join(20)
    q.close()
    for t in consumers:
        t.join(20)
        assert not t.is_alive()
    assert sorted(popped) == sorted(
        key(f"p{p}-{i}") for p in range(n_producers) for i in range(per_producer)
    )
