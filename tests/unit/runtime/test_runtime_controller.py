"""The runtime's Controller on FakeControllerSource informers and a FakeClock:
results, backoff, terminal errors, one worker per request, exactly one more
reconcile after changes during a reconcile, priorities, owner and mapped watches,
predicates, thread reconcilers, stopping."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubereflector import SharedIndexInformer
from kubereflector.client import ResourceInfo
from kubereflector.metrics import Metrics
from kubereflector.runtime import (
    Controller,
    ControllerOptions,
    Request,
    Result,
    TerminalError,
    label_selector,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle
from kubereflector.workqueue import ItemExponentialFailureRateLimiter
from running_task import running as started

pytestmark = pytest.mark.asyncio

WAIT = 10.0
"""Upper bound (seconds) on waiting for worker threads; never reached when things work."""

CONFIGMAPS = ResourceInfo("", "v1", "configmaps", "ConfigMap", namespaced=True)
WIDGETS = ResourceInfo("example.com", "v1", "widgets", "Widget", namespaced=True)


def cm(name: str, namespace: str = "ns", **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    meta.update(fields.pop("meta", {}))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, **fields}


def owned_by(
    name: str,
    owner: str,
    *,
    kind: str = "Widget",
    api_version: str = "example.com/v1",
    controller: bool = True,
) -> dict[str, Any]:
    ref = {
        "apiVersion": api_version,
        "kind": kind,
        "name": owner,
        "uid": "u",
        "controller": controller,
    }
    return cm(name, meta={"ownerReferences": [ref]})


class Reconciler:
    """A coroutine reconciler recording its calls; ``gates`` hold requests back,
    ``results`` say what to return (or raise) per request, call by call."""

    def __init__(self) -> None:
        self.calls: list[Request] = []
        self.running: Counter[Request] = Counter()
        self.max_running: Counter[Request] = Counter()
        self.concurrency = 0
        self.max_concurrency = 0
        self.gates: dict[Request, asyncio.Event] = {}
        self.results: dict[Request, list[Any]] = {}
        self.cancelled: list[Request] = []
        self.hold_first: asyncio.Event | None = None
        self._changed = asyncio.Event()

    async def __call__(self, request: Request) -> Result | None:
        self.calls.append(request)
        self.running[request] += 1
        self.concurrency += 1
        self.max_running[request] = max(self.max_running[request], self.running[request])
        self.max_concurrency = max(self.max_concurrency, self.concurrency)
        self._changed.set()
        try:
            gate = self.gates.get(request)
            if gate is None and len(self.calls) == 1:
                gate = self.hold_first
            if gate is not None:
                await gate.wait()
            outcomes = self.results.get(request)
            outcome = outcomes.pop(0) if outcomes else None
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            self.cancelled.append(request)
            raise
        finally:
            self.running[request] -= 1
            self.concurrency -= 1

    def count(self, request: Request) -> int:
        return self.calls.count(request)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async def wait() -> None:
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(wait(), WAIT)


@contextlib.asynccontextmanager
async def running(
    *sources: FakeControllerSource, clock: FakeClock
) -> AsyncIterator[list[SharedIndexInformer]]:
    informers = [SharedIndexInformer(s, clock=clock) for s in sources]
    tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        yield informers
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)


def req(name: str, namespace: str = "ns") -> Request:
    return Request(namespace, name)


async def test_every_object_of_the_initial_list_is_reconciled_once() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    for i in range(20):
        source.add(cm(f"cm-{i}"))
    reconcile = Reconciler()
    async with running(source, clock=clock) as (informer,):
        controller = Controller(reconcile, for_=(informer, CONFIGMAPS), clock=clock)
        async with started(controller):
            await reconcile.wait_for(lambda: len(reconcile.calls) == 20)
            await settle()
            assert sorted(reconcile.calls) == sorted(req(f"cm-{i}") for i in range(20))
            # A change queues one more reconcile; a delete too (the reconciler
            # finds the object gone from the cache).
            source.modify(cm("cm-3", data={"a": "b"}))
            source.delete(cm("cm-4"))
            await reconcile.wait_for(lambda: len(reconcile.calls) == 22)
            assert reconcile.calls[-2:] == [req("cm-3"), req("cm-4")]


async def test_requeue_after_reconciles_again_after_that_time() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    source.add(cm("a"))
    reconcile = Reconciler()
    reconcile.results[req("a")] = [Result(requeue_after=30), Result(requeue_after=30), None]
    async with running(source, clock=clock) as (informer,):
        controller = Controller(reconcile, for_=(informer, CONFIGMAPS), clock=clock)
        async with started(controller):
            await reconcile.wait_for(lambda: reconcile.count(req("a")) == 1)
            await clock.advance(29.9)
            assert reconcile.count(req("a")) == 1
            await clock.advance(0.1)
            assert reconcile.count(req("a")) == 2
            await clock.advance(30)
            assert reconcile.count(req("a")) == 3
            await clock.advance(300)  # the third returned None: done
            assert reconcile.count(req("a")) == 3
            assert controller.queue.num_requeues(req("a")) == 0


async def test_errors_are_retried_with_the_rate_limiters_backoff() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    source.add(cm("a"))
    reconcile = Reconciler()
    boom = RuntimeError("transient")
    reconcile.results[req("a")] = [boom, boom, boom, None]
    limiter: ItemExponentialFailureRateLimiter[Request] = ItemExponentialFailureRateLimiter(
        base_delay=1, max_delay=100
    )
    metrics = Metrics(process=False)
    async with running(source, clock=clock) as (informer,):
        controller = Controller(
            reconcile,
            for_=(informer, CONFIGMAPS),
            options=ControllerOptions(rate_limiter=limiter),
            clock=clock,
            metrics=metrics,
            name="cms",
        )
        async with started(controller):
            await reconcile.wait_for(lambda: reconcile.count(req("a")) == 1)
            # Failures back off 1 s, 2 s, 4 s.
            for delay, calls in ((1, 2), (2, 3), (4, 4)):
                await clock.advance(delay - 0.01)
                assert reconcile.count(req("a")) == calls - 1
                await clock.advance(0.01)
                assert reconcile.count(req("a")) == calls
            # Success forgot the failures.
            assert controller.queue.num_requeues(req("a")) == 0
    exposition = metrics.exposition().decode()
    assert 'controller_runtime_reconcile_total{controller="cms",result="error"} 3.0' in exposition
    assert 'controller_runtime_reconcile_total{controller="cms",result="success"} 1.0' in exposition
    assert 'controller_runtime_reconcile_errors_total{controller="cms"} 3.0' in exposition
    assert 'workqueue_retries_total{controller="cms",name="cms"} 3.0' in exposition


async def test_terminal_errors_are_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    source.add(cm("a"))
    reconcile = Reconciler()
    reconcile.results[req("a")] = [TerminalError("the spec is invalid")]
    metrics = Metrics(process=False)
    async with running(source, clock=clock) as (informer,):
        controller = Controller(
            reconcile,
            for_=(informer, CONFIGMAPS),
            clock=clock,
            metrics=metrics,
            name="cms",
        )
        async with started(controller):
            await reconcile.wait_for(lambda: reconcile.count(req("a")) == 1)
            await clock.advance(3600)
            assert reconcile.count(req("a")) == 1
            # A change queues it again.
            source.modify(cm("a", data={"fixed": "yes"}))
            await reconcile.wait_for(lambda: reconcile.count(req("a")) == 2)
    assert "failed terminally (not retried): the spec is invalid" in caplog.text
    assert 'controller_runtime_terminal_reconcile_errors_total{controller="cms"} 1.0' in (
        metrics.exposition().decode()
    )


async def test_one_worker_per_request_and_one_more_reconcile_after_changes_meanwhile() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    for name in ("a", "b", "c"):
        source.add(cm(name))
    reconcile = Reconciler()
    gate = asyncio.Event()
    reconcile.gates[req("a")] = gate
    async with running(source, clock=clock) as (informer,):
        controller = Controller(
            reconcile,
            for_=(informer, CONFIGMAPS),
            options=ControllerOptions(max_concurrent_reconciles=4),
            clock=clock,
        )
        async with started(controller):
            await reconcile.wait_for(lambda: len(reconcile.calls) == 3)
            assert reconcile.running[req("a")] == 1
            # Five changes while "a" is being reconciled, and other requests flow.
            for i in range(5):
                source.modify(cm("a", data={"i": str(i)}))
                source.modify(cm("b", data={"i": str(i)}))
                await settle()
            assert reconcile.count(req("a")) == 1
            assert reconcile.count(req("b")) > 1
            gate.clear()
            gate.set()
            await reconcile.wait_for(lambda: reconcile.count(req("a")) == 2)
            await clock.advance(10)
            assert reconcile.count(req("a")) == 2
            assert reconcile.max_running[req("a")] == 1
            assert reconcile.max_running[req("b")] == 1
            assert reconcile.max_concurrency >= 2


async def test_initial_objects_wait_behind_live_changes() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    for i in range(5):
        source.add(cm(f"old-{i}"))
    reconcile = Reconciler()
    reconcile.hold_first = asyncio.Event()
    async with running(source, clock=clock) as (informer,):
        controller = Controller(reconcile, for_=(informer, CONFIGMAPS), clock=clock)
        async with started(controller):
            await reconcile.wait_for(lambda: len(reconcile.calls) == 1)
            source.add(cm("live"))  # a live add: priority 0
            source.modify(cm("old-4", data={"x": "y"}))  # a live change: raised to 0
            await settle()
            reconcile.hold_first.set()
            await reconcile.wait_for(lambda: len(reconcile.calls) == 6)
            # Behind the first, queued in the initial list's order, the live ones come first.
            assert set(reconcile.calls[1:3]) == {req("live"), req("old-4")}
            assert len(set(reconcile.calls)) == 6


async def test_owned_objects_queue_their_controller_owner() -> None:
    clock = FakeClock()
    widgets, children = FakeControllerSource(), FakeControllerSource()
    widgets.add(cm("w1"))
    children.add(owned_by("w1-child", "w1"))
    children.add(owned_by("not-controller", "w2", controller=False))
    children.add(owned_by("other-kind", "w3", kind="Gadget"))
    children.add(owned_by("other-group", "w4", api_version="other.io/v1"))
    reconcile = Reconciler()
    async with running(widgets, children, clock=clock) as (w_inf, c_inf):
        controller = Controller(reconcile, for_=(w_inf, WIDGETS), owns=[c_inf], clock=clock)
        async with started(controller):
            await reconcile.wait_for(lambda: len(reconcile.calls) >= 1)
            await settle()
            assert reconcile.calls == [req("w1")]  # the child's owner is w1 too: deduplicated
            children.modify({**owned_by("w1-child", "w1"), "data": {"x": "1"}})
            await reconcile.wait_for(lambda: reconcile.count(req("w1")) == 2)
            children.delete(owned_by("w1-child", "w1"))
            await reconcile.wait_for(lambda: reconcile.count(req("w1")) == 3)
            # A child moved to another owner queues both owners.
            children.add(owned_by("moving", "w1"))
            await reconcile.wait_for(lambda: reconcile.count(req("w1")) == 4)
            children.modify(owned_by("moving", "w9"))
            await reconcile.wait_for(lambda: reconcile.count(req("w9")) == 1)
            await settle()
            assert reconcile.count(req("w1")) == 5
            assert {r.name for r in reconcile.calls} == {"w1", "w9"}


async def test_watches_map_any_resource_and_predicates_filter_the_for_resource() -> None:
    clock = FakeClock()
    widgets, pods = FakeControllerSource(), FakeControllerSource()
    widgets.add(cm("selected", meta={"labels": {"app": "web"}}))
    widgets.add(cm("ignored"))
    reconcile = Reconciler()

    def by_label(obj: Any) -> list[tuple[str, str]]:
        target = (obj or {}).get("metadata", {}).get("labels", {}).get("widget")
        return [("ns", target)] if target else []

    async with running(widgets, pods, clock=clock) as (w_inf, p_inf):
        controller = Controller(
            reconcile,
            for_=(w_inf, WIDGETS),
            watches=[(p_inf, by_label)],
            predicates=[label_selector("app=web")],
            clock=clock,
        )
        async with started(controller):
            await reconcile.wait_for(lambda: len(reconcile.calls) == 1)
            assert reconcile.calls == [req("selected")]
            pods.add(cm("pod-1", meta={"labels": {"widget": "ignored"}}))
            await reconcile.wait_for(lambda: len(reconcile.calls) == 2)
            assert reconcile.calls[-1] == req("ignored")
            # Predicates filter only the for_ resource's own events.
            widgets.modify(cm("ignored", data={"a": "b"}))
            widgets.modify(cm("selected", meta={"labels": {"app": "web"}}, data={"a": "b"}))
            await reconcile.wait_for(lambda: len(reconcile.calls) == 3)
            await settle()
            assert reconcile.calls[-1] == req("selected")
            assert len(reconcile.calls) == 3


async def test_plain_function_reconcilers_run_on_worker_threads() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    for i in range(8):
        source.add(cm(f"cm-{i}"))
    threads: set[str] = set()
    calls: list[Request] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    lock = threading.Lock()
    barrier = threading.Barrier(2, timeout=WAIT)

    def reconcile(request: Request) -> Result | None:
        with lock:
            threads.add(threading.current_thread().name)
            calls.append(request)
            count = len(calls)
        if count <= 2:
            barrier.wait()  # two reconciles at once: two threads
        if count == 8:
            loop.call_soon_threadsafe(done.set)
        return None

    async with running(source, clock=clock) as (informer,):
        controller = Controller(
            reconcile,
            for_=(informer, CONFIGMAPS),
            options=ControllerOptions(max_concurrent_reconciles=2),
            clock=clock,
        )
        async with started(controller):
            await asyncio.wait_for(done.wait(), WAIT)
    assert sorted(calls) == sorted(req(f"cm-{i}") for i in range(8))
    assert len(threads) == 2
    assert all(name.startswith("reconcile-configmaps") for name in threads)


async def test_stop_lets_reconciles_in_flight_finish_and_starts_nothing_new() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    for name in ("a", "b"):
        source.add(cm(name))
    reconcile = Reconciler()
    gate = asyncio.Event()
    reconcile.gates[req("a")] = gate
    reconcile.gates[req("b")] = gate
    async with running(source, clock=clock) as (informer,):
        controller = Controller(reconcile, for_=(informer, CONFIGMAPS), clock=clock)
        async with started(controller) as task:
            await reconcile.wait_for(lambda: len(reconcile.calls) == 1)
            assert controller.in_flight() == 1
            stopping = asyncio.create_task(controller.stop(timeout=30))
            await settle()
            assert not stopping.done()
            gate.set()
            assert await stopping
            assert controller.in_flight() == 0
            await asyncio.wait_for(task, WAIT)
            assert len(reconcile.calls) == 1  # the second was never handed out
            assert reconcile.cancelled == []


async def test_stop_cancels_what_outlives_the_timeout_and_cancel_stops_at_once() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    source.add(cm("a"))
    reconcile = Reconciler()
    reconcile.gates[req("a")] = asyncio.Event()
    async with running(source, clock=clock) as (informer,):
        controller = Controller(reconcile, for_=(informer, CONFIGMAPS), clock=clock)
        async with started(controller):
            await reconcile.wait_for(lambda: len(reconcile.calls) == 1)
            stopping = asyncio.create_task(controller.stop(timeout=5))
            await clock.advance(5)
            assert await stopping is False
            assert reconcile.cancelled == [req("a")]

        second = Controller(reconcile, for_=(informer, CONFIGMAPS), clock=clock, name="two")
        async with started(second) as task:
            await reconcile.wait_for(lambda: len(reconcile.calls) == 2)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            assert reconcile.cancelled == [req("a"), req("a")]
            assert informer.registrations == []  # the watches were removed


async def test_run_ends_only_once_a_plain_reconcile_in_flight_has_returned() -> None:
    """A thread cannot be interrupted: cancelling the run (twice, as a Manager does
    when it stops after its graceful timeout) stops handing out requests at once,
    but run() returns only when the reconcile in flight has returned, so that
    whoever waits for it (a Manager, before it releases its Lease) knows that no
    reconcile of this controller runs any more."""
    clock = FakeClock()
    source = FakeControllerSource()
    for name in ("a", "b"):
        source.add(cm(name))
    entered, release = threading.Event(), threading.Event()
    calls: list[Request] = []

    def reconcile(request: Request) -> None:
        calls.append(request)
        entered.set()
        release.wait(WAIT)

    async with running(source, clock=clock) as (informer,):
        controller = Controller(reconcile, for_=(informer, CONFIGMAPS), clock=clock)
        task = asyncio.create_task(controller.run())
        try:
            await asyncio.wait_for(asyncio.to_thread(entered.wait, WAIT), WAIT)
            task.cancel()
            await settle()
            task.cancel()
            await settle()
            assert not task.done()  # the reconcile of "a" still runs on its thread
        finally:
            release.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT)
    assert calls == [req("a")]  # nothing new was handed out
    assert informer.registrations == []


async def test_arguments_are_checked() -> None:
    informer = SharedIndexInformer(FakeControllerSource())

    async def reconcile(_request: Request) -> None:
        return None

    with pytest.raises(ValueError, match="max_concurrent_reconciles"):
        Controller(
            reconcile,
            for_=(informer, CONFIGMAPS),
            options=ControllerOptions(max_concurrent_reconciles=0),
        )
    with pytest.raises(TypeError, match="reconcile must be callable"):
        Controller("nope", for_=(informer, CONFIGMAPS))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Predicates"):
        Controller(reconcile, for_=(informer, CONFIGMAPS), predicates=[lambda o: True])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="mapper"):
        Controller(reconcile, for_=(informer, CONFIGMAPS), watches=[(informer, "x")])  # type: ignore[list-item]


async def test_a_reconciler_returning_something_else_is_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    source.add(cm("a"))
    reconcile = Reconciler()
    reconcile.results[req("a")] = ["not a result", None]
    limiter: ItemExponentialFailureRateLimiter[Request] = ItemExponentialFailureRateLimiter(
        base_delay=1, max_delay=1
    )
    async with running(source, clock=clock) as (informer,):
        controller = Controller(
            reconcile,
            for_=(informer, CONFIGMAPS),
            clock=clock,
            options=ControllerOptions(rate_limiter=limiter),
        )
        async with started(controller):
            await reconcile.wait_for(lambda: len(reconcile.calls) == 1)
            await clock.advance(1)
            assert len(reconcile.calls) == 2
    assert "returns a Result or None, not str" in caplog.text


async def test_workers_let_other_tasks_run_while_the_queue_is_full() -> None:
    clock = FakeClock()
    reconcile = Reconciler()  # never waits
    async with running(FakeControllerSource(), clock=clock) as (informer,):
        controller = Controller(reconcile, for_=(informer, CONFIGMAPS), clock=clock)
        for i in range(1000):  # queued before the workers start
            controller.queue.add(req(f"cm-{i}"))
        task = asyncio.create_task(controller.run())
        try:
            # Woken by the first reconcile, this task runs again within a few turns
            # of the loop (its wait is a task of its own), each of at most 64
            # reconciles: long before the queue is drained.
            await reconcile.wait_for(lambda: len(reconcile.calls) >= 1)
            assert len(reconcile.calls) <= 4 * 64
            await reconcile.wait_for(lambda: len(reconcile.calls) == 1000)
        finally:
            task.cancel()
            await asyncio.wait({task})
