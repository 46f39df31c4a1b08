"""WorkQueue: client-go's queue_test.go behaviours, and priorities (controller-runtime)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Hashable
from typing import TypeVar

import pytest

from kubereflector import QueueClosed
from kubereflector.testing import settle
from kubereflector.workqueue import NotProcessingError, QueueEmpty, QueueShutDown, WorkQueue

T = TypeVar("T", bound=Hashable)


def drain(q: WorkQueue[T]) -> list[T]:
    """Get every queued item (marking each as processing)."""
    out = []
    while len(q):
        out.append(q.get_nowait())
    return out


# -- dedup, order, processing ------------------------------------------------------------


def test_first_add_order_and_dedup() -> None:
    q: WorkQueue[str] = WorkQueue()
    for item in ["a", "b", "a", "c", "b", "a"]:
        q.add(item)
    assert len(q) == 3
    assert drain(q) == ["a", "b", "c"]
    assert len(q) == 0


def test_get_nowait_on_an_empty_queue_raises_queue_empty() -> None:
    q: WorkQueue[str] = WorkQueue()
    with pytest.raises(QueueEmpty):
        q.get_nowait()


def test_an_item_being_processed_is_not_handed_out_again() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert q.get_nowait() == "a"
    q.add("a")  # dirty while processing
    assert len(q) == 0
    with pytest.raises(QueueEmpty):
        q.get_nowait()
    q.done("a")
    assert len(q) == 1
    assert q.get_nowait() == "a"
    q.done("a")
    assert len(q) == 0


def test_readds_while_processing_collapse_into_one() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    item = q.get_nowait()
    for _ in range(5):
        q.add("a")
    q.done(item)
    assert drain(q) == ["a"]


def test_an_item_readded_while_processing_goes_to_the_end() -> None:
    """client-go TestAddWhileProcessing/TestReinsert: the item queues up again
    behind what was added meanwhile."""
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    assert q.get_nowait() == "a"
    q.add("a")
    q.add("c")
    q.done("a")
    assert drain(q) == ["b", "c", "a"]


def test_done_without_processing_raises() -> None:
    q: WorkQueue[str] = WorkQueue(name="jobs")
    with pytest.raises(NotProcessingError, match=r"done\('x'\) on work queue 'jobs'"):
        q.done("x")
    q.add("x")
    with pytest.raises(NotProcessingError):
        q.done("x")  # queued is not processing
    assert q.get_nowait() == "x"
    q.done("x")
    with pytest.raises(NotProcessingError, match="done twice"):
        q.done("x")


def test_items_are_any_hashable_values() -> None:
    q: WorkQueue[tuple[str, str]] = WorkQueue()
    q.add(("default", "a"))
    q.add(("default", "a"))
    q.add(("kube-system", "a"))
    assert drain(q) == [("default", "a"), ("kube-system", "a")]


def test_an_unhashable_item_raises_type_error_and_changes_nothing() -> None:
    q: WorkQueue[object] = WorkQueue()
    with pytest.raises(TypeError):
        q.add(["not", "hashable"])
    assert len(q) == 0


def test_items_are_released_after_done() -> None:
    """client-go TestGarbageCollection: the queue keeps no reference once done."""

    class Key:
        pass

    q: WorkQueue[Key] = WorkQueue()
    key = Key()
    ref = weakref.ref(key)
    q.add(key)
    q.done(q.get_nowait())
    del key
    gc.collect()
    assert ref() is None


# -- priorities --------------------------------------------------------------------------


def test_higher_priority_first_then_first_add_order() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("low-1", priority=-100)
    q.add("a")
    q.add("high-1", priority=10)
    q.add("low-2", priority=-100)
    q.add("b")
    q.add("high-2", priority=10)
    assert drain(q) == ["high-1", "high-2", "a", "b", "low-1", "low-2"]


def test_adding_a_queued_item_with_a_higher_priority_raises_it() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("x", priority=-100)
    q.add("y", priority=-100)
    q.add("a")
    q.add("b")
    q.add("y")  # raised to 0: behind a and b
    q.add("x", priority=-5)  # raised, but still below 0
    q.add("a", priority=-100)  # a lower priority changes nothing
    assert len(q) == 4
    assert drain(q) == ["a", "b", "y", "x"]


def test_a_raised_item_readded_to_its_old_priority_keeps_its_new_place() -> None:
    """The entry a raise leaves behind is skipped, also once the item is back."""
    q: WorkQueue[str] = WorkQueue()
    q.add("x", priority=-1)
    q.add("y", priority=-1)
    q.add("x", priority=5)
    assert q.get_nowait() == "x"
    q.done("x")
    q.add("x", priority=-1)  # behind y now
    assert drain(q) == ["y", "x"]


def test_priority_of_a_readd_while_processing_is_the_highest_asked() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert q.get_nowait() == "a"
    q.add("a", priority=-100)
    q.add("a", priority=7)
    q.add("a", priority=3)
    q.add("b", priority=5)
    q.done("a")
    assert drain(q) == ["a", "b"]


def test_many_distinct_priorities() -> None:
    q: WorkQueue[int] = WorkQueue()
    for i in range(50):
        q.add(i, priority=(i * 7) % 13)
    got = []
    while len(q):
        item = q.get_nowait()
        got.append(item)
        q.done(item)
    assert got == sorted(range(50), key=lambda i: (-((i * 7) % 13), i))


# -- asyncio -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_get_waits_for_an_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    task = asyncio.create_task(q.get())
    await settle()
    assert not task.done()
    q.add("a")
    assert await asyncio.wait_for(task, 5) == "a"


@pytest.mark.asyncio
async def test_cancelling_a_get_takes_nothing() -> None:
    q: WorkQueue[str] = WorkQueue()
    task = asyncio.create_task(q.get())
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    q.add("a")
    assert q.get_nowait() == "a"


@pytest.mark.asyncio
async def test_a_cancelled_woken_get_passes_its_wakeup_on() -> None:
    q: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await settle()
    q.add("a")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await asyncio.wait_for(second, 5) == "a"


@pytest.mark.asyncio
async def test_each_waiting_worker_gets_a_different_item() -> None:
    q: WorkQueue[int] = WorkQueue()
    tasks = [asyncio.create_task(q.get()) for _ in range(10)]
    await settle()
    for i in range(10):
        q.add(i)
    assert sorted(await asyncio.wait_for(asyncio.gather(*tasks), 5)) == list(range(10))


@pytest.mark.asyncio
async def test_an_item_get_hands_out_without_waiting_is_being_processed() -> None:
    """``await get()`` with an item ready hands it out at once (its fast path);
    the item is then being processed like any other."""
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    assert await q.get() == "a"
    q.add("a")  # being processed: queued again only after done
    assert await q.get() == "b"
    with pytest.raises(QueueEmpty):
        q.get_nowait()
    q.done("a")
    assert await q.get() == "a"
    q.done("a")
    q.done("b")
    with pytest.raises(NotProcessingError):
        q.done("a")


@pytest.mark.asyncio
async def test_get_without_waiting_follows_priorities_and_raises() -> None:
    q: WorkQueue[str] = WorkQueue()
    for item in ("a", "b", "c"):
        q.add(item)
    q.add("c", priority=5)  # raised: first now; its old entry is skipped
    q.add("low", priority=-1)
    q.add("d")
    got = [await q.get() for _ in range(5)]
    assert got == ["c", "a", "b", "d", "low"]
    for item in got:
        q.done(item)
    # Only priority 0 again: first-add order.
    q.add("y")
    q.add("x")
    assert [await q.get(), await q.get()] == ["y", "x"]


@pytest.mark.asyncio
async def test_get_with_priority_hands_out_the_priority_an_item_was_queued_at() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("low", priority=-100)
    q.add("raised", priority=-100)
    q.add("raised", priority=3)
    q.add("plain")
    assert await q.get_with_priority() == ("raised", 3)
    assert await q.get_with_priority() == ("plain", 0)
    waiting = asyncio.create_task(q.get_with_priority())
    assert await waiting == ("low", -100)
    empty = asyncio.create_task(q.get_with_priority())
    await settle()
    q.done("low")
    q.add("later", priority=7)
    assert await asyncio.wait_for(empty, 5) == ("later", 7)
    # Added again while processing: queued again at the priority asked then.
    q.add("plain", priority=2)
    q.done("plain")
    assert await q.get_with_priority() == ("plain", 2)


# -- shutting down -----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_shut_down_wakes_idle_workers_with_queue_shut_down() -> None:
    q: WorkQueue[str] = WorkQueue()
    task = asyncio.create_task(q.get())
    await settle()
    q.shut_down()
    with pytest.raises(QueueShutDown):
        await asyncio.wait_for(task, 5)
    assert q.shutting_down()


def test_after_shut_down_adds_are_ignored_and_the_rest_is_handed_out() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.shut_down()
    q.add("c")
    assert len(q) == 2
    assert q.get_nowait() == "a"
    assert q.get_nowait() == "b"
    with pytest.raises(QueueShutDown):
        q.get_nowait()


def test_queue_shut_down_is_a_queue_closed() -> None:
    assert issubclass(QueueShutDown, QueueClosed)


def test_done_after_shut_down_still_requeues_a_dirty_item() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    item = q.get_nowait()
    q.add("a")
    q.shut_down()
    with pytest.raises(QueueShutDown):
        q.get_nowait()
    q.done(item)
    assert q.get_nowait() == "a"
    q.done("a")
    with pytest.raises(QueueShutDown):
        q.get_nowait()


@pytest.mark.asyncio
async def test_shut_down_with_drain_waits_for_queued_and_processing_items() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    first = q.get_nowait()
    drained = asyncio.create_task(q.shut_down_with_drain())
    await settle()
    assert not drained.done()
    assert q.shutting_down()
    second = q.get_nowait()  # still handed out while draining
    q.done(first)
    await settle()
    assert not drained.done()  # b is still being processed
    q.done(second)
    await asyncio.wait_for(drained, 5)
    with pytest.raises(QueueShutDown):
        q.get_nowait()


@pytest.mark.asyncio
async def test_shut_down_with_drain_waits_for_a_dirty_item_to_be_processed_again() -> None:
    """client-go TestQueueDrainageUsingShutDownWithDrainWithDirtyItem."""
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    gotten = q.get_nowait()
    q.add("foo")
    drained = asyncio.create_task(q.shut_down_with_drain())
    await settle()
    with pytest.raises(QueueShutDown):
        q.get_nowait()  # nothing queued now: a worker would stop
    q.done(gotten)  # ...but done queues foo again
    again = q.get_nowait()
    assert again == "foo"
    await settle()
    assert not drained.done()
    q.done(again)
    await asyncio.wait_for(drained, 5)


@pytest.mark.asyncio
async def test_shut_down_with_drain_returns_at_once_when_idle() -> None:
    q: WorkQueue[str] = WorkQueue()
    await asyncio.wait_for(q.shut_down_with_drain(), 5)
    assert q.shutting_down()


@pytest.mark.asyncio
async def test_shut_down_does_not_wait_and_ends_a_drain() -> None:
    """client-go TestNoQueueDrainageUsingShutDown / TestForceQueueShutdownUsingShutDown."""
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    q.add("bar")
    q.get_nowait()
    q.get_nowait()
    drained = asyncio.create_task(q.shut_down_with_drain())
    await settle()
    assert not drained.done()
    q.shut_down()  # a second Ctrl-C: stop waiting for the workers
    await asyncio.wait_for(drained, 5)


@pytest.mark.asyncio
async def test_a_cancelled_drain_leaves_the_queue_shut_down() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.get_nowait()
    drained = asyncio.create_task(q.shut_down_with_drain())
    await settle()
    drained.cancel()
    with pytest.raises(asyncio.CancelledError):
        await drained
    assert q.shutting_down()
    q.done("a")


def test_repr_names_the_queue_and_its_state() -> None:
    q: WorkQueue[str] = WorkQueue(name="pods")
    q.add("a")
    q.add("b")
    q.get_nowait()
    assert repr(q) == "<WorkQueue 'pods' queued=1 processing=1>"
    q.shut_down()
    assert repr(q).endswith("shutting down>")
