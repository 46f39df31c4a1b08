"""Work queue metrics: client-go's metrics_test.go behaviours, on a FakeClock."""

from __future__ import annotations

import pytest

from kubereflector.testing import FakeClock
from kubereflector.workqueue import (
    ADDS,
    DEPTH,
    LONGEST_RUNNING_PROCESSOR,
    QUEUE_DURATION,
    RETRIES,
    UNFINISHED_WORK,
    WORK_DURATION,
    DelayingQueue,
    InMemoryMetricsProvider,
    MetricsProvider,
    NoopMetricsProvider,
    RateLimitingQueue,
    WorkQueue,
)


def test_the_metric_names_are_client_gos() -> None:
    assert [DEPTH, ADDS, QUEUE_DURATION, WORK_DURATION, UNFINISHED_WORK] == [
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_unfinished_work_seconds",
    ]
    assert LONGEST_RUNNING_PROCESSOR == "workqueue_longest_running_processor_seconds"
    assert RETRIES == "workqueue_retries_total"


def test_the_providers_satisfy_the_protocol() -> None:
    assert isinstance(NoopMetricsProvider(), MetricsProvider)
    assert isinstance(InMemoryMetricsProvider(), MetricsProvider)


def test_adds_depth_latency_and_work_duration() -> None:
    """client-go TestMetrics, step by step."""
    clock = FakeClock()
    metrics = InMemoryMetricsProvider()
    q: WorkQueue[str] = WorkQueue(name="test", metrics_provider=metrics, clock=clock)

    def value(name: str) -> float:
        return metrics.get(name, "test").value

    def observed(name: str) -> list[float]:
        return metrics.get(name, "test").observations

    q.add("foo")
    assert (value(ADDS), value(DEPTH)) == (1, 1)
    clock.step(50e-6)
    item = q.get_nowait()
    assert observed(QUEUE_DURATION) == pytest.approx([50e-6])
    assert value(DEPTH) == 0

    for _ in range(5):  # added back while processing: de-duplicated
        q.add(item)
    assert (value(ADDS), value(DEPTH)) == (2, 1)
    clock.step(25e-6)
    q.done(item)
    assert observed(WORK_DURATION) == pytest.approx([25e-6])
    assert value(DEPTH) == 1  # back on the queue

    item = q.get_nowait()
    assert observed(QUEUE_DURATION) == pytest.approx([50e-6, 25e-6])
    clock.step(0.001)
    q.update_unfinished_work()
    assert value(UNFINISHED_WORK) == pytest.approx(0.001)
    assert value(LONGEST_RUNNING_PROCESSOR) == pytest.approx(0.001)
    q.done(item)
    assert observed(WORK_DURATION) == pytest.approx([25e-6, 0.001])
    assert (value(UNFINISHED_WORK), value(LONGEST_RUNNING_PROCESSOR)) == (0, 0)


def test_unfinished_work_sums_the_ages_and_longest_is_the_oldest() -> None:
    clock = FakeClock()
    metrics = InMemoryMetricsProvider()
    q: WorkQueue[str] = WorkQueue(name="q", metrics_provider=metrics, clock=clock)
    q.add("a")
    q.add("b")
    q.get_nowait()
    clock.step(3)
    q.get_nowait()
    clock.step(1)
    q.update_unfinished_work()
    assert metrics.get(UNFINISHED_WORK, "q").value == pytest.approx(4 + 1)
    assert metrics.get(LONGEST_RUNNING_PROCESSOR, "q").value == pytest.approx(4)


def test_an_add_of_a_queued_item_is_not_counted() -> None:
    metrics = InMemoryMetricsProvider()
    q: WorkQueue[str] = WorkQueue(name="q", metrics_provider=metrics)
    q.add("a")
    q.add("a")
    q.add("a", priority=5)  # raised, not added
    assert metrics.get(ADDS, "q").value == 1
    assert metrics.get(DEPTH, "q").value == 1


@pytest.mark.asyncio
async def test_retries_count_every_add_after() -> None:
    clock = FakeClock()
    metrics = InMemoryMetricsProvider()
    q: RateLimitingQueue[str] = RateLimitingQueue(name="rl", metrics_provider=metrics, clock=clock)
    q.add_rate_limited("a")
    q.add_rate_limited("a")
    q.add_after("b", 0)
    assert metrics.get(RETRIES, "rl").value == 3
    assert metrics.get(ADDS, "rl").value == 1  # b; a is still waiting
    await clock.advance(1)
    assert metrics.get(ADDS, "rl").value == 2
    assert metrics.get(DEPTH, "rl").value == 2
    q.shut_down()


@pytest.mark.asyncio
async def test_a_delayed_items_wait_counts_from_when_it_was_due() -> None:
    clock = FakeClock()
    metrics = InMemoryMetricsProvider()
    q: DelayingQueue[str] = DelayingQueue(name="d", metrics_provider=metrics, clock=clock)
    q.add_after("a", 10)
    await clock.advance(12)
    q.get_nowait()
    assert metrics.get(QUEUE_DURATION, "d").observations == pytest.approx([2])
    q.shut_down()


def test_a_queue_without_a_name_keeps_no_metrics() -> None:
    metrics = InMemoryMetricsProvider()
    q: WorkQueue[str] = WorkQueue(metrics_provider=metrics)
    q.add("a")
    q.done(q.get_nowait())
    assert repr(metrics) == "InMemoryMetricsProvider(0 metrics)"


def test_queues_are_told_apart_by_name() -> None:
    metrics = InMemoryMetricsProvider()
    one: WorkQueue[str] = WorkQueue(name="one", metrics_provider=metrics)
    two: WorkQueue[str] = WorkQueue(name="two", metrics_provider=metrics)
    one.add("a")
    two.add("a")
    two.add("b")
    assert metrics.get(ADDS, "one").value == 1
    assert metrics.get(ADDS, "two").value == 2
    assert "workqueue_adds_total{name='two'} value=2" in repr(metrics.get(ADDS, "two"))
