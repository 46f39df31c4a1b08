"""One work queue, workers in threads and in asyncio tasks at once, producers on
both sides: the guarantees hold, and everything ends within bounded time."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import pytest

from kubereflector.testing import FakeClock
from kubereflector.workqueue import QueueEmpty, QueueShutDown, RateLimitingQueue, WorkQueue

WAIT = 20.0
"""Upper bound (seconds) on any wait here; never reached when things work."""


class Tracker:
    """Records what the workers do: which items are held (an item held by two
    workers at once is an overlap), and a logical time of every add and start."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.holding: set[int] = set()
        self.processed: Counter[int] = Counter()
        self.overlaps: list[int] = []
        self.time = 0
        self.last_add: dict[int, int] = {}
        self.last_start: dict[int, int] = {}

    def add(self, q: WorkQueue[int], item: int) -> None:
        with self.lock:
            self.time += 1
            self.last_add[item] = self.time
        q.add(item)

    def start(self, item: int) -> bool:
        """Record that a worker took ``item``; whether it is its first run."""
        with self.lock:
            if item in self.holding:
                self.overlaps.append(item)
            self.holding.add(item)
            self.time += 1
            self.last_start[item] = self.time
            return self.processed[item] == 0

    def finish(self, item: int) -> None:
        with self.changed:
            self.holding.discard(item)
            self.processed[item] += 1
            self.changed.notify_all()

    def late(self) -> list[int]:
        """Items not started since their last add."""
        return [i for i, t in self.last_add.items() if self.last_start.get(i, 0) < t]

    def wait_until_idle(self, timeout: float) -> bool:
        """Until nothing is held and every item was started after its last add."""
        with self.changed:
            return self.changed.wait_for(lambda: not self.holding and not self.late(), timeout)


@pytest.mark.asyncio
@pytest.mark.timeout(60)
async def test_thread_and_task_workers_share_one_queue() -> None:
    q: WorkQueue[int] = WorkQueue()
    tracker = Tracker()
    items = 2_000

    def thread_worker() -> None:
        while True:
            try:
                item = q.get_blocking(timeout=WAIT)
            except QueueShutDown:
                return
            first = tracker.start(item)
            if first and item % 7 == 0:
                tracker.add(q, item)  # while processing: it must run again later
            tracker.finish(item)
            q.done(item)

    async def task_worker() -> None:
        while True:
            try:
                item = await q.get()
            except QueueShutDown:
                return
            tracker.start(item)
            await asyncio.sleep(0)  # let the others run while holding it
            tracker.finish(item)
            q.done(item)

    def thread_producer(start: int) -> None:
        for item in range(start, items, 2):
            tracker.add(q, item)
            tracker.add(q, item)  # dedup while queued

    threads = [threading.Thread(target=thread_worker) for _ in range(3)]
    threads.append(threading.Thread(target=thread_producer, args=(0,)))
    for thread in threads:
        thread.start()
    tasks = [asyncio.create_task(task_worker()) for _ in range(3)]
    for item in range(1, items, 2):  # the loop's own producer
        tracker.add(q, item)
        if item % 100 == 1:
            await asyncio.sleep(0)
    await asyncio.to_thread(threads[-1].join, WAIT)
    # Every add has been worked on (so no re-add comes after the shutdown).
    assert await asyncio.to_thread(tracker.wait_until_idle, WAIT)
    await asyncio.wait_for(q.shut_down_with_drain(), WAIT)
    await asyncio.wait_for(asyncio.gather(*tasks), WAIT)
    for thread in threads:
        await asyncio.to_thread(thread.join, WAIT)
        assert not thread.is_alive()

    assert tracker.overlaps == []  # never two workers on one item
    assert set(tracker.processed) == set(range(items))
    assert tracker.late() == []  # every item ran after its last add
    # Adds collapse: at most one run per add (two adds per item, and one re-add).
    assert max(tracker.processed.values()) <= 3
    assert len(q) == 0


@pytest.mark.asyncio
async def test_an_add_from_a_thread_wakes_a_waiting_task() -> None:
    q: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    thread = threading.Thread(target=q.add, args=("from-a-thread",))
    thread.start()
    assert await asyncio.wait_for(getter, WAIT) == "from-a-thread"
    thread.join(WAIT)


@pytest.mark.asyncio
@pytest.mark.parametrize("where", ["loop", "thread"])
async def test_adds_dedup_and_raise_alike_from_the_loop_and_from_a_thread(where: str) -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.add("c", priority=-1)

    def add_again() -> None:
        q.add("a")  # queued at this priority already: nothing changes
        q.add("b", priority=-5)  # a lower priority: nothing changes
        q.add("c")  # raised from -1 to 0: behind a and b
        q.add("b", priority=3)  # raised: first

    if where == "loop":
        add_again()
    else:
        await asyncio.wait_for(asyncio.to_thread(add_again), WAIT)
    assert len(q) == 3
    assert [await q.get() for _ in range(3)] == ["b", "a", "c"]


@pytest.mark.asyncio
async def test_an_add_from_a_thread_while_a_task_processes_the_item_waits_for_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert await q.get() == "a"  # handed out without waiting
    await asyncio.wait_for(asyncio.to_thread(q.add, "a"), WAIT)
    assert len(q) == 0
    with pytest.raises(QueueEmpty):
        q.get_nowait()
    q.done("a")
    assert await asyncio.wait_for(q.get(), WAIT) == "a"


@pytest.mark.asyncio
async def test_an_add_from_the_loop_wakes_a_blocked_thread() -> None:
    q: WorkQueue[str] = WorkQueue()
    got: list[str] = []
    thread = threading.Thread(target=lambda: got.append(q.get_blocking(timeout=WAIT)))
    thread.start()
    q.add("from-the-loop")
    await asyncio.to_thread(thread.join, WAIT)
    assert got == ["from-the-loop"]


def test_get_blocking_times_out_with_queue_empty_and_takes_no_wakeup() -> None:
    q: WorkQueue[str] = WorkQueue()
    with pytest.raises(QueueEmpty, match=r"within 0\.01 s"):
        q.get_blocking(timeout=0.01)
    q.add("a")  # a timed-out waiter left nothing behind to swallow this
    assert q.get_blocking(timeout=WAIT) == "a"


def test_shut_down_releases_blocked_threads() -> None:
    q: WorkQueue[str] = WorkQueue()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            q.get_blocking(timeout=WAIT)
        except QueueShutDown as err:
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    q.shut_down()  # whether a thread waits already or comes later
    for thread in threads:
        thread.join(WAIT)
    assert len(errors) == 3


@pytest.mark.asyncio
async def test_rate_limited_requeues_from_threads() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[int] = RateLimitingQueue(clock=clock)

    def fail_once(item: int) -> None:
        q.add_rate_limited(item)

    threads = [threading.Thread(target=fail_once, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        await asyncio.to_thread(thread.join, WAIT)
    assert len(q) == 0
    await clock.advance(0.005)  # the default limiter's first delay
    got = set()
    while len(got) < 20:
        got.add(await asyncio.wait_for(q.get(), WAIT))
    assert got == set(range(20))
    assert all(q.num_requeues(i) == 1 for i in range(20))
    q.shut_down()
