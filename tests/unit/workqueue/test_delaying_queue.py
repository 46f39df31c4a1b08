"""DelayingQueue on a FakeClock: client-go's delaying_queue_test.go behaviours."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kubereflector.testing import FakeClock, settle
from kubereflector.workqueue import DelayingQueue, QueueEmpty, QueueShutDown


def ready(q: DelayingQueue[str]) -> list[str]:
    out = []
    while len(q):
        out.append(q.get_nowait())
    return out


@pytest.mark.asyncio
async def test_an_item_is_added_when_its_delay_has_passed() -> None:
    """client-go TestSimpleQueue."""
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 0.05)
    await clock.wait_for_sleepers(1)
    assert len(q) == 0
    await clock.advance(0.04)
    assert len(q) == 0
    await clock.advance(0.01)
    assert len(q) == 1
    assert q.get_nowait() == "foo"
    q.done("foo")
    await settle()
    assert clock.pending == []  # the timer ended with nothing left to wait for
    q.shut_down()


@pytest.mark.asyncio
async def test_a_waiting_get_is_woken_when_the_delay_passes() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 10)
    task = asyncio.create_task(q.get())
    await clock.advance(9.9)
    assert not task.done()
    await clock.advance(0.1)
    assert task.done()
    assert task.result() == "foo"
    q.shut_down()


@pytest.mark.asyncio
async def test_the_earliest_time_wins() -> None:
    """client-go TestDeduping: adding again with a later time keeps the earlier,
    adding again with an earlier time moves it forward."""
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 0.05)
    q.add_after("foo", 0.07)  # later: ignored
    await clock.advance(0.05)
    assert ready(q) == ["foo"]
    q.done("foo")

    q.add_after("foo", 0.05)
    q.add_after("foo", 0.03)  # earlier: wins
    await clock.advance(0.03)
    assert ready(q) == ["foo"]
    q.done("foo")
    await clock.advance(0.05)
    assert ready(q) == []  # the replaced time does not add it a second time
    q.shut_down()


@pytest.mark.asyncio
async def test_items_come_out_in_the_order_of_their_times() -> None:
    """client-go TestAddTwoFireEarly / TestCopyShifting."""
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 1.0)
    q.add_after("bar", 0.5)
    q.add_after("baz", 0.2)
    await clock.advance(0.6)
    assert ready(q) == ["baz", "bar"]
    q.add_after("foo", 0.1)  # earlier than its 1.0
    await clock.advance(0.1)
    assert ready(q) == ["foo"]
    q.shut_down()


@pytest.mark.asyncio
async def test_a_delay_of_zero_or_less_adds_at_once() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("now", 0)
    q.add_after("past", -3)
    assert ready(q) == ["now", "past"]
    assert clock.pending == []
    q.shut_down()


@pytest.mark.asyncio
async def test_a_due_item_that_is_queued_or_processing_follows_the_add_rules() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add("a")
    q.add_after("a", 1)
    q.add_after("b", 1)
    assert q.get_nowait() == "a"  # processing
    await clock.advance(1)
    assert ready(q) == ["b"]  # a is dirty, not queued
    q.done("a")
    assert ready(q) == ["a"]
    q.shut_down()


@pytest.mark.asyncio
async def test_delayed_items_keep_their_priority() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add("plain")
    q.add_after("urgent", 1, priority=10)
    q.add_after("low", 1, priority=-10)
    q.add_after("low", 2, priority=5)  # later time ignored, higher priority kept
    await clock.advance(1)
    assert ready(q) == ["urgent", "low", "plain"]
    q.shut_down()


@pytest.mark.asyncio
async def test_due_items_are_handed_out_without_waiting_for_the_timer() -> None:
    """A get that looks moves what is due, even before the timer runs."""
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("a", 5)
    clock.step(5)  # time moves; the timer has not run yet
    assert q.get_nowait() == "a"
    q.shut_down()


@pytest.mark.asyncio
async def test_shut_down_drops_waiting_items_and_stops_the_timer() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("a", 5)
    await clock.wait_for_sleepers(1)
    q.shut_down()
    await settle()
    assert clock.pending == []
    q.add_after("b", 1)  # ignored
    await clock.advance(10)
    with pytest.raises(QueueShutDown):
        q.get_nowait()


@pytest.mark.asyncio
async def test_shut_down_with_drain_drops_waiting_items() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("later", 5)
    q.add("now")
    item = q.get_nowait()
    drained = asyncio.create_task(q.shut_down_with_drain())
    await settle()
    assert not drained.done()
    q.done(item)
    await asyncio.wait_for(drained, 5)
    await clock.advance(10)
    with pytest.raises(QueueShutDown):
        q.get_nowait()


@pytest.mark.asyncio
async def test_add_after_from_threads_is_timed_by_the_queues_loop() -> None:
    clock = FakeClock()
    q: DelayingQueue[int] = DelayingQueue(clock=clock)  # created on this loop: its home

    def adder(start: int) -> None:
        for i in range(start, start + 50):
            q.add_after(i, 1 + i % 5)

    threads = [threading.Thread(target=adder, args=(n * 50,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    await settle()
    assert len(q) == 0
    await clock.advance(5)
    assert len(q) == 200
    got = []
    while len(q):
        got.append(q.get_nowait())
    assert sorted(got) == list(range(200))
    # Items come out by time: everything due at 1 s before everything due at 2 s...
    assert [1 + i % 5 for i in got] == sorted(1 + i % 5 for i in got)
    q.shut_down()


@pytest.mark.asyncio
async def test_a_thread_blocked_in_get_blocking_gets_a_delayed_item() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("late", 30)
    worker = asyncio.create_task(asyncio.to_thread(q.get_blocking, 10))
    await clock.wait_for_sleepers(1)
    await settle()
    assert not worker.done()
    await clock.advance(30)
    assert await asyncio.wait_for(worker, 10) == "late"
    q.shut_down()


@pytest.mark.asyncio
async def test_a_queue_created_without_a_loop_times_on_the_running_loop() -> None:
    clock = FakeClock()
    # Created on a plain thread (no loop there): the first add_after on this
    # loop makes this loop the timer's home.
    made: list[DelayingQueue[str]] = []
    thread = threading.Thread(target=lambda: made.append(DelayingQueue(clock=clock)))
    thread.start()
    thread.join(10)
    q = made[0]
    q.add_after("a", 1)
    await clock.advance(1)
    assert q.get_nowait() == "a"
    q.shut_down()


@pytest.mark.asyncio
async def test_the_timer_restarts_for_items_added_after_it_ended() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    for round_ in range(3):
        q.add_after(f"item-{round_}", 2)
        await clock.advance(2)
        assert q.get_nowait() == f"item-{round_}"
        await settle()
        assert clock.pending == []
    q.shut_down()


class ThreadSafeManualClock:
    """A Clock whose sleeps may run on any loop: ``advance`` (from any thread)
    wakes each due sleeper on its own loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now = 0.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []
        self.sleeping = threading.Condition(self._lock)

    def now(self) -> float:
        with self._lock:
            return self._now

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._sleepers.append((self._now + seconds, fut))
            self.sleeping.notify_all()
        await fut

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
            due = [f for t, f in self._sleepers if t <= self._now and not f.done()]
            self._sleepers = [(t, f) for t, f in self._sleepers if t > self._now]
        for fut in due:
            fut.get_loop().call_soon_threadsafe(lambda f=fut: f.done() or f.set_result(None))

    def wait_for_sleeper(self, timeout: float) -> bool:
        with self._lock:
            return self.sleeping.wait_for(
                lambda: any(not f.done() for _, f in self._sleepers), timeout
            )


def test_without_any_loop_a_background_thread_times_the_delays() -> None:
    """Plain threads only, no event loop anywhere: the timer runs on the shared
    background loop, and get_blocking gets the item once the clock has moved."""
    clock = ThreadSafeManualClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("later", 5)
    q.add("now")
    assert q.get_blocking(timeout=10) == "now"
    with pytest.raises(QueueEmpty):
        q.get_blocking(timeout=0)
    assert clock.wait_for_sleeper(10)  # the background timer sleeps on the clock
    clock.advance(5)
    assert q.get_blocking(timeout=10) == "later"
    q.shut_down()


def test_get_blocking_refuses_to_run_on_the_event_loops_thread() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add("a")

    async def on_the_loop() -> None:
        with pytest.raises(RuntimeError, match="cannot block the thread that runs an event loop"):
            q.get_blocking()

    asyncio.run(on_the_loop())
    assert len(q) == 1  # nothing was taken


def test_repr_counts_the_delayed_items() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(name="d", clock=clock)
    q.add("a")
    q.shut_down()
    assert repr(q) == "<DelayingQueue 'd' queued=1 processing=0 shutting down delayed=0>"


def test_delayed_items_outlive_the_loop_that_timed_them() -> None:
    clock = ThreadSafeManualClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)

    async def first_program() -> None:
        q.add_after("a", 5)
        await asyncio.sleep(0)  # the timer starts on this loop

    asyncio.run(first_program())  # ...which ends, cancelling it

    async def second_program() -> str:
        getter = asyncio.create_task(q.get())  # restarts the timer here
        await asyncio.to_thread(clock.wait_for_sleeper, 10)
        clock.advance(5)
        return await asyncio.wait_for(getter, 10)

    assert asyncio.run(second_program()) == "a"
    q.shut_down()


def test_a_thread_waiting_for_a_delayed_item_outlives_the_timers_loop() -> None:
    clock = ThreadSafeManualClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    got: list[str] = []
    thread = threading.Thread(target=lambda: got.append(q.get_blocking(timeout=20)))

    async def program() -> None:
        q.add_after("late", 5)  # timed on this loop...
        await asyncio.sleep(0)
        thread.start()  # ...while a thread waits for it
        # White-box, to order the steps: no public API tells that a thread waits.
        while not q._waiters:
            await asyncio.to_thread(thread.join, 0)

    asyncio.run(program())  # the loop ends: the thread must not wait for ever
    assert clock.wait_for_sleeper(10)  # timed again, elsewhere
    clock.advance(5)
    thread.join(20)
    assert got == ["late"]
    q.shut_down()
