"""Randomized, for the controller layer: whatever the API server, the network and
the reconciler do wrong and whenever, the reconcile loop keeps its promises.

Each schedule, drawn from a seeded ``random.Random``, runs two replicas of an
operator (two :class:`~kubereflector.runtime.Manager`\\ s with leader election on
one Lease, each reaching the emulator through a :class:`TcpProxy` of its own)
through object changes (single, in bursts, and in bursts while the informers
relist after a 410), watch drops, compaction, failing requests, emulator
restarts, a replica's network black-holed (a partition: its renewals hang until
its renew deadline, the other takes over after the lease duration) and healed,
its connections reset, graceful stops (the lease released) and kills (not
released) with a new replica taking the place, and virtual time passing (one
FakeClock drives the emulator, leader election, requeues, backoff and the
reconciler's own waits; HTTP crosses the loopback in real time). The reconciler
is slow, fails, asks for requeues (at once and later) and fails terminally, at
random.

Invariants, checked on the recorded history as it happens and at the end:

* **one at a time**: a key is never reconciled by two workers at once, of one
  replica or of two;
* **only a leader reconciles, and only while running**: a reconcile starts only
  on a replica whose manager leads, whose stop was not requested (drains of
  reconciles in flight are allowed), and whose identity the Lease on the server
  names;
* **the cache is never older than the trigger**: when a reconcile of a key
  starts, that replica's cache holds that key at a resourceVersion no older
  than the newest event that queued it (or holds none, because it was deleted
  since);
* **nothing is lost**: after the last change (the faults stop, every object is
  written once more), the last reconcile of every key saw its final state
  (the final resourceVersion, or gone), and the leader's cache equals the server;
* no task died and nothing was logged at ERROR but the reconciler's injected
  failures.

The seed is in each test's id and in the failure message with the schedule.
``make fault-campaign`` (or ``KUBEREFLECTOR_FAULT_SEED=<first seed>
KUBEREFLECTOR_FAULT_SCHEDULES=<count>``) runs a longer campaign; CI runs a few.
With ``KUBEREFLECTOR_FAULT_STATS=<file>``, each schedule appends a line of JSON
saying what it exercised (reconciles and their outcomes, leadership terms, the
replicas started, ...).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import pytest

from kubereflector import ApiError, DeletedFinalStateUnknown, ReflectorOptions
from kubereflector.client import load_config
from kubereflector.runtime import (
    ControllerOptions,
    LeaderElection,
    Manager,
    Predicate,
    Request,
    Result,
    TerminalError,
)
from kubereflector.testing import ApiServerEmulator, FakeClock, settle
from kubereflector.testing._tcp_proxy import TcpProxy

T = TypeVar("T")

FIRST_SEED = int(os.environ.get("KUBEREFLECTOR_FAULT_SEED", "0"))
STATS = os.environ.get("KUBEREFLECTOR_FAULT_STATS")
SCHEDULES = int(os.environ.get("KUBEREFLECTOR_FAULT_SCHEDULES", "6"))
OPERATIONS = 30
NAMESPACE = "faults"
LEASE = "runtime-faults"
NAMES = [f"cm{i}" for i in range(6)]
CONVERGE = 40.0
"""Seconds (real time) allowed to converge once the faults stop; a few are used."""
FAILURES = [500, 500, 429, 503, 504, 410]

FAST_INFORMERS = ReflectorOptions(
    backoff_initial=0.02, backoff_cap=0.2, backoff_reset_after=5.0, min_watch_timeout=300.0
)
"""The replicas' informers retry after a 410 or a failed list in hundredths of a
second of real time (the Manager's informers run on the real clock)."""


# -- the history ---------------------------------------------------------------------------------


@dataclass
class Reconcile:
    replica: str
    key: str
    started: int
    seen: int | None
    """The resourceVersion of the key in the replica's cache at the start (None: absent)."""
    trigger: int
    """The newest resourceVersion of an event of the key that queued a request, so far."""
    ended: int | None = None
    outcome: str = ""


@dataclass
class History:
    """What happened, in the order it happened (one event loop: no races)."""

    seq: int = 0
    reconciles: list[Reconcile] = field(default_factory=list)
    active: dict[str, Reconcile] = field(default_factory=dict)
    triggers: dict[tuple[str, str], int] = field(default_factory=dict)
    """(replica, key): the newest resourceVersion of an event that queued the key."""
    watched: dict[int, set[str]] = field(default_factory=dict)
    """Each controller (one per leadership term; by id): the keys its events named."""
    controllers: list[object] = field(default_factory=list)
    """Every controller ever run (kept alive: their ids stay unique)."""
    deletes: dict[str, list[int]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def tick(self) -> int:
        self.seq += 1
        return self.seq

    def violation(self, text: str) -> None:
        self.violations.append(f"#{self.seq}: {text}")


def rv_of(obj: Any) -> int:
    if isinstance(obj, DeletedFinalStateUnknown):
        obj = obj.obj
    return int(obj["metadata"]["resourceVersion"])


def key_of(obj: Any) -> str:
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


# -- the replicas --------------------------------------------------------------------------------


class Replica:
    """One operator process: a Manager reaching the emulator through its own proxy."""

    def __init__(
        self, number: int, server: ApiServerEmulator, clock: FakeClock, world: World
    ) -> None:
        self.identity = f"r{number}"
        self.server = server
        self.clock = clock
        self.world = world
        self.proxy = TcpProxy("127.0.0.1", server.port)
        self.manager: Manager | None = None
        self.task: asyncio.Task[None] | None = None
        self.stop_requested = False
        self.killed = False

    async def start(self, rng: random.Random) -> None:
        await self.proxy.start()
        config = load_config(self.server.kubeconfig_path)
        config = dataclasses.replace(config, server=f"http://127.0.0.1:{self.proxy.port}")
        election = LeaderElection(
            LEASE,
            namespace=NAMESPACE,
            identity=self.identity,
            release_on_cancel=rng.random() < 0.5,
            on_lost="campaign",
        )
        manager = Manager(
            config,
            namespace=NAMESPACE,
            leader_election=election,
            graceful_shutdown_timeout=rng.choice([1.0, 5.0]),
            clock=self.clock,
        )
        # The Manager takes no informer options (yet): its factory's, set before it runs.
        manager.factory._reflector_options = FAST_INFORMERS
        recorder = Predicate(
            create=self._triggered,
            update=lambda _old, new: self._triggered(new),
            delete=self._triggered,
        )
        manager.reconciler(
            "configmaps",
            predicates=[recorder],
            options=ControllerOptions(max_concurrent_reconciles=rng.choice([1, 2, 3])),
            reconcile=self._reconcile_plain if self.world.plain else self._reconcile,
        )
        self.manager = manager
        self.task = asyncio.create_task(manager.run(handle_signals=False), name=self.identity)

    def leads(self) -> bool:
        return self.manager is not None and self.manager.is_leader()

    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def _triggered(self, obj: Any) -> bool:
        key = key_of(obj)
        slot = (self.identity, key)
        history = self.world.history
        history.triggers[slot] = max(history.triggers.get(slot, 0), rv_of(obj))
        assert self.manager is not None
        controllers = self.manager.controllers
        if controllers:  # the handler's own controller, whose term this is
            if id(controllers[0]) not in history.watched:
                history.controllers.append(controllers[0])
            history.watched.setdefault(id(controllers[0]), set()).add(key)
        return True

    def _begin(self, request: Request) -> Reconcile:
        """Record (and check) the start of a reconcile; on the event loop."""
        history = self.world.history
        assert self.manager is not None
        key = f"{request.namespace}/{request.name}"
        cached = self.manager.lister_for("configmaps").namespaced(request.namespace)
        obj = cached.get(request.name)
        record = Reconcile(
            self.identity,
            key,
            history.tick(),
            None if obj is None else rv_of(obj),
            history.triggers.get((self.identity, key), 0),
        )
        history.reconciles.append(record)
        self._check_start(record, plain=self.world.plain)
        history.active[record.key] = record
        return record

    def _end(self, record: Reconcile, err: BaseException | None) -> None:
        """Record the end of a reconcile; on the event loop."""
        history = self.world.history
        if record.ended is not None:
            return  # its replica was killed: it ended then
        if err is not None:
            record.outcome = type(err).__name__
        record.ended = history.tick()
        if history.active.get(record.key) is record:
            del history.active[record.key]

    async def _reconcile(self, request: Request) -> Result | None:
        if self.killed:
            # Handed out between the kill (a cancellation, here) and its reaching the
            # workers: a killed process runs nothing, so neither does this.
            return None
        record = self._begin(request)
        err: BaseException | None = None
        try:
            return await self.world.behave(record)
        except BaseException as exc:
            err = exc
            raise
        finally:
            self._end(record, err)

    def _reconcile_plain(self, request: Request) -> Result | None:
        """The same as a plain function, on a worker thread of the controller: its
        steps run on the event loop while the thread waits for them (as a thread
        blocked in I/O would), so a cancelled controller does not stop it."""
        loop = self.world.loop

        def on_loop(fn: Callable[[], T]) -> T:
            async def call() -> T:
                return fn()

            return asyncio.run_coroutine_threadsafe(call(), loop).result()

        if self.killed:
            return None  # dispatched just before the kill: a dead process runs nothing
        record = on_loop(lambda: self._begin(request))
        err: BaseException | None = None
        try:
            return asyncio.run_coroutine_threadsafe(self.world.behave(record), loop).result()
        except BaseException as exc:
            err = exc
            raise
        finally:
            on_loop(lambda: self._end(record, err))

    def _check_start(self, record: Reconcile, *, plain: bool) -> None:
        """The checks at the start of a reconcile. A plain reconcile is recorded
        when its thread calls back to the loop, a moment after the controller
        dispatched it, when its replica may have stopped or lost the lease since:
        for those, the stop and leadership checks would be unsound."""
        history = self.world.history
        other = history.active.get(record.key)
        if other is not None:
            history.violation(
                f"{record.replica} started reconciling {record.key} while {other.replica} "
                f"reconciled it (since #{other.started})"
            )
        self._check_cache(record)
        if plain:
            return
        if self.stop_requested or self.killed:
            history.violation(f"{record.replica} started a reconcile after its stop")
        assert self.manager is not None
        if not self.manager.is_leader():
            history.violation(f"{record.replica} reconciled without leading")
        holder = self.world.lease_holder()
        if holder != self.identity:
            history.violation(f"{record.replica} reconciled while the Lease names {holder!r}")

    def _check_cache(self, record: Reconcile) -> None:
        """The cache is never older than the newest event that queued the key."""
        history = self.world.history
        if record.seen is None:
            deletes = history.deletes.get(record.key, [])
            if record.trigger and not any(rv >= record.trigger for rv in deletes):
                history.violation(
                    f"{record.replica} saw no {record.key} though an event at "
                    f"{record.trigger} queued it and it was not deleted since"
                )
        elif record.seen < record.trigger:
            history.violation(
                f"{record.replica} saw {record.key} at {record.seen}, older than the event "
                f"at {record.trigger} that queued it"
            )

    async def stop(self) -> None:
        """A graceful stop (SIGTERM): drain, release the Lease, stop."""
        self.stop_requested = True
        assert self.manager is not None
        self.manager.stop()

    def kill(self) -> None:
        """A crash: everything ends at once; the Lease is released only if
        ``release_on_cancel`` says so. (A plain reconcile's thread outlives the
        cancelled manager here, not in a killed process: it ends now.)"""
        self.killed = True
        history = self.world.history
        for key, record in list(history.active.items()):
            if record.replica == self.identity:
                record.outcome = "killed"
                record.ended = history.tick()
                del history.active[key]
        assert self.task is not None
        self.task.cancel()

    async def finish(self) -> None:
        """Wait for the manager to end (the clock is moved on by whoever waits);
        then close the proxy. How it ended is :meth:`World.supervise`'s business."""
        if self.task is not None:
            await asyncio.wait({self.task})
        await self.proxy.stop()


# -- the world: the server, the clock, the replicas and the reconciler's behaviour ---------------


class World:
    def __init__(self, seed: int, server: ApiServerEmulator, clock: FakeClock) -> None:
        self.rng = random.Random(seed)
        self.behaviour = random.Random(seed + 1)
        self.plain = is_plain(seed)
        """Whether the reconciler is a plain function (on worker threads)."""
        self.loop = asyncio.get_running_loop()
        self.server = server
        self.clock = clock
        self.history = History()
        self.replicas: list[Replica] = []
        self.retired: list[Replica] = []
        self.numbers = iter(range(1000))
        self.attempts: dict[tuple[str, int | None], int] = {}
        self.slow = False
        """Every reconcile waits a second (virtual) before it succeeds."""
        self.slowest_next = False
        """The next reconcile is as slow as they come."""

    def existing(self) -> set[str]:
        return {o["metadata"]["name"] for o in self.server.objects("configmaps", NAMESPACE)}

    def lease_holder(self) -> str:
        try:
            lease = self.server.get("leases", LEASE, NAMESPACE)
        except ApiError:
            return ""
        return str(lease.get("spec", {}).get("holderIdentity") or "")

    async def add_replica(self) -> Replica:
        replica = Replica(next(self.numbers), self.server, self.clock, self)
        await replica.start(self.rng)
        self.replicas.append(replica)
        return replica

    def retire(self, replica: Replica) -> None:
        self.replicas.remove(replica)
        self.retired.append(replica)

    async def supervise(self) -> None:
        """Replace a replica that ended by itself, as Kubernetes restarts a pod. Only
        an injected fault may end one, and only before it campaigns (discovery
        failing at its start, with an error status or a connection reset, as a
        controller-runtime manager's start fails);
        anything else is a violation."""
        for replica in list(self.replicas):
            task = replica.task
            if task is None or not task.done() or replica.stop_requested or replica.killed:
                continue
            err = None if task.cancelled() else task.exception()
            assert replica.manager is not None
            started = replica.manager.elector is not None
            if started or not isinstance(err, (ApiError, aiohttp.ClientError)):
                self.history.violation(f"{replica.identity} ended by itself: {err!r}")
            self.retire(replica)
            await self.add_replica()

    def leader(self) -> Replica | None:
        leaders = [r for r in self.replicas if r.leads()]
        return leaders[0] if leaders else None

    async def behave(self, record: Reconcile) -> Result | None:
        """What the reconciler does this time: mostly succeed; sometimes be slow,
        fail, ask to be requeued or fail terminally. At most three attempts per
        key and state misbehave, so that things settle."""
        if self.slow:
            await self.clock.sleep(1.0)
            record.outcome = "slow"
            return None
        if self.slowest_next:
            self.slowest_next = False
            await self.clock.sleep(6.0 if self.plain else 12.0)
            record.outcome = "slow"
            return None
        slot = (record.key, record.seen)
        self.attempts[slot] = attempt = self.attempts.get(slot, 0) + 1
        roll = self.behaviour.random()
        if attempt > 3 or roll < 0.55:
            record.outcome = "ok"
            return None
        if roll < 0.68:
            slow = [0.3, 2.0, 6.0] if self.plain else [0.3, 3.0, 12.0]  # see is_plain
            await self.clock.sleep(self.behaviour.choice(slow))
            record.outcome = "slow"
            return None
        if roll < 0.80:
            raise RuntimeError(f"injected failure reconciling {record.key}")
        if roll < 0.88:
            record.outcome = "requeue_after"
            return Result(requeue_after=self.behaviour.choice([0.1, 2.0, 20.0]))
        if roll < 0.96:
            record.outcome = "requeue"
            return Result(requeue_after=0)
        raise TerminalError(f"injected terminal failure reconciling {record.key}")

    # -- writes ----------------------------------------------------------------------------

    def write(self, name: str, change: str) -> None:
        """Create or update (``x``/``y``: a data value) or delete (``z``) one ConfigMap."""
        try:
            self.server.get("configmaps", name, NAMESPACE)
        except ApiError:
            if change != "z":
                body = {"metadata": {"name": name}, "data": {"v": change}}
                self.server.create("configmaps", body, namespace=NAMESPACE)
            return
        if change == "z":
            self.server.delete("configmaps", name, NAMESPACE)
            key = f"{NAMESPACE}/{name}"
            self.history.deletes.setdefault(key, []).append(int(self.server.resource_version))
        else:
            patch = {"data": {"v": change}}
            self.server.patch("configmaps", name, patch, namespace=NAMESPACE)


# -- schedules -------------------------------------------------------------------------------


def is_plain(seed: int) -> bool:
    """Whether the schedule's reconciler is a plain function (on worker threads).

    A plain reconcile cannot be stopped: one that outlives its replica's lost
    lease by more than ``lease_duration - renew_deadline`` overlaps the next
    leader's, as in any client-go program. So plain schedules partition no
    replica (they reset its connections instead), and their slow reconciles
    (up to 6 s) outlive graceful stops (1 or 5 s) only: there the manager must
    wait for them before it releases the Lease."""
    return random.Random(seed).random() < 0.3


def schedule(seed: int) -> list[tuple[Any, ...]]:
    """The operations of one schedule (times in the schedule's virtual seconds)."""
    rng = random.Random(seed)
    rng.random()  # is_plain's
    plain = is_plain(seed)
    ops: list[tuple[Any, ...]] = []
    for _ in range(OPERATIONS):
        roll = rng.random()
        if roll < 0.24:
            ops.append(("write", rng.choice(NAMES), rng.choice("xyz")))
        elif roll < 0.30:
            ops.append(("burst", [(rng.choice(NAMES), rng.choice("xyz")) for _ in range(8)]))
        elif roll < 0.35:
            ops.append(("relist_burst", [(rng.choice(NAMES), rng.choice("xy")) for _ in range(6)]))
        elif roll < 0.40:
            ops.append(("drop", rng.random() < 0.5))
        elif roll < 0.43:
            ops.append(("compact",))
        elif roll < 0.48:
            ops.append(("fail", rng.randint(1, 3), rng.choice(FAILURES)))
        elif roll < 0.50:
            ops.append(("restart",))
        elif roll < 0.55:
            # The leader's, mostly.
            ops.append(("cut" if plain else "partition", rng.random() < 0.7))
        elif roll < 0.58:
            ops.append(("heal",))
        elif roll < 0.61:
            ops.append(("cut", rng.random() < 0.7))
        elif roll < 0.65:
            # Of the leader mostly, and then half the time while it reconciles slowly.
            ops.append(("stop", rng.random() < 0.7, rng.choice(NAMES), rng.random() < 0.5))
        elif roll < 0.68:
            ops.append(("kill", rng.random() < 0.7))
        else:
            ops.append(("advance", rng.choice([0.05, 0.5, 2.0, 6.0, 16.0])))
    return ops


def _target(world: World, leader: bool) -> Replica:
    chosen = world.leader() if leader else None
    return chosen if chosen is not None else world.rng.choice(world.replicas)


async def _advance(clock: FakeClock, seconds: float) -> None:
    """Move virtual time on in quarter seconds, letting HTTP exchanges complete."""
    while seconds > 0:
        step = min(0.25, seconds)
        await clock.advance(step)
        seconds -= step
        await settle(20)


async def _apply(world: World, op: tuple[Any, ...]) -> None:
    server, kind = world.server, op[0]
    if kind == "write":
        world.write(op[1], op[2])
    elif kind == "burst":
        for name, change in op[1]:
            world.write(name, change)
            await asyncio.sleep(0)
    elif kind == "relist_burst":
        server.compact()
        server.drop_watches()  # the re-watches get a 410: the writes land during the relists
        for name, change in op[1]:
            await asyncio.sleep(0)
            world.write(name, change)
    elif kind == "drop":
        server.drop_watches(abrupt=op[1])
    elif kind == "compact":
        server.compact()
    elif kind == "fail":
        server.fail_next(op[1], op[2], retry_after=0 if op[2] == 429 else None)
    elif kind == "restart":
        await server.restart()
    elif kind == "partition":
        _target(world, op[1]).proxy.black_hole()
    elif kind == "heal":
        for replica in world.replicas:
            replica.proxy.restore()
    elif kind == "cut":
        _target(world, op[1]).proxy.cut()
    elif kind in ("stop", "kill"):
        replica = _target(world, op[1])
        replica.proxy.restore()  # a stop is an orderly one
        if kind == "stop":
            if op[3]:  # a slow reconcile in flight, outliving the graceful timeout
                world.slowest_next = True
                world.write(op[2], "x" if op[2] not in world.existing() else "y")
                await _advance(world.clock, 0.1)
                world.slowest_next = False
            await replica.stop()
        else:
            replica.kill()
        world.retire(replica)
        await world.add_replica()
    elif kind == "advance":
        await _advance(world.clock, op[1])
    await settle(20)  # lets requests and responses cross the loopback
    await world.supervise()


# -- one schedule --------------------------------------------------------------------------------


async def _run_schedule(seed: int, errors: list[logging.LogRecord]) -> None:
    ops = schedule(seed)
    loop_errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: loop_errors.append(ctx))
    clock = FakeClock()
    async with ApiServerEmulator(history_limit=12, bookmark_interval=1.0, clock=clock) as server:
        server.create("namespaces", {"metadata": {"name": NAMESPACE}})
        world = World(seed, server, clock)
        for name in NAMES[:3]:
            world.write(name, "x")
        try:
            for _ in range(2):
                await world.add_replica()
            for op in ops:
                await _apply(world, op)
            await _quiesce(world)
            _check_final(world)
        finally:
            for replica in world.replicas:
                replica.kill()
            for replica in [*world.replicas, *world.retired]:
                waiting = asyncio.ensure_future(replica.finish())
                while not waiting.done():
                    await _advance(clock, 1.0)
                await waiting
            # Plain-function reconciles outlive their controller: let them end too.
            while world.history.active:
                await _advance(clock, 1.0)
    history = world.history
    if STATS:
        _write_stats(seed, ops, world)
    assert history.violations == [], "\n".join(history.violations)
    assert loop_errors == []
    assert [r.getMessage() for r in errors] == []


async def _quiesce(world: World) -> None:
    """The faults stop. Once a replica leads, every object is written while each
    of its reconciles waits a second (so some writes land during the reconcile of
    their own key: exactly one more must follow), and once more; then time passes
    until the last reconcile of every key saw its final state (or CONVERGE runs
    out)."""
    server = world.server
    server.reset_faults()
    for replica in world.replicas:
        replica.proxy.restore()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CONVERGE
    while world.leader() is None and loop.time() < deadline:
        await _advance(world.clock, 0.5)
        await world.supervise()
    world.slow = True
    for round_ in ("1", "2"):
        for name in NAMES:
            with contextlib.suppress(ApiError):  # deleted
                patch = {"metadata": {"labels": {"end": round_}}}
                server.patch("configmaps", name, patch, namespace=NAMESPACE)
        await _advance(world.clock, 0.25)
    world.slow = False
    world.write("last", "x")
    while not _settled(world) and loop.time() < deadline:
        await _advance(world.clock, 0.5)
        await world.supervise()


def _write_stats(seed: int, ops: list[tuple[Any, ...]], world: World) -> None:
    """One line of JSON about what the schedule exercised, appended to STATS."""
    history = world.history
    replicas = [*world.replicas, *world.retired]
    in_flight = peak = 0
    for record in sorted(
        [(r.started, 1) for r in history.reconciles]
        + [(r.ended, -1) for r in history.reconciles if r.ended is not None]
    ):
        in_flight += record[1]
        peak = max(peak, in_flight)
    line = {
        "seed": seed,
        "operations": dict(collections.Counter(op[0] for op in ops)),
        "reconciles": len(history.reconciles),
        "outcomes": dict(collections.Counter(r.outcome for r in history.reconciles)),
        "peak_in_flight": peak,
        "terms": len(history.controllers),
        "leaders": len({r.replica for r in history.reconciles}),
        "replicas": len(replicas),
        "plain": world.plain,
        "violations": len(history.violations),
    }
    assert STATS is not None
    with open(STATS, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def _final_states(world: World, leader: Replica) -> dict[str, int | None]:
    """The final resourceVersion (or None: deleted) of every key existing now, and
    of every key the leader's controller (this term's) had events of: what must
    have been reconciled last. (A key deleted while no controller watched, in a
    leadership gap, is not: no controller hears of it, in controller-runtime
    either; finalizers are for that.)"""
    assert leader.manager is not None
    controllers = leader.manager.controllers
    watched = world.history.watched.get(id(controllers[0]), set()) if controllers else set()
    final: dict[str, int | None] = dict.fromkeys(watched)
    for obj in world.server.objects("configmaps", NAMESPACE):
        final[key_of(obj)] = rv_of(obj)
    return final


def _last_reconciles(world: World) -> dict[str, Reconcile]:
    last: dict[str, Reconcile] = {}
    for record in world.history.reconciles:
        last[record.key] = record
    return last


def _settled(world: World) -> bool:
    leader = world.leader()
    if leader is None or world.history.active:
        return False
    last = _last_reconciles(world)
    for key, rv in _final_states(world, leader).items():
        record = last.get(key)
        if record is None or record.seen != rv or record.ended is None:
            return False
    assert leader.manager is not None
    return all(len(c.queue) == 0 for c in leader.manager.controllers)


def _check_final(world: World) -> None:
    leader = world.leader()
    if leader is None:
        world.history.violation("no replica leads at the end")
        return
    assert leader.manager is not None
    cached = {key_of(o): rv_of(o) for o in leader.manager.lister_for("configmaps").list()}
    server = {key_of(o): rv_of(o) for o in world.server.objects("configmaps", NAMESPACE)}
    if cached != server:
        world.history.violation(f"{leader.identity}'s cache {cached} is not the server's {server}")
    last = _last_reconciles(world)
    for key, rv in _final_states(world, leader).items():
        record = last.get(key)
        if record is None:
            world.history.violation(f"{key} (at {rv}) was never reconciled")
        elif record.seen != rv:
            world.history.violation(
                f"the last reconcile of {key} (#{record.started}, by {record.replica}) saw "
                f"{record.seen}, not its final state {rv}"
            )


# -- the test --------------------------------------------------------------------------------


class _ErrorRecords(logging.Handler):
    """Records at ERROR or above from the library (the emulator's excluded), but the
    reconciler's injected failures, which the controller logs as errors, and the
    elector's failed requests for the Lease (a create, a read or a release failing
    under the injected faults), which client-go logs as errors too. (A create lost
    to the other replica is a race, said at INFO.)"""

    EXPECTED = (
        "injected failure reconciling",
        "injected terminal failure reconciling",
        ": could not create lock ",
        ": could not read lock ",
        ": failed to release lock ",
        "; gave up",
    )

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("kubereflector.testing"):
            return
        if any(text in record.getMessage() for text in self.EXPECTED):
            return
        self.records.append(record)


def _describe(seed: int) -> str:
    kind = "plain function" if is_plain(seed) else "coroutine"
    return f"reconciler: {kind}\noperations:\n" + "\n".join(map(repr, schedule(seed)))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + SCHEDULES))
def test_the_reconcile_loop_keeps_its_promises_whatever_happens(seed: int) -> None:
    handler = _ErrorRecords()
    library = logging.getLogger("kubereflector")
    library.addHandler(handler)
    try:
        asyncio.run(_run_schedule(seed, handler.records))
    except BaseException as err:
        raise AssertionError(
            f"runtime fault schedule seed={seed} failed (rerun: KUBEREFLECTOR_FAULT_SEED={seed} "
            f"KUBEREFLECTOR_FAULT_SCHEDULES=1 pytest {__file__})\n{_describe(seed)}"
        ) from err
    finally:
        library.removeHandler(handler)
