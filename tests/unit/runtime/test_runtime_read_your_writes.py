"""Read your own writes on FakeControllerSource informers and a FakeClock: the ledger of
a manager's writes, the wait before a request is reconciled again (a delayed watch:
events the informer misses until its watch is opened again), stale reads, and the
echoes of a reconcile's own writes, which do not queue it again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from test_runtime_controller import CONFIGMAPS, WAIT, Reconciler, cm, req

from kubereflector import SharedIndexInformer
from kubereflector.client import ResourceInfo
from kubereflector.metrics import Metrics
from kubereflector.runtime import (
    Controller,
    ControllerOptions,
    OwnWrites,
    ReadYourWritesLister,
    Request,
    Result,
    StaleReadError,
    enqueue_owner,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle
from kubereflector.workqueue import ItemExponentialFailureRateLimiter
from running_task import running as started

pytestmark = pytest.mark.asyncio

SECRETS = ResourceInfo("", "v1", "secrets", "Secret", namespaced=True)


class World:
    """One FakeControllerSource and its informer, a ledger over it, and a writer that
    stores objects in the source and tells the ledger (what a Manager's client does)."""

    def __init__(self, clock: FakeClock, *, timeout: float = 10.0) -> None:
        self.clock = clock
        self.source = FakeControllerSource()
        self.informer: SharedIndexInformer = SharedIndexInformer(self.source, clock=clock)
        self.ledger = OwnWrites(
            lambda info: self.informer if info == CONFIGMAPS else None,
            timeout=timeout,
            clock=clock,
        )
        self.lister = ReadYourWritesLister(self.informer, self.ledger)
        self.writes: list[tuple[str, str]] = []

    def write(self, verb: str, obj: dict[str, Any], *, delayed: bool = False) -> dict[str, Any]:
        """Store ``obj``; with ``delayed`` the informer's watch misses the event until
        it is opened again (:meth:`deliver`)."""
        name = obj["metadata"]["name"]
        self.writes.append((verb, name))
        method = {"create": "add", "update": "modify", "delete": "delete"}[verb]
        if delayed:
            method += "_drop_watch"
        stored: dict[str, Any] = getattr(self.source, method)(obj)
        self.ledger.written(CONFIGMAPS, verb, obj["metadata"]["namespace"], name, stored)
        return stored

    async def deliver(self) -> None:
        """Open the informer's watch again: it replays what it missed."""
        self.source.reset_watch()
        for _ in range(10):  # a watch that ended at once is opened again after backoff
            await self.clock.advance(1)


@contextlib.asynccontextmanager
async def informing(world: World) -> AsyncIterator[None]:
    async with started(world.informer):
        yield


def created(world: World, name: str) -> int:
    return world.writes.count(("create", name))


async def test_a_reconcile_that_creates_and_runs_again_at_once_does_not_create_twice() -> None:
    clock = FakeClock()
    world = World(clock)
    world.source.add(cm("parent"))
    runs: list[bool] = []

    async def reconcile(request: Request) -> Result | None:
        if request.name != "parent":
            return None
        child = world.lister.namespaced("ns").get("child")
        runs.append(child is not None)
        if child is None:
            world.write("create", cm("child"), delayed=True)
        return Result(requeue_after=0) if len(runs) == 1 else None

    async with informing(world):
        controller = Controller(
            reconcile, for_=(world.informer, CONFIGMAPS), clock=clock, own_writes=world.ledger
        )
        async with started(controller):
            await clock.advance(1)  # the requeue's backoff has passed...
            assert runs == [False]  # ...but the cache has not seen the child: no reconcile
            assert world.ledger.waits == 1
            await world.deliver()
            for _ in range(10):
                if len(runs) == 2:
                    break
                await settle()
    assert runs == [False, True]
    assert created(world, "child") == 1


async def test_writes_the_watch_never_delivers_postpone_the_reconcile_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "kubereflector.runtime")
    clock = FakeClock()
    world = World(clock, timeout=10)
    world.source.add(cm("parent"))
    runs = 0

    async def reconcile(request: Request) -> Result | None:
        nonlocal runs
        if request.name != "parent":
            return None
        runs += 1
        if runs == 1:
            world.write("update", cm("parent", data={"v": "1"}), delayed=True)
            return Result(requeue_after=0)
        return None

    limiter = ItemExponentialFailureRateLimiter[Request](base_delay=1, max_delay=100)
    metrics = Metrics(process=False)
    async with informing(world):
        controller = Controller(
            reconcile,
            for_=(world.informer, CONFIGMAPS),
            options=ControllerOptions(rate_limiter=limiter),
            clock=clock,
            metrics=metrics,
            own_writes=world.ledger,
        )
        async with started(controller):
            await clock.advance(10.5)  # the requeue (1 s), then the wait (10 s)...
            assert runs == 1
            assert world.ledger.stale == 0
            await clock.advance(0.5)  # ...runs out
            assert world.ledger.stale == 1
            await clock.advance(1.99)  # postponed with backoff (2 s)...
            assert runs == 1
            await clock.advance(0.01)  # ...then reconciled: the write is no longer awaited
            assert runs == 2
    postponed = [r for r in caplog.records if "postponed" in r.getMessage()]
    assert [r.levelno for r in postponed] == [logging.INFO]
    assert "configmaps ns/parent" in postponed[0].getMessage()
    assert 'kubereflector_reconcile_stale_reads_total{controller="configmaps"} 1.0' in (
        metrics.exposition().decode()
    )


def stale_read(read: Callable[[], object]) -> str | None:
    """The StaleReadError's message ``read()`` raises (``None`` if it does not)."""
    try:
        read()
    except StaleReadError as err:
        return str(err)
    return None


async def test_a_coroutine_reconcile_reading_its_own_unseen_write_gets_a_stale_read() -> None:
    clock = FakeClock()
    world = World(clock)
    world.source.add(cm("parent"))
    outcomes: list[Any] = []

    async def reconcile(request: Request) -> None:
        if request.name != "parent" or outcomes:
            return
        world.write("update", cm("parent", data={"v": "1"}), delayed=True)
        lister = world.lister.namespaced("ns")
        outcomes.append(lister.get("other"))  # another key: no write of ours, read as is
        outcomes.extend(
            stale_read(read)
            for read in (lambda: lister.get("parent"), lister.list, world.lister.list)
        )

    async with informing(world):
        controller = Controller(
            reconcile, for_=(world.informer, CONFIGMAPS), clock=clock, own_writes=world.ledger
        )
        async with started(controller):
            await settle()
    assert outcomes[0] is None
    assert all(outcomes[1:]), outcomes
    assert "configmaps ns/parent" in outcomes[1]
    assert "use the object the write returned" in outcomes[1]
    # Outside a reconcile the lister reads the cache as it is.
    assert world.lister.namespaced("ns").get("parent") is not None


async def test_a_thread_reconcile_reading_its_own_write_waits_for_the_cache() -> None:
    clock = FakeClock()
    world = World(clock)
    world.source.add(cm("parent"))
    loop = asyncio.get_running_loop()
    waiting = asyncio.Event()
    seen: list[Any] = []

    def reconcile(request: Request) -> None:
        if request.name != "parent" or seen:
            return
        world.write("update", cm("parent", data={"v": "1"}), delayed=True)
        loop.call_soon_threadsafe(waiting.set)
        seen.append(world.lister.namespaced("ns").get("parent"))

    async with informing(world):
        controller = Controller(
            reconcile, for_=(world.informer, CONFIGMAPS), clock=clock, own_writes=world.ledger
        )
        async with started(controller):
            await asyncio.wait_for(waiting.wait(), WAIT)
            await settle()
            assert seen == []  # the thread waits in the read
            await world.deliver()
            for _ in range(int(WAIT * 20)):
                if seen:
                    break
                await asyncio.sleep(0.05)  # the worker thread, not the clock
    assert seen[0]["data"] == {"v": "1"}


@pytest.mark.parametrize(("requeue_on_own_writes", "expected"), [(False, 1), (True, 2)])
async def test_the_echo_of_a_reconciles_own_write_does_not_queue_it_again(
    requeue_on_own_writes: bool, expected: int
) -> None:
    clock = FakeClock()
    world = World(clock)
    world.source.add(cm("a"))
    reconcile = Reconciler()
    calls = reconcile.calls

    async def write_status(request: Request) -> None:
        await reconcile(request)
        if len(reconcile.calls) == 1:
            world.write("update", cm("a", data={"status": "synced"}))

    options = ControllerOptions(requeue_on_own_writes=requeue_on_own_writes)
    async with informing(world):
        controller = Controller(
            write_status,
            for_=(world.informer, CONFIGMAPS),
            options=options,
            clock=clock,
            own_writes=world.ledger,
        )
        async with started(controller):
            await settle()
            await clock.advance(1)
            assert len(calls) == expected
            # A change by someone else queues it as always.
            world.source.modify(cm("a", data={"status": "synced", "spec": "new"}))
            await reconcile.wait_for(lambda: len(calls) == expected + 1)
    assert controller.echoes_skipped() == (1 if expected == 1 else 0)


async def test_an_echo_that_arrives_before_the_writes_answer_is_still_an_echo() -> None:
    """The watch can deliver a write's event before the client has the write's answer
    (so before the ledger knows its resourceVersion): an event for a request being
    reconciled is decided when that reconcile ends."""
    clock = FakeClock()
    world = World(clock)
    world.source.add(cm("a"))
    reconcile = Reconciler()

    async def answer_late(request: Request) -> None:
        await reconcile(request)
        if len(reconcile.calls) == 1:
            stored = world.source.modify(cm("a", data={"status": "synced"}))  # the event...
            await settle()  # ...reaches the handlers...
            world.ledger.written(CONFIGMAPS, "update", "ns", "a", stored)  # ...then the answer

    async with informing(world):
        controller = Controller(
            answer_late, for_=(world.informer, CONFIGMAPS), clock=clock, own_writes=world.ledger
        )
        async with started(controller):
            await settle()
            await clock.advance(1)
            assert len(reconcile.calls) == 1
            world.source.modify(cm("a", data={"status": "synced", "spec": "new"}))
            await reconcile.wait_for(lambda: len(reconcile.calls) == 2)
    assert controller.echoes_skipped() == 1


async def test_an_echo_maps_only_its_writer_away() -> None:
    """A write by the reconcile of one owner to a child another owner controls: the
    child's event queues the other owner (it did not write it)."""
    clock = FakeClock()
    world = World(clock)
    owners = FakeControllerSource()
    for name in ("writer", "other"):
        owners.add(cm(name))
    owner_informer = SharedIndexInformer(owners, clock=clock)
    reconcile = Reconciler()

    async def reconcile_owner(request: Request) -> None:
        await reconcile(request)
        if request.name == "writer" and reconcile.count(request) == 1:
            child = cm("child")
            child["metadata"]["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": n, "controller": c}
                for n, c in (("other", True), ("writer", False))
            ]
            world.write("create", child)

    mapper = enqueue_owner("", "ConfigMap")
    async with informing(world), started(owner_informer):
        controller = Controller(
            reconcile_owner,
            for_=(owner_informer, CONFIGMAPS),
            watches=[(world.informer, mapper)],
            clock=clock,
            own_writes=world.ledger,
            name="owners",
        )
        async with started(controller):
            await reconcile.wait_for(lambda: reconcile.count(req("other")) == 2)
            await settle()
    assert reconcile.count(req("writer")) == 1


async def test_an_event_after_a_relist_is_not_an_echo() -> None:
    """A relist may merge another writer's change into the state it delivers: the
    request is queued even if the state is at a resourceVersion of ours."""
    clock = FakeClock()
    world = World(clock)
    world.source.add(cm("a"))
    reconcile = Reconciler()

    async def write_once(request: Request) -> None:
        await reconcile(request)
        if len(reconcile.calls) == 1:
            world.write("update", cm("a", data={"v": "1"}), delayed=True)

    async with informing(world):
        controller = Controller(
            write_once, for_=(world.informer, CONFIGMAPS), clock=clock, own_writes=world.ledger
        )
        async with started(controller):
            await settle()
            world.source.compact()  # the watch cannot resume: the informer lists again
            await world.deliver()
            await reconcile.wait_for(lambda: len(reconcile.calls) == 2)
    assert world.informer.stats().relists == 1


async def test_only_writes_of_cached_resources_in_the_managers_namespace_are_recorded() -> None:
    clock = FakeClock()
    informer: SharedIndexInformer = SharedIndexInformer(FakeControllerSource(), clock=clock)
    ledger = OwnWrites(
        lambda info: informer if info == CONFIGMAPS else None, namespace="ns", clock=clock
    )
    stored = {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "5", "uid": "u"}}
    ledger.written(SECRETS, "create", "ns", "a", stored)  # no informer of secrets
    ledger.written(CONFIGMAPS, "create", "elsewhere", "a", stored)  # not watched
    assert ledger.recorded == 0
    ledger.written(CONFIGMAPS, "create", "ns", "a", stored)
    assert ledger.recorded == 1
    assert ledger.writer_of(informer, stored) == (None, None)  # written outside a reconcile
    assert (
        ledger.writer_of(
            informer, {**stored, "metadata": {**stored["metadata"], "resourceVersion": "6"}}
        )
        is None
    )
    deleted = {"kind": "Status", "details": {"name": "a", "uid": "u"}}
    ledger.written(CONFIGMAPS, "delete", "ns", "a", deleted)
    assert ledger.writer_of(informer, stored, deleted=True) == (None, None)
    assert (
        ledger.writer_of(
            informer, {"metadata": {"name": "a", "namespace": "ns", "uid": "v"}}, deleted=True
        )
        is None
    )
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        OwnWrites(lambda info: None, timeout=-1)


async def test_a_write_observer_never_fails_the_write(caplog: pytest.LogCaptureFixture) -> None:
    def broken(info: ResourceInfo) -> Any:
        raise RuntimeError("boom")

    ledger = OwnWrites(broken)
    ledger.written(CONFIGMAPS, "create", "ns", "a", {"metadata": {"resourceVersion": "1"}})
    assert ledger.recorded == 0
    assert "could not record the create of a" in caplog.text


async def test_the_ledger_forgets_old_writes() -> None:
    clock = FakeClock()
    informer: SharedIndexInformer = SharedIndexInformer(FakeControllerSource(), clock=clock)
    ledger = OwnWrites(lambda info: informer if info == CONFIGMAPS else None, clock=clock)

    def write(i: int) -> None:
        meta = {"name": f"cm-{i}", "namespace": "ns", "resourceVersion": str(i + 1)}
        ledger.written(CONFIGMAPS, "create", "ns", f"cm-{i}", {"metadata": meta})

    for i in range(500):
        write(i)
    assert repr(ledger) == "<OwnWrites tracked=1 writes=500>"
    await clock.advance(301)
    for i in range(500, 512):  # the 512th record sweeps
        write(i)
    assert repr(ledger) == "<OwnWrites tracked=1 writes=12>"
