"""The Manager against the target (the emulator, or a real cluster): reconciles,
graceful shutdown, two managers with leader election (one leads; failover after
a crash; handover on a graceful stop; a stolen lease), metrics and probes over
HTTP, and the plain-threads way to run.

Leader election runs on a FakeClock, moved on in small steps, each once the
managers on that clock have no request in flight (their real HTTP exchanges with
the target take real time, however loaded the machine: the fake clock must not
run past an elector's try timeout, renew deadline or retry period while one is
on its way): no test waits for a lease duration of wall time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from conftest import KUBECONFIG_ENV, Target
from prometheus_client.parser import text_string_to_metric_families
from typing_extensions import TypedDict

from kubereflector.client import Client, ClientConfig, load_config
from kubereflector.leaderelection import LEASES
from kubereflector.models import ConfigMap, Deployment, Pod
from kubereflector.runtime import (
    ControllerOptions,
    LeaderElection,
    LeaderElectionLostError,
    Manager,
    ManagerError,
    Request,
    Result,
)
from kubereflector.testing import FakeClock

pytestmark = pytest.mark.asyncio

WAIT = 20.0
"""Upper bound (seconds) on any wait; never reached when things work."""


def config_of(target: Target) -> ClientConfig:
    if target.emulator is not None:
        return load_config(target.emulator.kubeconfig_path)
    return load_config(os.environ[KUBECONFIG_ENV])


async def create_configmap(target: Target, name: str, data: dict[str, str]) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    if target.emulator is not None:
        target.emulator.create("configmaps", body, namespace=target.namespace)
    else:
        await target.client.create(f"/api/v1/namespaces/{target.namespace}/configmaps", body)


async def lease_holder(target: Target, name: str) -> str:
    lease = await target.client.get(LEASES.object_path(target.namespace, name))
    return str(lease["spec"].get("holderIdentity") or "")


async def lease_renew_time(target: Target, name: str) -> str:
    lease = await target.client.get(LEASES.object_path(target.namespace, name))
    return str(lease["spec"].get("renewTime") or "")


class Seen:
    """A coroutine reconciler recording requests; awaitable conditions on them."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._changed = asyncio.Event()

    async def __call__(self, request: Request) -> Result | None:
        self.requests.append(request)
        self._changed.set()
        return None

    def names(self) -> set[str]:
        return {r.name for r in self.requests}

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        async def wait() -> None:
            while not condition():
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(wait(), WAIT)


class InFlight:
    """The requests (not watches) that the clients of the managers on one FakeClock
    have in flight: :func:`step` moves that clock on only when there are none, so
    fake time never passes while a lease's read or write is on its way."""

    def __init__(self) -> None:
        self.count = 0
        self._none = asyncio.Event()
        self._none.set()

    def count_requests_of(self, client: Client) -> None:
        send = client.request

        async def request(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            self._none.clear()
            try:
                return await send(*args, **kwargs)
            finally:
                self.count -= 1
                if not self.count:
                    self._none.set()

        setattr(client, "request", request)  # noqa: B010 (an instance's method, on purpose)

    async def none(self) -> None:
        await asyncio.wait_for(self._none.wait(), WAIT)


_IN_FLIGHT: weakref.WeakKeyDictionary[FakeClock, InFlight] = weakref.WeakKeyDictionary()


def in_flight(clock: FakeClock) -> InFlight:
    """The requests in flight of the managers on ``clock`` (see :func:`manager_for`)."""
    return _IN_FLIGHT.setdefault(clock, InFlight())


async def step(clock: FakeClock, seconds: float) -> None:
    """Move ``clock`` on by ``seconds`` once no manager on it has a request in flight
    (what the move wakes runs meanwhile; a request it starts is waited for by the
    next step)."""
    await in_flight(clock).none()
    await clock.advance(seconds)


async def eventually(condition: Callable[[], bool], clock: FakeClock, limit: float = 120) -> None:
    """Move ``clock`` on in quarter seconds (:func:`step`) until ``condition()`` holds."""
    moved = 0.0
    while not condition():
        if moved > limit:
            raise AssertionError(f"not true after {limit}s of the fake clock")
        await step(clock, 0.25)
        moved += 0.25
    await in_flight(clock).none()


@contextlib.asynccontextmanager
async def running(manager: Manager) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(manager.run(handle_signals=False))
    try:
        yield task
    finally:
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeaderElectionLostError):
            await task


def manager_for(
    target: Target,
    seen: Seen,
    *,
    identity: str | None = None,
    clock: FakeClock | None = None,
    release: bool = True,
    **kwargs: Any,
) -> Manager:
    election = None
    if identity is not None:
        election = LeaderElection(
            "kr-test-lease",
            namespace=target.namespace,
            identity=identity,
            release_on_cancel=release,
        )
    manager = Manager(
        config_of(target),
        namespace=target.namespace,
        leader_election=election,
        clock=clock,
        bind_address="127.0.0.1",
        **kwargs,
    )
    if clock is not None:
        in_flight(clock).count_requests_of(manager.client)
    manager.reconciler("configmaps", reconcile=seen)
    return manager


async def test_a_manager_reconciles_and_stops_gracefully(target: Target) -> None:
    await create_configmap(target, "one", {"a": "1"})
    seen = Seen()
    manager = manager_for(target, seen)
    async with running(manager) as task:
        await asyncio.wait_for(manager.wait_elected(), WAIT)
        await seen.wait_for(lambda: "one" in seen.names())
        await create_configmap(target, "two", {"b": "2"})
        await seen.wait_for(lambda: "two" in seen.names())
        assert manager.is_leader()
        assert [c.name for c in manager.controllers] == ["configmaps"]
        manager.stop()
        await asyncio.wait_for(task, WAIT)  # returns: a graceful stop is not an error
    assert not manager.is_leader()
    with pytest.raises(ManagerError, match="runs once"):
        await manager.run()


async def test_no_reconcile_starts_once_stop_has_returned(target: Target) -> None:
    """stop() takes effect at once: the reconcile in flight finishes, and none of
    the queued requests is handed out, even before run() has woken up to shut
    down."""
    for name in ("a", "b", "c"):
        await create_configmap(target, name, {"v": "1"})
    gate, one_started = asyncio.Event(), asyncio.Event()
    started: list[str] = []

    async def reconcile(request: Request) -> None:
        started.append(request.name)
        one_started.set()
        await gate.wait()

    manager = Manager(config_of(target), namespace=target.namespace)
    manager.reconciler("configmaps", reconcile=reconcile)
    async with running(manager) as task:
        await asyncio.wait_for(one_started.wait(), WAIT)
        manager.stop()
        gate.set()  # the reconcile in flight ends now: nothing queued may follow it
        await asyncio.wait_for(task, WAIT)
    assert len(started) == 1, started


async def test_wait_elected_waits_for_a_run_that_has_not_begun(target: Target) -> None:
    """Awaited before run() has taken a step (Python 3.12+ wait_for awaits in
    place, so 'create_task(run()); await wait_for(wait_elected())' does this),
    wait_elected waits for the election instead of refusing."""
    manager = manager_for(target, Seen())
    waiting = asyncio.ensure_future(manager.wait_elected())
    await asyncio.sleep(0)  # the wait has begun; run() has not even been called
    assert not waiting.done()
    async with running(manager):
        await asyncio.wait_for(waiting, WAIT)
        assert manager.is_leader()
        manager.stop()


async def test_two_managers_one_leads_and_the_other_takes_over_after_a_crash(
    target: Target,
) -> None:
    clock = FakeClock()
    seen_a, seen_b = Seen(), Seen()
    a = manager_for(target, seen_a, identity="a", clock=clock, release=False)
    b = manager_for(target, seen_b, identity="b", clock=clock)
    await create_configmap(target, "cm", {"x": "1"})
    async with running(a) as task_a:
        await asyncio.wait_for(a.wait_elected(), WAIT)
        async with running(b):
            await seen_a.wait_for(lambda: "cm" in seen_a.names())
            await eventually(lambda: b.elector is not None and b.elector.get_leader() == "a", clock)
            for _ in range(20):  # b keeps following while a renews
                await step(clock, 0.5)
            assert not b.is_leader()
            assert seen_b.requests == []
            assert await lease_holder(target, "kr-test-lease") == "a"
            # a crashes: it stops without releasing its lease.
            task_a.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task_a
            assert await lease_holder(target, "kr-test-lease") == "a"
            await eventually(b.is_leader, clock)
            await seen_b.wait_for(lambda: "cm" in seen_b.names())
            assert await lease_holder(target, "kr-test-lease") == "b"


async def test_a_graceful_stop_releases_the_lease_for_the_other(target: Target) -> None:
    clock = FakeClock()
    seen_a, seen_b = Seen(), Seen()
    a = manager_for(target, seen_a, identity="a", clock=clock)
    b = manager_for(target, seen_b, identity="b", clock=clock)
    async with running(a) as task_a:
        await asyncio.wait_for(a.wait_elected(), WAIT)
        async with running(b):
            await eventually(lambda: b.elector is not None and b.elector.get_leader() == "a", clock)
            a.stop()
            await asyncio.wait_for(task_a, WAIT)
            assert await lease_holder(target, "kr-test-lease") == ""
            started = clock.now()
            await eventually(b.is_leader, clock)
            # Within about one retry period of b (2 s, jittered up to 4.4 s; the fake
            # clock moves on while b's requests are in flight), not a lease duration.
            assert clock.now() - started < 10


async def test_the_lease_is_kept_until_a_plain_reconcile_outliving_the_stop_returns(
    target: Target,
) -> None:
    """A plain-function reconcile cannot be cancelled: past the graceful timeout
    the manager stops waiting for it, but it must not release the Lease while it
    runs (another replica would reconcile the same objects at the same time)."""
    await create_configmap(target, "one", {"a": "1"})
    clock = FakeClock()
    entered, release = threading.Event(), threading.Event()

    def slow(request: Request) -> None:
        entered.set()
        release.wait(WAIT)

    election = LeaderElection("kr-test-lease", namespace=target.namespace, identity="a")
    manager = Manager(
        config_of(target),
        namespace=target.namespace,
        leader_election=election,
        clock=clock,
        graceful_shutdown_timeout=1.0,
    )
    in_flight(clock).count_requests_of(manager.client)
    manager.reconciler("configmaps", reconcile=slow)

    def waiting_for_the_thread() -> bool:  # the controller joins its threads from this one
        return any(t.name == "kubereflector reconcile threads" for t in threading.enumerate())

    async with running(manager) as task:
        try:
            await eventually(entered.is_set, clock)
            manager.stop()  # the graceful timeout (1 s) passes: the reconcile is left running
            # Until the manager waits for the thread, or (had it not waited) has released
            # the Lease and returned.
            await eventually(lambda: task.done() or waiting_for_the_thread(), clock)
            assert not manager.is_leader()
            assert not task.done()
            assert await lease_holder(target, "kr-test-lease") == "a"
            # However long it runs, the Lease is renewed meanwhile: had the renewals
            # stopped, it would expire after lease_duration (15 s) and another
            # replica take it while the reconcile still runs.
            renewed = await lease_renew_time(target, "kr-test-lease")
            for _ in range(80):  # 20 s of the fake clock
                await step(clock, 0.25)
            await in_flight(clock).none()
            assert not task.done()
            assert await lease_holder(target, "kr-test-lease") == "a"
            assert await lease_renew_time(target, "kr-test-lease") != renewed
        finally:
            release.set()
        await asyncio.wait_for(task, WAIT)
    assert await lease_holder(target, "kr-test-lease") == ""


async def test_a_stolen_lease_stops_reconciling_and_run_raises(target: Target) -> None:
    clock = FakeClock()
    seen = Seen()
    a = manager_for(target, seen, identity="a", clock=clock)
    async with running(a) as task:
        await asyncio.wait_for(a.wait_elected(), WAIT)
        path = LEASES.object_path(target.namespace, "kr-test-lease")
        # Unconditionally (a merge patch): a's renewals go on meanwhile.
        await target.client.patch(path, {"spec": {"holderIdentity": "intruder"}})
        await eventually(lambda: not a.is_leader(), clock, limit=30)
        assert a.controllers == []
        with pytest.raises(LeaderElectionLostError, match="held by intruder"):
            await asyncio.wait_for(task, WAIT)


async def fetch(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


async def test_a_lease_that_could_not_be_renewed_says_so(target: Target) -> None:
    emulator = target.faults()
    clock = FakeClock()
    a = manager_for(target, Seen(), identity="a", clock=clock)
    async with running(a) as task:
        await asyncio.wait_for(a.wait_elected(), WAIT)
        emulator.fail_next(10_000, 500)  # every renewal fails
        await eventually(task.done, clock, limit=30)
        with pytest.raises(LeaderElectionLostError, match=r"not renewed by a within 10s$"):
            await task
        emulator.fail_next(0, 500)


async def test_metrics_and_probes_are_served_over_http(target: Target) -> None:
    await create_configmap(target, "m1", {"a": "1"})
    seen = Seen()
    manager = manager_for(target, seen, identity="solo", metrics_port=0, health_port=0)
    async with running(manager):
        await asyncio.wait_for(manager.wait_elected(), WAIT)
        await seen.wait_for(lambda: "m1" in seen.names())
        assert manager.metrics_url is not None
        assert manager.health_url is not None
        assert manager.metrics_url.rsplit(":", 1)[1] != manager.health_url.rsplit(":", 1)[1]
        assert await fetch(manager.health_url + "/healthz") == (200, "ok")
        assert await fetch(manager.health_url + "/readyz") == (200, "ok")
        status, body = await fetch(manager.metrics_url)
        assert status == 200
        values = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body)
            for s in family.samples
        }
        ok = ("controller", "configmaps"), ("result", "success")
        assert values[("controller_runtime_reconcile_total", ok)] >= 1
        assert values[("controller_runtime_max_concurrent_reconciles", (ok[0],))] == 1
        assert values[("leader_election_master_status", (("name", "kr-test-lease"),))] == 1
        assert (
            values[("workqueue_adds_total", (("controller", "configmaps"), ("name", "configmaps")))]
            >= 1
        )
        assert values[("kubereflector_informer_synced", (("resource", "configmaps"),))] == 1
        assert any(
            name == "rest_client_requests_total" and dict(labels).get("code") == "200"
            for name, labels in values
        )


def plain_reconciler(
    manager: Manager, seen: list[tuple[str, str]], reconciled: threading.Event
) -> Callable[[Request], None]:
    """A plain-function reconciler that marks each ConfigMap through the sync client."""

    def reconcile(request: Request) -> None:
        configmaps = manager.sync_client.resource("configmaps", namespace=request.namespace)
        configmaps.patch(request.name, {"metadata": {"annotations": {"seen-by": "plain"}}})
        seen.append((request.name, threading.current_thread().name))
        reconciled.set()

    return reconcile


async def annotation(target: Target, name: str) -> str | None:
    cm = await target.client.get(f"/api/v1/namespaces/{target.namespace}/configmaps/{name}")
    return (cm["metadata"].get("annotations") or {}).get("seen-by")


async def test_run_sync_runs_plain_function_reconcilers_on_threads(target: Target) -> None:
    await create_configmap(target, "t1", {"a": "1"})
    seen: list[tuple[str, str]] = []
    reconciled = threading.Event()
    manager = Manager(config_of(target), namespace=target.namespace)
    with pytest.raises(ManagerError, match="no event loop yet"):
        manager.sync_client  # noqa: B018
    manager.reconciler("configmaps", reconcile=plain_reconciler(manager, seen, reconciled))
    runner = asyncio.create_task(asyncio.to_thread(manager.run_sync))
    try:
        assert await asyncio.to_thread(reconciled.wait, WAIT)
    finally:
        manager.stop()
        await asyncio.wait_for(runner, WAIT)
    assert seen[0][0] == "t1"
    assert seen[0][1].startswith("reconcile-configmaps")
    assert await annotation(target, "t1") == "plain"
    with pytest.raises(RuntimeError, match=r"await manager\.run"):
        Manager(config_of(target)).run_sync()


async def test_plain_function_reconcilers_write_through_the_sync_client_in_asyncio_too(
    target: Target,
) -> None:
    await create_configmap(target, "t2", {"a": "1"})
    seen: list[tuple[str, str]] = []
    reconciled = threading.Event()
    manager = Manager(config_of(target), namespace=target.namespace)
    manager.reconciler("configmaps", reconcile=plain_reconciler(manager, seen, reconciled))
    async with running(manager):
        assert await asyncio.to_thread(reconciled.wait, WAIT)
        # On the manager's own loop, blocking would deadlock: refused.
        with pytest.raises(RuntimeError, match="own thread"):
            manager.sync_client.resource("configmaps", namespace=target.namespace).get("t2")
    assert await annotation(target, "t2") == "plain"


async def test_registration_is_checked(target: Target) -> None:
    manager = Manager(config_of(target), namespace=target.namespace)

    @manager.reconciler(
        "configmaps", owns=["configmaps"], options=ControllerOptions(max_concurrent_reconciles=2)
    )
    async def reconcile(request: Request) -> None:
        return None

    assert reconcile.__name__ == "reconcile"  # the decorator returns the function
    with pytest.raises(ValueError, match="exists already"):
        manager.reconciler("configmaps", reconcile=reconcile)
    with pytest.raises(TypeError, match="resource name or model, mapper"):
        manager.reconciler("pods", watches=["configmaps"], name="x")  # type: ignore[list-item]
    with pytest.raises(TypeError, match="for_ is a resource name or a model, not 42"):
        manager.reconciler(42, reconcile=reconcile)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="owns takes resource names or models, not ''"):
        manager.reconciler("pods", owns=[""], reconcile=reconcile)

    class Gadget(TypedDict):
        size: int

    with pytest.raises(LookupError, match=r"test_manager\..*Gadget is not a registered model"):
        manager.reconciler("pods", owns=[Gadget], reconcile=reconcile)
    with pytest.raises(ValueError, match="a reconciler named 'configmaps' exists already"):
        manager.reconciler(ConfigMap, reconcile=reconcile)  # named for its resource
    manager.reconciler(Deployment, owns=["pods", Pod], reconcile=reconcile)
    with pytest.raises(ValueError, match=r"'deployments\.apps' exists already"):
        manager.reconciler("deploy", name="deployments.apps", reconcile=reconcile)
    with pytest.raises(ValueError, match="max_concurrent_reconciles"):
        manager.reconciler("pods", options=ControllerOptions(max_concurrent_reconciles=0))
    manager.reconciler("no-such-things", reconcile=reconcile, name="unknown")
    with pytest.raises(LookupError, match="no-such-things"):
        await manager.run(handle_signals=False)
    with pytest.raises(TypeError, match="ClientConfig or a Client"):
        Manager("https://example")  # type: ignore[arg-type]


class Loop:
    """A Runnable recording its starts and stops; it may fail on demand."""

    def __init__(self, *, fail: BaseException | None = None) -> None:
        self.starts = 0
        self.stops = 0
        self.running = asyncio.Event()
        self.fail = fail

    async def run(self, stopping: asyncio.Event) -> None:
        self.starts += 1
        self.running.set()
        if self.fail is not None:
            raise self.fail
        try:
            await stopping.wait()
        finally:
            self.running.clear()
        self.stops += 1


async def test_runnables_run_beside_the_controllers_and_stop_gracefully(target: Target) -> None:
    everywhere, leader_only = Loop(), Loop()
    manager = manager_for(target, Seen())
    manager.add(everywhere)
    manager.add(leader_only, leader_only=True)
    async with running(manager) as task:
        await asyncio.wait_for(manager.wait_elected(), WAIT)
        await asyncio.wait_for(everywhere.running.wait(), WAIT)
        await asyncio.wait_for(leader_only.running.wait(), WAIT)
        manager.stop()
        await asyncio.wait_for(task, WAIT)
    assert (everywhere.starts, everywhere.stops) == (1, 1)  # stopped gracefully, not cancelled
    assert (leader_only.starts, leader_only.stops) == (1, 1)
    with pytest.raises(ManagerError, match="before the manager runs"):
        manager.add(Loop())
    with pytest.raises(TypeError, match="async run"):
        manager_for(target, Seen()).add(object())  # type: ignore[arg-type]


async def test_a_leader_only_runnable_waits_for_the_lease(target: Target) -> None:
    clock = FakeClock()
    a = manager_for(target, Seen(), identity="a", clock=clock)
    b = manager_for(target, Seen(), identity="b", clock=clock)
    on_b_everywhere, on_b_leading = Loop(), Loop()
    b.add(on_b_everywhere)
    b.add(on_b_leading, leader_only=True)
    async with running(a) as task_a:
        await asyncio.wait_for(a.wait_elected(), WAIT)
        async with running(b):
            await asyncio.wait_for(on_b_everywhere.running.wait(), WAIT)
            await eventually(lambda: b.elector is not None and b.elector.get_leader() == "a", clock)
            assert on_b_leading.starts == 0  # a leads: b's leader-only work waits
            a.stop()
            await asyncio.wait_for(task_a, WAIT)
            await eventually(b.is_leader, clock)
            await asyncio.wait_for(on_b_leading.running.wait(), WAIT)


async def test_a_failing_runnable_stops_the_manager_with_its_error(target: Target) -> None:
    manager = manager_for(target, Seen())
    manager.add(Loop(fail=RuntimeError("the webhook port is taken")))
    with pytest.raises(RuntimeError, match="the webhook port is taken"):
        await asyncio.wait_for(manager.run(handle_signals=False), WAIT)
