"""controller-runtime's reconcile lifecycle on FakeControllerSource informers and a
FakeClock: reconcile timeouts, Result.priority and the priority a request keeps,
workers that start once the handlers have queued the initial list, retried conflicts
logged as one line."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from test_runtime_controller import CONFIGMAPS, WAIT, Reconciler, cm, req, running

from kubereflector import AlreadyExistsError, ApiError, ConflictError, SharedIndexInformer
from kubereflector.metrics import Metrics
from kubereflector.runtime import Controller, ControllerOptions, Request, Result
from kubereflector.testing import FakeClock, FakeControllerSource, settle
from kubereflector.workqueue import ItemExponentialFailureRateLimiter
from running_task import running as started

pytestmark = pytest.mark.asyncio


def metric(metrics: Metrics, line: str) -> bool:
    return line in metrics.exposition().decode()


async def test_a_coroutine_reconcile_past_its_timeout_is_cancelled_counted_and_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    source.add(cm("a"))
    reconcile = Reconciler()
    reconcile.gates[req("a")] = asyncio.Event()  # never set: the first reconcile hangs
    limiter = ItemExponentialFailureRateLimiter[Request](base_delay=1, max_delay=100)
    metrics = Metrics(process=False)
    options = ControllerOptions(reconcile_timeout=5, rate_limiter=limiter)
    async with running(source, clock=clock) as (informer,):
        controller = Controller(
            reconcile, for_=(informer, CONFIGMAPS), options=options, clock=clock, metrics=metrics
        )
        async with started(controller):
            await reconcile.wait_for(lambda: reconcile.count(req("a")) == 1)
            await clock.advance(4.9)
            assert reconcile.cancelled == []
            await clock.advance(0.1)
            await reconcile.wait_for(lambda: reconcile.cancelled == [req("a")])
            del reconcile.gates[req("a")]
            await clock.advance(0.99)  # the backoff of a failure: 1 s
            assert reconcile.count(req("a")) == 1
            await clock.advance(0.01)
            await reconcile.wait_for(lambda: reconcile.count(req("a")) == 2)
    assert metric(
        metrics, 'controller_runtime_reconcile_timeouts_total{controller="configmaps"} 1.0'
    )
    assert metric(metrics, 'controller_runtime_reconcile_errors_total{controller="configmaps"} 1.0')
    timeouts = [r for r in caplog.records if "timed out after 5s" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in timeouts] == [(logging.WARNING, None)]
    assert "cancelled" in timeouts[0].getMessage()


async def test_a_thread_reconcile_past_its_timeout_is_waited_for_and_its_result_dropped() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    source.add(cm("a"))
    release = threading.Event()
    calls: list[Request] = []
    running_now = 0
    most = 0
    lock = threading.Lock()
    loop = asyncio.get_running_loop()
    called = [asyncio.Event(), asyncio.Event()]

    def reconcile(request: Request) -> Result:
        nonlocal running_now, most
        with lock:
            calls.append(request)
            running_now += 1
            most = max(most, running_now)
            loop.call_soon_threadsafe(called[min(len(calls), 2) - 1].set)
        try:
            if len(calls) == 1:
                assert release.wait(WAIT)
            return Result()
        finally:
            with lock:
                running_now -= 1

    limiter = ItemExponentialFailureRateLimiter[Request](base_delay=0, max_delay=0)
    metrics = Metrics(process=False)
    options = ControllerOptions(reconcile_timeout=5, rate_limiter=limiter)
    async with running(source, clock=clock) as (informer,):
        controller = Controller(
            reconcile, for_=(informer, CONFIGMAPS), options=options, clock=clock, metrics=metrics
        )
        async with started(controller):
            await asyncio.wait_for(called[0].wait(), WAIT)
            await clock.advance(5)
            assert metric(
                metrics, 'controller_runtime_reconcile_timeouts_total{controller="configmaps"} 1.0'
            )
            source.modify(cm("a", data={"x": "y"}))  # queued again meanwhile: not run beside it
            await clock.advance(10)
            assert len(calls) == 1
            release.set()
            # The thread ends; its request is retried at once (no backoff here).
            await asyncio.wait_for(called[1].wait(), WAIT)
    assert most == 1  # one worker per request, a thread that overran included
    assert metric(
        metrics, 'controller_runtime_reconcile_total{controller="configmaps",result="error"} 1.0'
    )


@pytest.mark.parametrize(("asked", "expected"), [(None, ["b", "c", "a"]), (5, ["b", "a", "c"])])
async def test_a_request_requeued_keeps_its_priority_unless_the_result_says_otherwise(
    asked: int | None, expected: list[str]
) -> None:
    """Initial-list requests are queued at low priority. One that asks to be requeued
    goes back at low priority, behind the rest of the backlog (it used to jump ahead
    of it at priority 0); Result(priority=...) puts it where it asks."""
    clock = FakeClock()
    source = FakeControllerSource()
    for name in ("a", "b", "c"):
        source.add(cm(name))
    reconcile = Reconciler()
    reconcile.results[req("a")] = [Result(requeue_after=0, priority=asked), None]
    hold_b = reconcile.gates[req("b")] = asyncio.Event()
    limiter = ItemExponentialFailureRateLimiter[Request](base_delay=1, max_delay=100)
    async with running(source, clock=clock) as (informer,):
        controller = Controller(
            reconcile,
            for_=(informer, CONFIGMAPS),
            options=ControllerOptions(rate_limiter=limiter),
            clock=clock,
        )
        async with started(controller):
            await reconcile.wait_for(lambda: reconcile.calls == [req("a"), req("b")])
            await clock.advance(1)  # a is queued again while b holds the worker
            hold_b.set()
            await reconcile.wait_for(lambda: len(reconcile.calls) == 4)
    assert [r.name for r in reconcile.calls[1:]] == expected


async def test_result_priority_must_be_an_integer() -> None:
    with pytest.raises(ValueError, match="priority must be an integer"):
        Result(priority=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reconcile_timeout must be"):
        ControllerOptions(reconcile_timeout=0)
    with pytest.raises(TypeError, match="requeue_on_own_writes must be a bool"):
        ControllerOptions(requeue_on_own_writes="yes")  # type: ignore[arg-type]


async def test_workers_start_once_the_handlers_have_queued_the_whole_initial_list() -> None:
    """The informer syncs when its cache holds the list; its handler queues the
    requests a batch at a time, sharing the loop. The first reconcile runs only once
    every initial request is queued (controller-runtime waits for the handlers too)."""
    clock = FakeClock()
    source = FakeControllerSource()
    count = 1000
    for i in range(count):
        source.add(cm(f"cm-{i:04}"))
    queued_at_first: list[int] = []
    controller: Controller | None = None

    async def reconcile(request: Request) -> None:
        if not queued_at_first:
            assert controller is not None
            queued_at_first.append(len(controller.queue))

    informer = SharedIndexInformer(source, clock=clock)
    controller = Controller(reconcile, for_=(informer, CONFIGMAPS), clock=clock)
    # The controller first, so that its handler's registration sees the initial list.
    run = asyncio.create_task(controller.run())
    await settle()
    async with started(informer):
        for _ in range(100):
            if queued_at_first:
                break
            await settle()
    run.cancel()
    await asyncio.wait({run})
    assert queued_at_first == [count - 1]


@pytest.mark.parametrize(
    "conflict",
    [
        ConflictError(409, "Conflict", "the object has been modified"),
        AlreadyExistsError(409, "AlreadyExists", 'configmaps "b" already exists'),
    ],
    ids=["Conflict", "AlreadyExists"],
)
async def test_a_conflict_is_retried_and_logged_as_one_line_below_error(
    caplog: pytest.LogCaptureFixture, conflict: ApiError
) -> None:
    caplog.set_level(logging.INFO, "kubereflector.runtime")
    clock = FakeClock()
    source = FakeControllerSource()
    source.add(cm("a"))
    reconcile = Reconciler()
    reconcile.results[req("a")] = [conflict, None]
    limiter = ItemExponentialFailureRateLimiter[Request](base_delay=1, max_delay=100)
    metrics = Metrics(process=False)
    async with running(source, clock=clock) as (informer,):
        controller = Controller(
            reconcile,
            for_=(informer, CONFIGMAPS),
            options=ControllerOptions(rate_limiter=limiter),
            clock=clock,
            metrics=metrics,
        )
        async with started(controller):
            await reconcile.wait_for(lambda: reconcile.count(req("a")) == 1)
            await clock.advance(1)
            await reconcile.wait_for(lambda: reconcile.count(req("a")) == 2)
    lines = [r for r in caplog.records if "reconcile of ns/a" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in lines] == [(logging.INFO, None)]
    assert "retried after backoff" in lines[0].getMessage()
    assert metric(metrics, 'kubereflector_reconcile_conflicts_total{controller="configmaps"} 1.0')
    assert metric(metrics, 'controller_runtime_reconcile_errors_total{controller="configmaps"} 1.0')
