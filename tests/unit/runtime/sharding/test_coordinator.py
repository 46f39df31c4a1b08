"""Replicas coordinating over in-memory Leases on a FakeClock, with faults injected per
replica: joins, graceful stops, crashes, paused renewals, partitions, slow drains.

After every step of the clock (half a second) the safety invariant is checked: no
shard is open on two replicas. Reconciles are simulated through each replica's
gate and recorded; the recorder fails the test the moment a second replica starts
on an object another one is reconciling.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubereflector.runtime import Request, ShardCoordinator, Sharding
from kubereflector.runtime.gate import ReconcileRevokedError
from kubereflector.testing import FakeClock, settle
from sharding_fakes import LeaseServer, Link, ReconcileLog

pytestmark = pytest.mark.asyncio

SHARDS = 12
STEP = 0.5


class KeyRouter:
    """Places test keys in shards by a uid each."""

    def __init__(self, coordinator: ShardCoordinator, keys: Iterable[str]) -> None:
        space = coordinator.space
        self.shards = {
            key: space.shard_of(str(uuid.uuid5(uuid.NAMESPACE_URL, key))) for key in keys
        }

    def shard_of(self, request: Request) -> int | None:
        return self.shards.get(request.name)

    def settled(self, request: Request) -> None:
        pass


KEYS = [f"obj-{n}" for n in range(120)]


@dataclass
class Replica:
    name: str
    link: Link
    coordinator: ShardCoordinator
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    opened: list[frozenset[int]] = field(default_factory=list)
    scopes: list[frozenset[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.gate = self.coordinator.gate.controller_gate(
            KeyRouter(self.coordinator, KEYS)  # type: ignore[arg-type]
        )

    def open(self) -> set[int]:
        return {s for s in range(SHARDS) if self.coordinator.gate.is_open(s)}


class Cluster:
    """Replicas of one sharded controller on one LeaseServer and one FakeClock."""

    def __init__(self, **options: Any) -> None:
        self.clock = FakeClock(1000.0)
        self.server = LeaseServer()
        self.options = {"shards": SHARDS, **options}
        self.replicas: dict[str, Replica] = {}
        self.log = ReconcileLog()

    def add(self, name: str, *, shards: int | None = None) -> Replica:
        link = self.server.link()
        replica: Replica

        def on_open(opened: frozenset[int]) -> None:
            replica.opened.append(opened)

        def set_scope(scope: frozenset[int]) -> None:
            replica.scopes.append(scope)

        options = dict(self.options)
        if shards is not None:
            options["shards"] = shards
        coordinator = ShardCoordinator(
            Sharding(name="ctl", identity=name, **options),
            link,
            namespace="ns",
            clock=self.clock,
            on_open=on_open,
            set_scope=set_scope,
            jitter=lambda: 0.0,
        )
        replica = Replica(name, link, coordinator)
        self.replicas[name] = replica
        return replica

    def start(self, replica: Replica) -> None:
        replica.task = asyncio.create_task(replica.coordinator.run(replica.stopping))

    def check(self) -> None:
        for shard in range(SHARDS):
            holders = [r.name for r in self.replicas.values() if shard in r.open()]
            assert len(holders) <= 1, f"shard {shard} open on {holders} at {self.clock.now()}"

    async def run_for(self, seconds: float) -> None:
        """Advance the clock in steps, checking the invariant after each."""
        await settle()
        self.check()
        steps = round(seconds / STEP)
        for _ in range(steps):
            await self.clock.advance(STEP)
            self.check()

    def owners(self) -> dict[int, str]:
        out = {}
        for replica in self.replicas.values():
            for shard in replica.open():
                out[shard] = replica.name
        return out

    async def kill(self, replica: Replica) -> None:
        """SIGKILL: the task is gone; nothing is released."""
        assert replica.task is not None
        replica.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await replica.task
        # A killed process reconciles nothing: its gate is gone with it.
        for shard in range(SHARDS):
            replica.coordinator.gate.close(shard, cancel=True)
        del self.replicas[replica.name]

    async def reconcile(self, replica: Replica, key: str, done: asyncio.Event) -> str:
        """A coroutine reconcile of ``key`` on ``replica`` lasting until ``done``."""
        ticket = replica.gate.enter(Request("ns", key))
        if ticket is None:
            return "dropped"
        self.log.start(key, replica.name)
        try:
            await ticket.run(done.wait())
            return "done"
        except ReconcileRevokedError:
            return "revoked"
        finally:
            self.log.end(key, replica.name)
            ticket.exit()

    async def stop_all(self) -> None:
        for replica in list(self.replicas.values()):
            if replica.task is not None and not replica.task.done():
                replica.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await replica.task


@contextlib.asynccontextmanager
async def cluster(**options: Any) -> AsyncIterator[Cluster]:
    c = Cluster(**options)
    try:
        yield c
    finally:
        await c.stop_all()
    assert not c.log.overlaps


async def started(c: Cluster, *names: str) -> list[Replica]:
    replicas = [c.add(name) for name in names]
    for replica in replicas:
        c.start(replica)
    return replicas


async def test_replicas_started_together_split_the_shards_evenly() -> None:
    async with cluster() as c:
        a, b, d = await started(c, "a", "b", "d")
        await c.run_for(6)
        owners = c.owners()
        assert sorted(owners) == list(range(SHARDS))
        assert sorted(len(r.open()) for r in (a, b, d)) == [4, 4, 4]
        for replica in (a, b, d):
            status = replica.coordinator.status()
            assert status.valid
            assert status.held == status.desired == frozenset(replica.open())
            assert status.members == {"a", "b", "d"}
            assert replica.coordinator.ready()
            # each opened its shards once, and its caches hold exactly them
            assert set().union(*replica.opened) == replica.open()
            assert replica.scopes[-1] == frozenset(replica.open())
        # nobody took everything at first and gave most of it back
        assert all(len(r.scopes[0]) <= SHARDS for r in (a, b, d))
        assert all(len(set().union(*r.opened)) == 4 for r in (a, b, d))


async def test_a_join_moves_only_the_newcomers_share_after_the_reconciles_end() -> None:
    async with cluster() as c:
        a, b, d = await started(c, "a", "b", "d")
        await c.run_for(6)
        before = c.owners()
        # a long reconcile on every key whose shard is held
        done = asyncio.Event()
        tasks = [
            asyncio.create_task(c.reconcile(r, key, done))
            for key in KEYS
            for r in (a, b, d)
            if r.gate.wanted(Request("ns", key))
        ]
        await settle()
        assert len(c.log.running) == len(KEYS)
        e = c.add("e")
        c.start(e)
        await c.run_for(10)
        # the newcomer's share is drained but held: nobody reconciles it
        assert e.open() == set()
        assert e.coordinator.status().desired  # it knows what it will take
        assert len(e.coordinator.status().desired) == 3
        assert not e.coordinator.ready()
        # its caches already hold what it will take (warm standby)
        assert e.scopes[-1] >= e.coordinator.status().desired
        done.set()
        assert set(await asyncio.gather(*tasks)) == {"done"}
        await c.run_for(3)  # released at once when drained; taken at the next tick
        after = c.owners()
        assert sorted(after) == list(range(SHARDS))
        assert sorted(len(r.open()) for r in (a, b, d, e)) == [3, 3, 3, 3]
        moved = [s for s in range(SHARDS) if before[s] != after[s]]
        assert all(after[s] == "e" for s in moved)
        assert len(moved) == 3
        assert e.coordinator.ready()


async def test_a_graceful_stop_hands_the_shards_over_within_a_retry_period() -> None:
    async with cluster() as c:
        a, _b, _d = await started(c, "a", "b", "d")
        await c.run_for(6)
        held = a.open()
        a.stopping.set()
        await c.run_for(0.5)
        assert a.task is not None
        assert a.task.done()
        assert a.open() == set()
        assert c.server.holder(a.coordinator._member_name) == ""  # released
        await c.run_for(2.5)  # the others' next tick
        owners = c.owners()
        assert sorted(owners) == list(range(SHARDS))
        assert {owners[s] for s in held} <= {"b", "d"}


async def test_a_crashed_replica_is_taken_over_only_after_its_lease_duration() -> None:
    async with cluster() as c:
        a, b, d = await started(c, "a", "b", "d")
        await c.run_for(6)
        held = a.open()
        killed_at = c.clock.now()
        await c.kill(a)
        # its shards are left alone while its member Lease could still be renewed
        await c.run_for(13)
        assert not held & (b.open() | d.open())
        await c.run_for(6)
        owners = c.owners()
        assert sorted(owners) == list(range(SHARDS)), c.clock.now() - killed_at
        assert all(len(r.open()) == 6 for r in (b, d))  # the leaver's shards split between the rest


async def test_a_replica_whose_renewals_stall_stops_before_its_lease_expires() -> None:
    async with cluster() as c:
        a, b, d = await started(c, "a", "b", "d")
        await c.run_for(6)
        held = a.open()
        key = next(k for k in KEYS if a.gate.wanted(Request("ns", k)))
        done = asyncio.Event()
        running = asyncio.create_task(c.reconcile(a, key, done))
        await settle()
        a.link.pause()  # its next calls hang (a renewal that never returns)
        paused_at = c.clock.now()
        valid_until = a.coordinator._valid_until
        assert valid_until - paused_at <= 10.0
        await c.run_for(valid_until - paused_at - STEP)
        assert a.open() == held  # still valid: still reconciling
        await c.run_for(STEP)
        assert a.open() == set()  # stopped at its deadline, not at the others' takeover
        await settle()
        assert running.done()
        assert running.result() == "revoked"
        assert not held & (b.open() | d.open())  # the others wait out its Lease
        await c.run_for(8)
        assert sorted(c.owners()) == list(range(SHARDS))
        # back: its stalled calls go through, it rejoins and gets its share back
        a.link.resume()
        await c.run_for(12)
        assert sorted(len(r.open()) for r in (a, b, d)) == [4, 4, 4]


async def test_a_replica_cut_off_from_the_api_server_stops_and_rejoins() -> None:
    async with cluster() as c:
        a, b, d = await started(c, "a", "b", "d")
        await c.run_for(6)
        held = a.open()
        with a.link.partitioned():
            await c.run_for(10)
            assert a.open() == set()
            assert not a.coordinator.ready()
            await c.run_for(10)
            assert sorted(c.owners()) == list(range(SHARDS))
            assert held <= b.open() | d.open()
        await c.run_for(12)
        assert sorted(len(r.open()) for r in (a, b, d)) == [4, 4, 4]


async def test_a_slow_drain_holds_the_shard_until_it_ends_or_times_out() -> None:
    async with cluster(drain_timeout=20.0) as c:
        (a,) = await started(c, "a")
        await c.run_for(4)
        assert a.open() == set(range(SHARDS))
        done = asyncio.Event()
        runs = {key: asyncio.create_task(c.reconcile(a, key, done)) for key in KEYS}
        await settle()
        b = c.add("b")
        c.start(b)
        await c.run_for(15)
        moving = b.coordinator.status().desired
        assert len(moving) == SHARDS // 2
        assert b.open() == set()  # a's reconciles of them still run: b waits
        assert not any(task.done() for task in runs.values())
        await c.run_for(8)  # past the drain timeout: a cancels them, frees, b takes
        shard_of = a.gate.router.shard_of  # type: ignore[attr-defined]
        for key, task in runs.items():
            if shard_of(Request("ns", key)) in moving:
                assert task.done()
                assert task.result() == "revoked"
            else:
                assert not task.done()  # a keeps its own shards' reconciles
        await c.run_for(3)
        assert b.open() == moving
        assert sorted(len(r.open()) for r in (a, b)) == [6, 6]
        done.set()
        await asyncio.gather(*runs.values())


async def test_replicas_disagreeing_on_the_number_of_shards_take_nothing_new() -> None:
    async with cluster() as c:
        (_a,) = await started(c, "a")
        await c.run_for(4)
        b = c.add("b", shards=SHARDS * 2)
        c.start(b)
        await c.run_for(6)
        assert b.open() == set()
