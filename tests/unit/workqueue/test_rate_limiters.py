"""Rate limiters and RateLimitingQueue: client-go's default_rate_limiters_test.go
and rate_limiting_queue_test.go behaviours, on a FakeClock."""

from __future__ import annotations

import asyncio
import math

import pytest

from kubereflector.testing import FakeClock
from kubereflector.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    QueueEmpty,
    QueueShutDown,
    RateLimiter,
    RateLimitingQueue,
    default_controller_rate_limiter,
)


def test_exponential_failure_doubles_per_item_up_to_the_cap() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.001, 1.0)
    assert [limiter.when("one") for _ in range(5)] == [0.001, 0.002, 0.004, 0.008, 0.016]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == [0.001, 0.002]  # per item
    assert limiter.num_requeues("two") == 2
    for _ in range(20):
        limiter.when("one")
    assert limiter.when("one") == 1.0
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 0.001
    assert limiter.num_requeues("two") == 2  # forgetting one item leaves the others


def test_exponential_failure_defaults_and_overflow() -> None:
    """client-go TestItemExponentialFailureRateLimiterOverFlow: no overflow, the cap."""
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    assert (limiter.base_delay, limiter.max_delay) == (0.005, 1000.0)
    for _ in range(5000):
        delay = limiter.when("x")
    assert delay == 1000.0
    huge: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(1.0, math.inf)
    for _ in range(1030):
        delay = huge.when("x")
    assert delay == math.inf  # past 2**1023 the cap (here: none) is returned


def test_exponential_failure_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="base_delay=2"):
        ItemExponentialFailureRateLimiter(2.0, 1.0)
    with pytest.raises(ValueError, match="base_delay=-1"):
        ItemExponentialFailureRateLimiter(-1.0, 1.0)


def test_fast_slow() -> None:
    limiter: ItemFastSlowRateLimiter[str] = ItemFastSlowRateLimiter(0.005, 10.0, 3)
    assert [limiter.when("one") for _ in range(5)] == [0.005, 0.005, 0.005, 10.0, 10.0]
    assert limiter.num_requeues("one") == 5
    assert limiter.when("two") == 0.005
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 0.005
    with pytest.raises(ValueError, match="max_fast_attempts=-1"):
        ItemFastSlowRateLimiter(0.1, 1.0, -1)


def test_bucket_allows_a_burst_then_spaces_by_qps() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10.0, burst=3, clock=clock)
    assert [bucket.when(i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert [bucket.when(i) for i in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    assert bucket.num_requeues("x") == 0
    bucket.forget("x")  # no per-item state


def test_bucket_refills_at_qps_up_to_the_burst() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=2.0, burst=2, clock=clock)
    assert [bucket.when("a"), bucket.when("b")] == [0.0, 0.0]
    assert bucket.when("c") == pytest.approx(0.5)  # took a token on credit
    clock.step(0.5)  # the credit is paid back
    assert bucket.when("d") == pytest.approx(0.5)
    clock.step(100)  # a long pause refills only up to the burst
    assert [bucket.when("e"), bucket.when("f")] == [0.0, 0.0]
    assert bucket.when("g") == pytest.approx(0.5)


def test_bucket_with_infinite_qps_never_waits() -> None:
    bucket = BucketRateLimiter(qps=math.inf, burst=1)
    assert {bucket.when(i) for i in range(1000)} == {0.0}


def test_bucket_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="qps=0"):
        BucketRateLimiter(qps=0, burst=1)
    with pytest.raises(ValueError, match="burst=0"):
        BucketRateLimiter(qps=1, burst=0)


def test_max_of_takes_the_longest_wait_and_asks_every_limiter() -> None:
    """client-go TestMaxOfRateLimiter."""
    fast_slow: ItemFastSlowRateLimiter[str] = ItemFastSlowRateLimiter(0.005, 3.0, 3)
    exponential: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(
        0.001, 1.0
    )
    limiter = MaxOfRateLimiter(fast_slow, exponential)
    assert [limiter.when("one") for _ in range(5)] == [0.005, 0.005, 0.005, 3.0, 3.0]
    assert limiter.num_requeues("one") == 5
    assert exponential.num_requeues("one") == 5
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert fast_slow.num_requeues("one") == exponential.num_requeues("one") == 0
    with pytest.raises(ValueError, match="at least one"):
        MaxOfRateLimiter()


def test_default_controller_rate_limiter_is_exponential_capped_by_the_bucket() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock=clock)
    assert isinstance(limiter, RateLimiter)
    assert [limiter.when("x") for _ in range(3)] == [0.005, 0.01, 0.02]
    for i in range(97):  # the bucket's burst of 100 is spent now
        assert limiter.when(f"other-{i}") == 0.005
    assert limiter.when("late") == pytest.approx(0.1)  # 10 qps from here on
    assert limiter.when("later") == pytest.approx(0.2)
    assert limiter.num_requeues("x") == 3


def test_the_limiters_satisfy_the_protocol() -> None:
    for limiter in (
        ItemExponentialFailureRateLimiter(),
        ItemFastSlowRateLimiter(0.1, 1.0, 2),
        BucketRateLimiter(),
        MaxOfRateLimiter(BucketRateLimiter()),
    ):
        assert isinstance(limiter, RateLimiter)


# -- RateLimitingQueue -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_rate_limiting_queue_requeues_after_the_limiters_delay() -> None:
    """client-go TestRateLimitingQueue."""
    clock = FakeClock()
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.001, 1.0)
    q = RateLimitingQueue(limiter, clock=clock)
    q.add_rate_limited("one")
    q.add_rate_limited("one")  # the earlier time (1 ms) wins; the requeue counts
    q.add_rate_limited("two")
    assert q.num_requeues("one") == 2
    assert q.num_requeues("two") == 1
    assert len(q) == 0
    await clock.advance(0.001)
    assert len(q) == 2
    assert [q.get_nowait(), q.get_nowait()] == ["one", "two"]
    q.forget("one")
    assert q.num_requeues("one") == 0
    assert q.num_requeues("two") == 1
    q.done("one")
    q.add_rate_limited("one")  # starts over at the base delay
    await clock.advance(0.001)
    assert q.get_nowait() == "one"
    q.shut_down()


@pytest.mark.asyncio
async def test_the_usual_worker_loop_backs_off_then_succeeds() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)  # the default limiter
    attempts: list[float] = []

    async def worker() -> None:
        while True:
            key = await q.get()
            try:
                attempts.append(clock.now())
                if len(attempts) < 4:
                    raise RuntimeError("not yet")
            except RuntimeError:
                q.add_rate_limited(key)
            else:
                q.forget(key)
            finally:
                q.done(key)

    task = asyncio.create_task(worker())
    q.add("x")
    await clock.advance(1)
    assert attempts == pytest.approx([0.0, 0.005, 0.015, 0.035])  # 5, 10, 20 ms apart
    assert q.num_requeues("x") == 0
    with pytest.raises(QueueEmpty):
        q.get_nowait()
    q.shut_down()
    with pytest.raises(QueueShutDown):
        await asyncio.wait_for(task, 5)


@pytest.mark.asyncio
async def test_add_rate_limited_after_shut_down_counts_nothing() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue(clock=FakeClock())
    q.shut_down()
    q.add_rate_limited("x")
    assert q.num_requeues("x") == 0
