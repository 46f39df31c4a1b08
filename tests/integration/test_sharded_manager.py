"""Sharded Managers against the target (the emulator, or a real kube-apiserver): three
replicas over 3,000 ConfigMaps; replicas joining, stopping (SIGTERM) and crashing
(SIGKILL) while the objects change.

A harness records every reconcile's start and end per object and replica, and
fails the moment a second replica starts on an object another one is
reconciling; at the end every object's last change must have been reconciled.
The coordinators run on a FakeClock moved on in small steps (the HTTP exchanges
are real): no test waits for a lease duration of wall time.

On the emulator the caches are filtered by the API server (KEP-5866); on a real
kube-apiserver v1.28 by the client, with the same hash: the same assertions hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import Callable

import pytest
from conftest import KUBECONFIG_ENV, Target

from kubereflector.client import ClientConfig, load_config
from kubereflector.runtime import Manager, Request, Result, Sharding
from kubereflector.testing import FakeClock
from sharding_fakes import ReconcileLog

pytestmark = pytest.mark.asyncio

SHARDS = 16
OBJECTS = 3_000


def config_of(target: Target) -> ClientConfig:
    if target.emulator is not None:
        return load_config(target.emulator.kubeconfig_path)
    return load_config(os.environ[KUBECONFIG_ENV])


PACE = 0.0 if not os.environ.get(KUBECONFIG_ENV) else 0.01
"""Wall seconds per tenth of a fake second: a real kube-apiserver v1.28 ends a
watch-list's initial events with a bookmark about 5 s (of wall time) after them,
and the fake clock must not run out while it comes."""


async def eventually(condition: Callable[[], bool], clock: FakeClock, limit: float = 600) -> None:
    """Move ``clock`` on in tenths of a second until ``condition()`` holds, letting
    the loop run in between (real HTTP exchanges complete meanwhile)."""
    moved = 0.0
    while not condition():
        if moved > limit:
            raise AssertionError(f"not true after {limit}s of the fake clock")
        await clock.advance(0.1)
        moved += 0.1
        for _ in range(10):
            await asyncio.sleep(0)
        if PACE:
            await asyncio.sleep(PACE)


class Fleet:
    """Replicas of one sharded operator reconciling the test namespace's ConfigMaps."""

    def __init__(self, target: Target, *, shards: int = SHARDS) -> None:
        self.target = target
        self.clock = FakeClock()
        self.shards = shards
        self.log = ReconcileLog()
        self.seen: dict[str, int] = {}  # key -> the highest resourceVersion reconciled
        self.by: dict[str, set[str]] = {}  # key -> the replicas that reconciled it
        self.last_by: dict[str, str] = {}  # key -> the replica that reconciled ``seen``
        self.managers: dict[str, Manager] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.group = f"t{random.getrandbits(32):08x}"

    def add(self, name: str) -> Manager:
        manager = Manager(
            config_of(self.target),
            namespace=self.target.namespace,
            clock=self.clock,
            sharding=Sharding(name=self.group, shards=self.shards, identity=name),
        )
        lister = manager.lister_for  # (resolved when the manager runs)

        async def reconcile(request: Request) -> Result | None:
            self.log.start(request.key, name)
            try:
                obj = lister("configmaps").get(request.key)
                await asyncio.sleep(0)  # a reconcile takes turns of the loop
                if obj is not None:
                    rv = int(obj["metadata"]["resourceVersion"])
                    if rv >= self.seen.get(request.key, 0):
                        self.seen[request.key] = rv
                        self.last_by[request.key] = name
                    self.by.setdefault(request.key, set()).add(name)
                await asyncio.sleep(0)
            finally:
                self.log.end(request.key, name)
            return None

        manager.reconciler("configmaps", reconcile=reconcile)
        self.managers[name] = manager
        return manager

    def start(self, name: str) -> None:
        self.tasks[name] = asyncio.create_task(self.managers[name].run(handle_signals=False))

    async def stop(self, name: str) -> None:
        """SIGTERM: a graceful stop."""
        self.managers[name].stop()
        while not self.tasks[name].done():
            await self.clock.advance(0.1)
            await asyncio.sleep(0)
        await self.tasks.pop(name)
        del self.managers[name]

    async def kill(self, name: str) -> None:
        """SIGKILL: the process is gone; its Leases are left as they were."""
        task = self.tasks.pop(name)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        del self.managers[name]

    async def close(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        for task in self.tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def held(self) -> dict[str, set[int]]:
        out = {}
        for name, manager in self.managers.items():
            coordinator = manager.sharding
            assert coordinator is not None
            out[name] = set(coordinator.status().held)
        return out

    def all_held(self) -> bool:
        held = self.held()
        union: set[int] = set()
        for shards in held.values():
            if union & shards:
                raise AssertionError(f"a shard held twice: {held}")
            union |= shards
        return len(union) == self.shards

    def balanced(self) -> bool:
        counts = [len(s) for s in self.held().values()]
        return self.all_held() and max(counts) - min(counts) <= 1

    def converged(self, expected: dict[str, int]) -> bool:
        return all(self.seen.get(key, 0) >= rv for key, rv in expected.items())

    def holder_of(self, key: str) -> str:
        """The replica holding the shard of ``key``'s object now."""
        for name, manager in self.managers.items():
            coordinator = manager.sharding
            assert coordinator is not None
            obj = manager.lister_for("configmaps").get(key)
            if obj is not None:
                shard = coordinator.space.shard_of(obj["metadata"]["uid"])
                if shard in coordinator.status().held:
                    return name
        raise AssertionError(f"no replica holds {key}")


async def make_configmaps(target: Target, count: int) -> dict[str, int]:
    """``count`` ConfigMaps; key -> resourceVersion."""
    out: dict[str, int] = {}
    api = target.client.resource("configmaps", namespace=target.namespace)
    for n in range(count):
        body = {"metadata": {"name": f"cm-{n:04d}"}, "data": {"v": "0"}}
        if target.emulator is not None:
            obj = target.emulator.create("configmaps", body, namespace=target.namespace)
        else:
            obj = await api.create(body)
        out[f"{target.namespace}/{obj['metadata']['name']}"] = int(
            obj["metadata"]["resourceVersion"]
        )
    return out


async def change(target: Target, expected: dict[str, int], rng: random.Random, count: int) -> None:
    """Update ``count`` random ConfigMaps (recording their new resourceVersions)."""
    api = target.client.resource("configmaps", namespace=target.namespace)
    for key in rng.sample(sorted(expected), count):
        name = key.split("/")[1]
        patch = {"data": {"v": str(rng.getrandbits(32))}}
        if target.emulator is not None:
            obj = target.emulator.patch("configmaps", name, patch, namespace=target.namespace)
        else:
            obj = await api.patch(name, patch)
        expected[key] = int(obj["metadata"]["resourceVersion"])


async def churn(
    target: Target, expected: dict[str, int], rng: random.Random, clock: FakeClock
) -> None:
    """Changes until cancelled: five every tenth of a second of ``clock``."""
    while True:
        await change(target, expected, rng, 5)
        await clock.sleep(0.1)


@pytest.mark.timeout(300)
async def test_three_replicas_split_3000_objects_and_never_overlap(target: Target) -> None:
    expected = await make_configmaps(target, OBJECTS)
    fleet = Fleet(target)
    try:
        for name in ("a", "b", "c"):
            fleet.add(name)
            fleet.start(name)
        await eventually(fleet.all_held, fleet.clock)
        await eventually(lambda: fleet.converged(expected), fleet.clock)
        # each replica reconciled its third, and its cache holds only its third
        for name, manager in fleet.managers.items():
            cached = len(manager.lister_for("configmaps").list())
            assert 0.2 * OBJECTS < cached < 0.47 * OBJECTS, (name, cached)
            coordinator = manager.sharding
            assert coordinator is not None
            space = coordinator.space
            held = coordinator.status().held
            for obj in manager.lister_for("configmaps").list():
                assert space.shard_of(obj["metadata"]["uid"]) in held
        total = sum(len(m.lister_for("configmaps").list()) for m in fleet.managers.values())
        assert total == OBJECTS  # nothing cached twice, nothing missing
        assert all(len(replicas) == 1 for replicas in fleet.by.values())
        await change(target, expected, random.Random(1), 300)
        await eventually(lambda: fleet.converged(expected), fleet.clock)
        assert not fleet.log.overlaps
    finally:
        await fleet.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("event", ["join", "sigterm", "sigkill"])
async def test_replicas_joining_and_leaving_during_churn_never_overlap(
    target: Target, event: str
) -> None:
    expected = await make_configmaps(target, 600)
    rng = random.Random(event)
    fleet = Fleet(target)
    names = ["a", "b"] if event == "join" else ["a", "b", "c"]
    try:
        for name in names:
            fleet.add(name)
            fleet.start(name)
        await eventually(fleet.balanced, fleet.clock)
        await eventually(lambda: fleet.converged(expected), fleet.clock)
        changing = asyncio.create_task(churn(target, expected, rng, fleet.clock))
        try:
            await eventually(lambda: fleet.converged(expected), fleet.clock, limit=2)
            if event == "join":
                fleet.add("c")
                fleet.start("c")
            elif event == "sigterm":
                await fleet.stop("a")
            else:
                killed_at = fleet.clock.now()
                await fleet.kill("a")
            await eventually(fleet.balanced, fleet.clock)
            if event == "sigkill":
                # its shards waited out its member Lease: 15 s from its last renewal,
                # which came at most a retry period (2 s) before the kill
                assert fleet.clock.now() - killed_at >= 13.0
            for _ in range(10):
                await fleet.clock.advance(0.5)
                await asyncio.sleep(0)
        finally:
            changing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await changing
        await eventually(lambda: fleet.converged(expected), fleet.clock)
        # after the move, every change is reconciled by the holder of its object's shard
        changed = dict(expected)
        await change(target, expected, rng, 200)
        changed = {key: rv for key, rv in expected.items() if changed[key] != rv}
        await eventually(lambda: fleet.converged(expected), fleet.clock)
        for key in changed:
            assert fleet.last_by[key] == fleet.holder_of(key), key
        assert not fleet.log.overlaps
    finally:
        await fleet.close()
