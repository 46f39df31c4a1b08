"""Property: a RateLimitingQueue behaves as its specification, whatever the interleaving.

Random interleavings of ``add`` (with priorities), ``add_after``,
``add_rate_limited``, ``forget``, clock advances, and gets and dones by several
simulated workers run against the queue (on a FakeClock) and against a small
reference model written from the specification (client-go's dirty/processing
sets, controller-runtime's priorities, the earliest delay wins). After every
step the queue must hand out exactly what the model says, in the model's order.

Then the invariants of the issue are checked directly:

* no item is ever handed to two workers at once;
* every item added is handed out again after its last add (the run ends by
  letting every delay pass and the workers drain the queue);
* nothing is handed out once ``shut_down_with_drain`` has returned.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubereflector.testing import FakeClock
from kubereflector.workqueue import (
    ItemExponentialFailureRateLimiter,
    QueueEmpty,
    QueueShutDown,
    RateLimitingQueue,
)

ITEMS = ["a", "b", "c", "d", "e"]
WORKERS = 3
PRIORITIES = st.sampled_from([0, 0, 0, -100, 5])

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(ITEMS), PRIORITIES),
        st.tuples(
            st.just("add_after"),
            st.sampled_from(ITEMS),
            st.sampled_from([-1.0, 0.0, 1.0, 2.0, 3.5]),
            PRIORITIES,
        ),
        st.tuples(st.just("add_rate_limited"), st.sampled_from(ITEMS)),
        st.tuples(st.just("forget"), st.sampled_from(ITEMS)),
        st.tuples(st.just("advance"), st.sampled_from([0.5, 1.0, 2.0])),
        st.tuples(st.just("get"), st.integers(0, WORKERS - 1)),
        st.tuples(st.just("get"), st.integers(0, WORKERS - 1)),
        st.tuples(st.just("done"), st.integers(0, WORKERS - 1)),
    ),
    max_size=60,
)


@dataclass
class Model:
    """The specification, written as plainly as possible."""

    now: float = 0.0
    seq: int = 0
    queued: dict[str, tuple[int, int]] = field(default_factory=dict)  # -> (priority, seq)
    processing: set[str] = field(default_factory=set)
    again: dict[str, int] = field(default_factory=dict)  # added while processing -> priority
    delayed: dict[str, tuple[float, int, int]] = field(default_factory=dict)  # (at, seq, prio)
    failures: dict[str, int] = field(default_factory=dict)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def add(self, item: str, priority: int) -> None:
        if item in self.queued:
            if priority > self.queued[item][0]:
                self.queued[item] = (priority, self.next_seq())
        elif item in self.processing:
            self.again[item] = max(priority, self.again.get(item, priority))
        else:
            self.queued[item] = (priority, self.next_seq())

    def add_after(self, item: str, delay: float, priority: int) -> None:
        if delay <= 0:
            self.add(item, priority)
            return
        at = self.now + delay
        if item in self.delayed:
            old_at, old_seq, old_priority = self.delayed[item]
            priority = max(priority, old_priority)
            if at < old_at:
                self.delayed[item] = (at, self.next_seq(), priority)
            else:
                self.delayed[item] = (old_at, old_seq, priority)
        else:
            self.delayed[item] = (at, self.next_seq(), priority)

    def when(self, item: str) -> float:
        """ItemExponentialFailureRateLimiter(1, 8)."""
        failures = self.failures.get(item, 0)
        self.failures[item] = failures + 1
        return min(1.0 * 2**failures, 8.0)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = sorted(
            (at, seq, item, priority)
            for item, (at, seq, priority) in self.delayed.items()
            if at <= self.now
        )
        for _, _, item, priority in due:
            del self.delayed[item]
            self.add(item, priority)

    def get(self) -> str | None:
        if not self.queued:
            return None
        item = min(self.queued, key=lambda i: (-self.queued[i][0], self.queued[i][1]))
        del self.queued[item]
        self.processing.add(item)
        return item

    def done(self, item: str) -> None:
        self.processing.remove(item)
        if item in self.again:
            self.queued[item] = (self.again.pop(item), self.next_seq())


@dataclass
class Log:
    step: int = 0
    last_add: dict[str, int] = field(default_factory=dict)
    last_handout: dict[str, int] = field(default_factory=dict)
    overlaps: list[str] = field(default_factory=list)

    def added(self, item: str) -> None:
        self.step += 1
        self.last_add[item] = self.step

    def handed_out(self, item: str, hands: list[str | None]) -> None:
        self.step += 1
        if item in hands:
            self.overlaps.append(item)
        self.last_handout[item] = self.step


def get_nowait(q: RateLimitingQueue[str]) -> str | None:
    try:
        return q.get_nowait()
    except QueueEmpty:
        return None


async def scenario(ops: list[tuple[object, ...]]) -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(
        ItemExponentialFailureRateLimiter(1.0, 8.0), clock=clock
    )
    model = Model()
    log = Log()
    hands: list[str | None] = [None] * WORKERS  # what each simulated worker holds

    async def get(worker: int) -> None:
        if hands[worker] is not None:
            return
        item = get_nowait(q)
        assert item == model.get()
        if item is not None:
            log.handed_out(item, hands)
            hands[worker] = item

    def done(worker: int) -> None:
        item = hands[worker]
        if item is not None:
            hands[worker] = None
            q.done(item)
            model.done(item)

    for op in ops:
        kind = op[0]
        if kind == "add":
            item, priority = str(op[1]), int(str(op[2]))
            log.added(item)
            q.add(item, priority=priority)
            model.add(item, priority)
        elif kind == "add_after":
            item, delay, priority = str(op[1]), float(str(op[2])), int(str(op[3]))
            log.added(item)
            q.add_after(item, delay, priority=priority)
            model.add_after(item, delay, priority)
        elif kind == "add_rate_limited":
            item = str(op[1])
            log.added(item)
            q.add_rate_limited(item)
            model.add_after(item, model.when(item), 0)
        elif kind == "forget":
            item = str(op[1])
            q.forget(item)
            model.failures.pop(item, None)
        elif kind == "advance":
            seconds = float(str(op[1]))
            await clock.advance(seconds)
            model.advance(seconds)
        elif kind == "get":
            await get(int(str(op[1])))
        elif kind == "done":
            done(int(str(op[1])))
        assert len(q) == len(model.queued)
        assert {q.num_requeues(i) for i in ITEMS} == {model.failures.get(i, 0) for i in ITEMS}

    # Every delay passes; the workers finish what they hold and drain the queue.
    await clock.advance(100.0)
    model.advance(100.0)
    while any(hands) or len(q):
        for worker in range(WORKERS):
            done(worker)
            await get(worker)
    assert log.overlaps == []
    late = [i for i, step in log.last_add.items() if log.last_handout.get(i, 0) < step]
    assert late == [], f"never handed out after their last add: {late}"

    drained = asyncio.create_task(q.shut_down_with_drain())
    await asyncio.wait_for(drained, 10)
    for item in ITEMS:
        q.add(item)
        q.add_after(item, 1.0)
        q.add_rate_limited(item)
    await clock.advance(100.0)
    for _ in range(WORKERS):
        try:
            q.get_nowait()
        except QueueShutDown:
            continue
        raise AssertionError("an item was handed out after shut_down_with_drain returned")


@pytest.mark.timeout(120)  # hypothesis shrinking a failure takes longer than a pass
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_the_queue_follows_its_specification(ops: list[tuple[object, ...]]) -> None:
    asyncio.run(scenario(ops))


@pytest.mark.timeout(120)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, workers=st.integers(1, 4))
def test_draining_while_workers_run(ops: list[tuple[object, ...]], workers: int) -> None:
    """shut_down_with_drain started while items are queued and held returns only
    once everything queued was handed out and done, and nothing comes after."""

    async def run() -> None:
        clock = FakeClock()
        q: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
        for op in ops:
            if op[0] in ("add", "add_after"):
                q.add(str(op[1]))
        handed_out: list[str] = []
        drained_at: list[int] = []

        async def worker() -> None:
            while True:
                try:
                    item = await q.get()
                except QueueShutDown:
                    return
                handed_out.append(item)
                await asyncio.sleep(0)
                q.done(item)

        async def drain() -> None:
            await q.shut_down_with_drain()
            drained_at.append(len(handed_out))

        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        await asyncio.wait_for(asyncio.gather(drain(), *tasks), 10)
        assert drained_at == [len(handed_out)]
        assert sorted(handed_out) == sorted(
            {str(op[1]) for op in ops if op[0] in ("add", "add_after")}
        )

    asyncio.run(run())
