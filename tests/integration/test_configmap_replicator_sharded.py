"""examples/configmap_replicator.py sharded (``--shards``), as processes with real signals
and clocks, against the target (the emulator, or a real cluster): two replicas split
the shards and both reconcile, their metrics and probes say which shards each holds,
and a SIGTERM hands the stopped replica's shards to the other at once."""

from __future__ import annotations

import asyncio
import signal
import uuid

import pytest
from conftest import Target
from test_configmap_replicator import (
    EXAMPLE,
    REPLICAS,
    Replica,
    copies_match,
    kubeconfig,
    reconciles,
    watching,
)

pytestmark = pytest.mark.asyncio

SHARDS = 8


class ShardedReplica(Replica):
    """The example as a process, with ``--shards``."""

    def __init__(self, name: str, target: Target, group: str) -> None:
        super().__init__(name, target)
        self.args = [
            str(EXAMPLE),
            *("--kubeconfig", kubeconfig(target), "--namespace", target.namespace),
            *("--shards", str(SHARDS), "--lease-name", group),
            *("--lease-namespace", target.namespace),
            *("--metrics-port", str(self.metrics_port), "--health-port", str(self.health_port)),
        ]

    async def held(self, group: str) -> float:
        return (await self.metrics())[f"kubereflector_sharding_shards_held[('name', '{group}')]"]

    def holding(self) -> int:
        """Shards held, as its log says (a line when it takes one, one when it stops)."""
        taken = sum("holds shard" in line for line in self.lines)
        return taken - sum("stops reconciling shard" in line for line in self.lines)

    async def until_holding(self, count: int) -> None:
        """Wait (on its log lines as they come) until it holds ``count`` shards."""

        async def wait() -> None:
            while self.holding() != count:
                assert self._reader is not None
                if self._reader.done():
                    raise AssertionError(f"{self.name} exited:\n" + "\n".join(self.lines))
                self._new_line.clear()
                await self._new_line.wait()

        await asyncio.wait_for(wait(), 60)


def shard_held(metrics: dict[str, float], group: str, shard: int) -> float:
    return metrics[f"kubereflector_sharding_shard_held[('name', '{group}'), ('shard', '{shard}')]"]


@pytest.mark.timeout(180)
async def test_two_sharded_replicas_split_the_work_and_hand_over(target: Target) -> None:
    group = f"replicator-{uuid.uuid4().hex[:6]}"
    a, b = (ShardedReplica(f"replica-{n}", target, group) for n in "ab")
    async with watching(target) as (cms, _):
        try:
            await a.start()
            await b.start()
            await a.logged("/healthz")
            await b.logged("/healthz")

            await a.until_holding(SHARDS // 2)
            await b.until_holding(SHARDS // 2)
            assert await a.get("/readyz", a.health_port) == (200, "ok")
            assert await b.get("/readyz", b.health_port) == (200, "ok")
            assert {await a.held(group), await b.held(group)} == {SHARDS / 2}
            parents = [f"app-{n}" for n in range(12)]
            for parent in parents:
                await cms.create(parent, {"n": parent}, {REPLICAS: "2"})
            await cms.until(
                lambda: all(copies_match(cms, p, 2) for p in parents), "2 copies of each"
            )
            metrics_a, metrics_b = await a.metrics(), await b.metrics()
            assert reconciles(metrics_a) > 0
            assert reconciles(metrics_b) > 0  # both do work: twelve parents, two halves
            per_shard = [
                shard_held(metrics_a, group, s) + shard_held(metrics_b, group, s)
                for s in range(SHARDS)
            ]
            assert per_shard == [1.0] * SHARDS  # every shard held, by one replica

            # SIGTERM: a hands its shards over and exits 0; b takes them within its
            # retry period (2 s), not after a lease duration (15 s).
            assert a.proc is not None
            loop = asyncio.get_running_loop()
            a.proc.send_signal(signal.SIGTERM)
            stopped = loop.time()
            assert await a.wait() == 0

            await b.until_holding(SHARDS)
            assert loop.time() - stopped < 10
            assert await b.held(group) == SHARDS
            assert await b.get("/readyz", b.health_port) == (200, "ok")
            for parent in parents:  # every parent is b's now: it restores their copies
                uid = cms.uid(f"{parent}-0")
                await cms.delete(f"{parent}-0")
                await cms.until(
                    lambda p=parent, u=uid: copies_match(cms, p, 2) and cms.uid(f"{p}-0") != u,
                    f"b restored {parent}-0",
                )
        finally:
            for replica in (a, b):
                await replica.kill()
