"""A sharded controller: speed-up, memory per replica, takeover times, rebalance movement.

    .venv/bin/python benchmarks/sharding.py [--objects 30000] [--reconcile-ms 20]
        [--workers 64] [--replicas 1,2,4] [--shards 32] [--skip-takeover] [--skip-decode]

One ``ApiServerEmulator`` in its own process (``_emulator.py``: ``--objects``
Pods of ~5.5 KB in namespace ``bench``); each replica of the sharded operator
is a process of its own (this script with ``--replica``): a ``Manager`` with
``Sharding(shards=--shards)`` and one coroutine reconciler over the Pods that
waits ``--reconcile-ms`` (I/O) and counts what it reconciled, with
``--workers`` workers. A replica prints its state every 0.1 s (shards held,
objects reconciled, objects cached, RSS); the parent reads it.

1. **Speed-up**: for N in ``--replicas``, N replicas started together (a fresh
   sharded controller each time); the time from their start until every shard is
   held, and then until every worker of every replica is in a reconcile (a shard
   just taken has its objects queued at once, yet in some runs the workers took
   up to 0.9 s more to be all busy; printed, not hidden). Their
   reconciles are held until then, so that processes starting one after the
   other on a busy machine, and their rebalancing, do not count; then the time
   from a signal to all of them until the last object has been reconciled (the
   end of its reconcile, as its replica timed it, not when the parent next
   polled), whose ratio against one replica is the speed-up (target on I/O-bound
   work: at least 0.85 x N); how busy the machine's cores were meanwhile (every
   replica and the emulator share them: near 100 %, the speed-up meets the
   machine's floor, not the I/O's); and the replicas' CPU per reconcile (each
   replica's CPU time from its first reconcile's start to its last's end; a
   worker waits for the others' CPU work between two waits, so this sets how far
   below the I/O ideal each replica falls). The Pods each replica caches, and its
   RSS growth from after its imports to after its sync, against one replica's
   (target: at most 1.2 / N of it).
2. **Rebalance**: three replicas hold every shard; a fourth joins; the Pods whose
   shard changed hands, against the ideal quarter (target: at most 1.2 x).
3. **Takeover** (not with ``--skip-takeover``): four replicas; one is stopped with
   SIGTERM, then one with SIGKILL; the time from the signal until the others
   hold every shard (SIGTERM: within a retry period, 2 s; SIGKILL: the lease
   duration, 15 s, plus up to a retry period). And, for comparison, leader
   election's warm standby: the time from the leader's SIGTERM until the standby,
   whose caches synced while it waited, begins to reconcile.
4. **The watch pipeline with a shard filter** (no server, not with
   ``--skip-decode``): a stream of Pod updates through a Reflector into a Cache,
   with no filter and with a client-side shard filter keeping a quarter (what a
   replica of four does against an API server without sharded lists: the other
   shards' objects are dropped as they are decoded), dict and compact mode, each
   in a fresh process: CPU µs per event of the stream.

Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import busy_fraction, machine, machine_cpu, rss_bytes  # noqa: E402

NAMESPACE = "bench"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- a replica -----------------------------------------------------------------------


async def _replica(args: argparse.Namespace) -> None:
    from kubereflector.client import ClientConfig
    from kubereflector.runtime import (
        ControllerOptions,
        LeaderElection,
        LeaderElectionLostError,
        Manager,
        Request,
        Sharding,
    )

    baseline = rss_bytes()
    delay = args.reconcile_ms / 1000
    reconciled: set[str] = set()
    go = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, go.set)
    config = ClientConfig(server=args.server)
    if args.elect:
        election = LeaderElection(args.group, namespace=NAMESPACE, identity=args.name)
        manager = Manager(config, namespace=NAMESPACE, leader_election=election)
    else:
        sharding = Sharding(
            name=args.group, shards=args.shards, identity=args.name, namespace=NAMESPACE
        )
        manager = Manager(config, namespace=NAMESPACE, sharding=sharding)
    first: list[float] = []  # when this replica's first reconcile began
    last = [0.0]  # when its latest reconcile ended
    cpu = [0.0, 0.0]  # its CPU time at its first reconcile's start and its latest's end
    holding = [0]  # reconciles waiting for the parent's signal

    @manager.reconciler("pods", options=ControllerOptions(max_concurrent_reconciles=args.workers))
    async def reconcile(request: Request) -> None:
        if args.hold:  # (the parent starts every replica's work at once: SIGUSR1)
            holding[0] += 1
            await go.wait()
        if not first:
            first.append(time.time())
            cpu[0] = time.process_time()
        await asyncio.sleep(delay)
        reconciled.add(request.key)
        last[0] = time.time()
        cpu[1] = time.process_time()

    async def report() -> None:
        while True:
            coordinator = manager.sharding
            status = coordinator.status() if coordinator is not None else None
            try:
                cached = len(manager.informer_for("pods").indexer)
            except Exception:
                cached = 0
            line = {
                "name": args.name,
                "t": time.time(),
                "held": sorted(status.held) if status else [],
                "desired": sorted(status.desired) if status else [],
                "reconciled": len(reconciled),
                "first": first[0] if first else None,
                "last": last[0],
                "cpu": cpu[1] - cpu[0],
                "holding": holding[0],
                "leading": manager.is_leader(),
                "cached": cached,
                "rss_growth": rss_bytes() - baseline,
            }
            print(json.dumps(line), flush=True)
            await asyncio.sleep(0.1)

    async with manager:
        reporter = asyncio.create_task(report())
        try:
            await manager.run()
        except LeaderElectionLostError:
            pass
        finally:
            reporter.cancel()


# -- the parent ----------------------------------------------------------------------


@dataclass
class Replica:
    """A replica process and its latest report."""

    name: str
    process: asyncio.subprocess.Process
    last: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    reader: asyncio.Task[None] | None = None

    async def read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            with contextlib.suppress(ValueError):
                self.last = json.loads(line)

    def held(self) -> set[int]:
        return set(self.last.get("held", ()))


class Fleet:
    def __init__(
        self, args: argparse.Namespace, server: str, *, hold: bool = False, elect: bool = False
    ) -> None:
        self.args = args
        self.hold = hold
        self.elect = elect
        self.server = server
        self.group = f"bench-{uuid.uuid4().hex[:8]}"
        self.replicas: dict[str, Replica] = {}

    async def add(self, name: str) -> Replica:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--replica",
            "--server",
            self.server,
            "--group",
            self.group,
            "--name",
            name,
            "--shards",
            str(self.args.shards),
            "--workers",
            str(self.args.workers),
            "--reconcile-ms",
            str(self.args.reconcile_ms),
            *(["--hold"] if self.hold else []),
            *(["--elect"] if self.elect else []),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        replica = Replica(name, process)
        replica.reader = asyncio.create_task(replica.read())
        self.replicas[name] = replica
        return replica

    async def until(self, condition: Any, limit: float = 600.0) -> float:
        """Wait (polling the reports, every 50 ms) until ``condition()``; the time."""
        deadline = time.time() + limit
        while not condition():
            if time.time() > deadline:
                raise TimeoutError("the fleet did not get there in time")
            await asyncio.sleep(0.05)
        return time.time()

    def all_held(self, names: list[str] | None = None) -> bool:
        replicas = [self.replicas[n] for n in (names or list(self.replicas))]
        union: set[int] = set()
        total = 0
        for replica in replicas:
            union |= replica.held()
            total += len(replica.held())
        return len(union) == self.args.shards and total == self.args.shards

    def all_holding(self) -> bool:
        """Whether every replica has each of its workers (or each object it caches, if
        fewer) in a reconcile waiting for the signal."""
        return all(
            r.last.get("holding", 0) >= min(self.args.workers, r.last.get("cached", 0) or 1)
            for r in self.replicas.values()
        )

    def reconciled(self) -> int:
        return sum(r.last.get("reconciled", 0) for r in self.replicas.values())

    def go(self) -> float:
        """Start every replica's reconciles (they hold them until told)."""
        for replica in self.replicas.values():
            replica.process.send_signal(signal.SIGUSR1)
        return time.time()

    async def stop(self, name: str, sig: int = signal.SIGTERM) -> float:
        replica = self.replicas.pop(name)
        replica.process.send_signal(sig)
        sent = time.time()
        await replica.process.wait()
        if replica.reader is not None:
            await replica.reader
        return sent

    async def close(self) -> None:
        for name in list(self.replicas):
            with contextlib.suppress(ProcessLookupError):
                await self.stop(name, signal.SIGKILL)


def _shard_of_pods(server: str, shards: int) -> list[int]:
    """The virtual shard of every Pod (from their uids, listed once)."""
    from kubereflector.client import Client, ClientConfig
    from kubereflector.runtime import ShardSpace

    space = ShardSpace(shards)

    async def go() -> list[int]:
        async with Client(ClientConfig(server=server)) as client:
            items = await client.resource("pods", namespace=NAMESPACE).list()
            return [space.shard_of(pod["metadata"]["uid"]) for pod in items.items]

    return asyncio.run(go())


async def _scaling(args: argparse.Namespace, server: str) -> list[dict[str, Any]]:
    rows = []
    for n in args.replica_counts:
        fleet = Fleet(args, server, hold=True)
        try:
            start = time.time()
            for i in range(n):
                await fleet.add(f"r{i}")
            held = await fleet.until(fleet.all_held)
            busy_workers = await fleet.until(fleet.all_holding)
            cpu_before = machine_cpu()
            went = fleet.go()
            await fleet.until(lambda f=fleet: f.reconciled() >= args.objects)
            busy = busy_fraction(cpu_before, machine_cpu())
            done = max(r.last["last"] for r in fleet.replicas.values())  # (not the polling's)
            reports = [r.last for r in fleet.replicas.values()]
            rows.append(
                {
                    "replicas": n,
                    "held": held - start,
                    "to_work": busy_workers - held,
                    "seconds": done - went,
                    "busy": busy,
                    "cached": [r["cached"] for r in reports],
                    "cpu_per_reconcile": sum(r["cpu"] for r in reports) / args.objects,
                    "rss_growth": [r["rss_growth"] for r in reports],
                }
            )
        finally:
            await fleet.close()
    return rows


async def _rebalance(args: argparse.Namespace, server: str) -> dict[str, Any]:
    shard_of_pod = await asyncio.to_thread(_shard_of_pods, server, args.shards)
    fleet = Fleet(args, server)
    try:
        for i in range(3):
            await fleet.add(f"r{i}")
        await fleet.until(fleet.all_held)
        before = {s: r.name for r in fleet.replicas.values() for s in r.held()}
        await fleet.add("r3")
        await fleet.until(lambda: fleet.all_held() and bool(fleet.replicas["r3"].held()))
        after = {s: r.name for r in fleet.replicas.values() for s in r.held()}
        moved_shards = {s for s in after if before.get(s) != after[s]}
        moved = sum(1 for s in shard_of_pod if s in moved_shards)
        return {
            "moved": moved,
            "ideal": len(shard_of_pod) / 4,
            "shards": len(moved_shards),
        }
    finally:
        await fleet.close()


async def _standby(args: argparse.Namespace, server: str) -> float:
    """Leader election, for comparison: the time from the leader's SIGTERM until the
    standby (its caches synced while it waited) begins to reconcile."""
    fleet = Fleet(args, server, elect=True)
    try:
        leader = await fleet.add("leader")
        await fleet.until(lambda: leader.last.get("reconciled", 0) >= args.objects)
        standby = await fleet.add("standby")
        await fleet.until(lambda: standby.last.get("cached", 0) >= args.objects)
        sent = await fleet.stop("leader", signal.SIGTERM)
        began = await fleet.until(lambda: standby.last.get("first") is not None)
        return began - sent
    finally:
        await fleet.close()


async def _takeover(args: argparse.Namespace, server: str) -> dict[str, float]:
    fleet = Fleet(args, server)
    try:
        for i in range(4):
            await fleet.add(f"r{i}")
        await fleet.until(fleet.all_held)
        sent = await fleet.stop("r0", signal.SIGTERM)
        sigterm = await fleet.until(fleet.all_held) - sent
        sent = await fleet.stop("r1", signal.SIGKILL)
        sigkill = await fleet.until(fleet.all_held) - sent
        return {"sigterm": sigterm, "sigkill": sigkill}
    finally:
        await fleet.close()


class _Stream:
    """A ListerWatcher: an empty list at RV 1, then a watch serving ``chunks`` (and then
    nothing, without ending); ``filtered(keep)`` drops what ``keep`` refuses as it
    decodes, as ResourceListWatch does."""

    def __init__(self, chunks: list[bytes], mode: str, keep: Any = None) -> None:
        self.chunks = chunks
        self.mode = mode
        self.keep = keep

    def filtered(self, keep: Any) -> _Stream:
        return _Stream(self.chunks, self.mode, keep)

    async def list(self, options: Any) -> Any:
        from kubereflector import ListResult

        return ListResult([], "1")

    def watch(self, options: Any) -> Any:
        from kubereflector.client._lines import decode_watch_stream

        feed = iter(self.chunks)
        stream = self

        async def read() -> bytes:
            chunk = next(feed, None)
            if chunk is None:
                await asyncio.Event().wait()
            await asyncio.sleep(0)  # a socket read's loop turn
            return chunk or b""

        class _Watch:
            async def __aenter__(self) -> Any:
                return decode_watch_stream(read, "bench", object_mode=stream.mode, keep=stream.keep)

            async def __aexit__(self, *exc: object) -> None:
                return None

        return _Watch()


def _pipeline_case(mode: str, sharded: bool, events: int) -> float:
    """CPU µs per event of the stream through a Reflector into a Cache."""
    import msgspec
    from _pods import make_pod

    from kubereflector import (
        Cache,
        Reflector,
        ReflectorOptions,
        ShardedListWatch,
        ShardFilter,
        ShardSelector,
    )

    encode = msgspec.json.encode
    data = b"".join(
        encode({"type": "MODIFIED", "object": make_pod(i % 1000, rv=i + 2)}) + b"\n"
        for i in range(events)
    )
    end = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(events + 2)}}
    data += encode({"type": "BOOKMARK", "object": end}) + b"\n"
    chunks = [data[i : i + 64 * 1024] for i in range(0, len(data), 64 * 1024)]
    lw: Any = _Stream(chunks, mode)
    if sharded:  # a quarter kept, by the client (the server filtered nothing)
        lw = ShardedListWatch(lw, ShardFilter.of(ShardSelector.even(0, 4)))

    async def run() -> None:
        options = ReflectorOptions(use_watch_list=False, idle_timeout=None)
        reflector = Reflector(lw, Cache(), options=options)
        task = asyncio.create_task(reflector.run())
        while reflector.last_sync_resource_version != str(events + 2):  # noqa: ASYNC110
            await asyncio.sleep(0.001)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    start = time.process_time()
    asyncio.run(run())
    return (time.process_time() - start) / events * 1e6


def _pipeline_table(events: int) -> list[tuple[str, str, float]]:
    """The watch pipeline with and without a client-side shard filter (each case in a
    fresh process, three runs, the best kept)."""
    rows = []
    for mode in ("dict", "compact"):
        for sharded in (False, True):
            best = min(
                json.loads(
                    _run_self("--pipeline-case", f"{mode}:{int(sharded)}", "--objects", str(events))
                )
                for _ in range(3)
            )
            label = "a quarter kept (client-side)" if sharded else "no filter"
            rows.append((mode, label, best))
    return rows


def _run_self(*args: str) -> str:
    import subprocess

    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    return out.stdout.strip().splitlines()[-1]


def _percent(fraction: float | None) -> str:
    return "n/a" if fraction is None else f"{fraction:.0%}"


def _print(args: argparse.Namespace, results: dict[str, Any]) -> None:
    print(f"\nmachine: {machine()}")
    print(
        f"{args.objects} Pods, a reconcile waiting {args.reconcile_ms} ms, "
        f"{args.workers} workers per replica, {args.shards} virtual shards\n"
    )
    rows = results["scaling"]
    if rows:
        one = next((r for r in rows if r["replicas"] == 1), rows[0])
        base_rss = max(one["rss_growth"]) or 1
        print(
            "| replicas | start to every shard held | then to every worker busy "
            "| every object reconciled | speed-up "
            "| cores busy | replicas' CPU per reconcile | Pods cached | RSS growth per replica |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
        for r in rows:
            speedup = one["seconds"] / r["seconds"] * one["replicas"]
            cached = ", ".join(str(c) for c in r["cached"])
            growth = ", ".join(f"{g / 2**20:.0f} MiB ({g / base_rss:.2f})" for g in r["rss_growth"])
            print(
                f"| {r['replicas']} | {r['held']:.1f} s | {r['to_work']:.2f} s "
                f"| {r['seconds']:.1f} s "
                f"| {speedup:.2f} x (target {0.85 * r['replicas']:.2f}) "
                f"| {_percent(r['busy'])} | {r['cpu_per_reconcile'] * 1e6:.0f} µs "
                f"| {cached} | {growth} (target {1.2 / r['replicas']:.2f}) |"
            )
    if "rebalance" in results:
        r = results["rebalance"]
        print(
            f"\na fourth replica joins: {r['moved']} Pods moved ({r['shards']} shards), "
            f"{r['moved'] / r['ideal']:.2f} x the ideal quarter ({r['ideal']:.0f}; target 1.2 x)"
        )
    if "takeover" in results:
        t = results["takeover"]
        print(
            f"takeover: after SIGTERM {t['sigterm']:.1f} s, after SIGKILL {t['sigkill']:.1f} s "
            "(lease 15 s, renew deadline 10 s, retry period 2 s); with leader election, a "
            f"warm standby reconciles {t['standby']:.1f} s after the leader's SIGTERM"
        )
    if "decode" in results:
        print("\n| watch stream into a cache | shard filter | CPU µs per event |")
        print("| --- | --- | ---: |")
        for mode, label, us in results["decode"]:
            print(f"| {mode} | {label} | {us:.2f} |")


async def _parent(args: argparse.Namespace) -> None:
    port, control = _free_port(), _free_port()
    emulator = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "_emulator.py"),
        *("--port", str(port), "--control-port", str(control), "--pods", str(args.objects)),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert emulator.stdout is not None
        if (await emulator.stdout.readline()).strip() != b"ready":
            raise RuntimeError("the emulator did not start")
        server = f"http://127.0.0.1:{port}"
        results: dict[str, Any] = {"scaling": await _scaling(args, server)}
        results["rebalance"] = await _rebalance(args, server)
        if not args.skip_takeover:
            results["takeover"] = await _takeover(args, server)
            results["takeover"]["standby"] = await _standby(args, server)
        if not args.skip_decode:
            events = min(args.objects, 20_000)
            results["decode"] = await asyncio.to_thread(_pipeline_table, events)
        _print(args, results)
    finally:
        emulator.send_signal(signal.SIGTERM)
        await asyncio.wait_for(emulator.wait(), 60)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=30_000)
    parser.add_argument("--reconcile-ms", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--replicas", default="1,2,4", help="replica counts to measure")
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--skip-takeover", action="store_true")
    parser.add_argument("--skip-decode", action="store_true")
    parser.add_argument("--replica", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pipeline-case", help=argparse.SUPPRESS)
    parser.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--elect", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pipeline_case:
        mode, sharded = args.pipeline_case.split(":")
        print(json.dumps(_pipeline_case(mode, sharded == "1", args.objects)))
        return
    if args.replica:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_replica(args))
        return
    args.replica_counts = [int(n) for n in args.replicas.split(",")]
    os.environ.setdefault("PYTHONHASHSEED", "0")
    asyncio.run(_parent(args))


if __name__ == "__main__":
    main()
