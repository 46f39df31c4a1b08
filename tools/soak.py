"""Soak: examples/configmap_replicator.py, two replicas with leader election, under
steady churn for a given time; does anything grow?

    python tools/soak.py [--minutes 30] [--sample-every 60] [--warm-up MINUTES]
                         [--replicas 2] [--parents 20] [--rate 2.0]
                         [--kubeconfig PATH] [--json REPORT.json]
                         [--trace-allocations]

Each replica (tools/_soak_replica.py: the example's own Manager) samples itself
every ``--sample-every`` seconds: resident memory, asyncio tasks, threads, open
file descriptors, the objects the garbage collector tracks, and its informers'
object counts. Meanwhile ``--rate`` writes a second churn ``--parents`` parent
ConfigMaps: created with 0 to 3 copies, their data edited, their number of
copies changed, deleted (the operator's finalizer deletes the copies), and
copies edited or deleted behind the operator's back (it restores them).

At the end, after the warm-up (default: a sixth of the run, at least one
sample), nothing may grow: each replica's resident memory at the end (the
median of its last three samples) within 5 % of the start (the median of its
first three), and its tasks, threads, descriptors and informer objects (the
median of the last third of the samples) no higher than their highest in the
first third. It prints every sample and the verdict; the exit status is 0 when
nothing grew, 1 otherwise. ``--trace-allocations`` has each replica trace its
allocations from the end of the warm-up (slower) and prints, at the end, the
source lines whose memory grew most: where a growth comes from.

The API server is an emulator started here, on 127.0.0.1, unless
``--kubeconfig`` names a server on the loopback interface (a real
kube-apiserver started by its control scripts, say; the soak works in a
namespace of its own, ``kr-soak-...``). Nothing leaves the machine; the run is
bounded (at most a day).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from _replicator import Churn

from kubereflector.client import Client, load_config
from kubereflector.testing import ApiServerEmulator

REPLICA = Path(__file__).resolve().parent / "_soak_replica.py"
MAX_MINUTES = 24 * 60
RSS_TOLERANCE = 0.05


# -- the replicas ----------------------------------------------------------------------------


@dataclass
class Replica:
    name: str
    proc: asyncio.subprocess.Process
    log: Path
    samples: list[dict[str, Any]] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    async def read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            with contextlib.suppress(ValueError):
                self.samples.append(json.loads(line))


def _log_file(path: Path) -> BinaryIO:
    return path.open("wb")


async def start_replica(
    name: str,
    kubeconfig: str,
    namespace: str,
    every: float,
    logs: Path,
    trace_after: float | None,
) -> Replica:
    log = logs / f"{name}.log"
    args = [
        *("--kubeconfig", kubeconfig, "--namespace", namespace),
        *("--leader-elect", "--lease-name", "soak", "--lease-namespace", namespace),
        *("--metrics-port", "0", "--health-port", "0"),
    ]
    with _log_file(log) as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(REPLICA),
            "--sample-every",
            str(every),
            *(("--trace-allocations", str(trace_after)) if trace_after is not None else ()),
            "--",
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, "POD_NAME": name},
        )
    replica = Replica(name, proc, log)
    replica.reader = asyncio.create_task(replica.read())
    return replica


# -- the verdict --------------------------------------------------------------------------------


def _informer_objects(sample: dict[str, Any]) -> int:
    return sum(i["objects"] for i in sample["informers"].values())


FLAT = {
    "tasks": lambda s: s["tasks"],
    "threads": lambda s: s["threads"],
    "fds": lambda s: s["fds"],
    "informer objects": _informer_objects,
}


def verdict(name: str, samples: list[dict[str, Any]], warm_up: float) -> list[str]:
    """What grew in ``samples`` after ``warm_up`` seconds (empty: nothing).

    Memory: the median of the last three samples within 5 % of the median of the
    first three. Counts (tasks, threads, descriptors, informer objects), which
    move with the churn and the requests in flight: the median of the last third
    of the samples no higher than the highest of the first third (a leak climbs
    past any early peak; a request in flight at a sampling does not).
    """
    steady = [s for s in samples if s["seconds"] >= warm_up]
    if len(steady) < 6:
        return [f"{name}: only {len(steady)} samples after the warm-up (6 needed)"]
    grew = []
    first = statistics.median(s["rss_kib"] for s in steady[:3])
    last = statistics.median(s["rss_kib"] for s in steady[-3:])
    if last > first * (1 + RSS_TOLERANCE):
        grew.append(
            f"{name}: resident memory grew from {first / 1024:.1f} to {last / 1024:.1f} MiB"
        )
    third = max(1, len(steady) // 3)
    for label, value in FLAT.items():
        early = max(value(s) for s in steady[:third])
        late = statistics.median(value(s) for s in steady[-third:])
        if late > early:
            grew.append(f"{name}: {label} grew (at most {early} early, {late:g} late)")
    return grew


def allocator_growth(name: str, samples: list[dict[str, Any]], warm_up: float) -> str | None:
    """How the allocators moved after ``warm_up`` seconds (the median of the last three
    samples against the first three), for the report: the blocks Python's allocator
    handed out (objects kept alive show there long before in the resident memory)
    and, on glibc, the memory C's allocator handed out and the free memory it keeps
    (resident memory that grows with only the latter is fragmentation). ``None``
    with fewer than six samples after the warm-up."""
    steady = [s for s in samples if s["seconds"] >= warm_up and "allocated_blocks" in s]
    if len(steady) < 6:
        return None

    def moved(field: str) -> float:
        first = statistics.median(float(s[field]) for s in steady[:3])
        return statistics.median(float(s[field]) for s in steady[-3:]) - first

    minutes = (steady[-2]["seconds"] - steady[1]["seconds"]) / 60
    line = f"{name}: allocated blocks {moved('allocated_blocks'):+,.0f}"
    if all("malloc_used_kib" in s for s in steady):
        line += (
            f", malloc in use {moved('malloc_used_kib'):+,.0f} KiB, "
            f"malloc free {moved('malloc_free_kib'):+,.0f} KiB"
        )
    return f"{line} over {minutes:.0f} min after the warm-up"


def table(replicas: list[Replica]) -> str:
    lines = []
    for replica in replicas:
        lines.append(f"\n{replica.name}")
        lines.append(
            f"{'minute':>7} {'RSS MiB':>8} {'tasks':>6} {'threads':>7} {'fds':>5} "
            f"{'objects':>8} {'gc objects':>10} {'blocks':>8} {'relists':>7}  leader"
        )
        for s in replica.samples:
            relists = sum(i["relists"] for i in s["informers"].values())
            lines.append(
                f"{s['seconds'] / 60:7.1f} {s['rss_kib'] / 1024:8.1f} {s['tasks']:6d} "
                f"{s['threads']:7d} {s['fds']:5d} {_informer_objects(s):8d} "
                f"{s['gc_objects']:10d} {s.get('allocated_blocks', 0):8d} {relists:7d}"
                f"  {'yes' if s['leader'] else ''}"
            )
    return "\n".join(lines)


# -- the run ------------------------------------------------------------------------------------


def loopback(server: str) -> bool:
    host = urlsplit(server).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    """Run the soak; the report (its ``problems`` empty when nothing grew)."""
    async with contextlib.AsyncExitStack() as stack:
        if args.kubeconfig:
            kubeconfig = args.kubeconfig
            namespace = f"kr-soak-{uuid.uuid4().hex[:6]}"
        else:
            emulator = await stack.enter_async_context(ApiServerEmulator())
            kubeconfig = emulator.kubeconfig_path
            namespace = "soak"
        config = load_config(kubeconfig)
        if not loopback(config.server):
            raise SystemExit(f"soak: {config.server} is not on the loopback interface")
        client = await stack.enter_async_context(Client(config))
        await client.resource("namespaces").create({"metadata": {"name": namespace}})
        logs = Path(tempfile.mkdtemp(prefix="kr-soak-"))
        print(
            f"soak: {args.minutes:g} min against {config.server}, namespace {namespace}, "
            f"logs in {logs}",
            flush=True,
        )
        warm_up = args.warm_up * 60 if args.warm_up is not None else args.minutes * 10
        trace_after = warm_up if args.trace_allocations else None
        replicas = [
            await start_replica(
                f"soak-{i}", kubeconfig, namespace, args.sample_every, logs, trace_after
            )
            for i in range(args.replicas)
        ]
        churn = Churn(client, namespace, args.parents, args.rate)
        churning = asyncio.create_task(churn.run())
        try:
            deadline = time.monotonic() + args.minutes * 60
            while time.monotonic() < deadline:
                await asyncio.sleep(min(10.0, max(0.0, deadline - time.monotonic())))
                dead = [r.name for r in replicas if r.proc.returncode is not None]
                if dead:
                    print(f"soak: replicas ended early: {dead}", flush=True)
                    break
        finally:
            churning.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await churning
            for replica in replicas:
                if replica.proc.returncode is None:
                    replica.proc.send_signal(signal.SIGTERM)
            for replica in replicas:
                try:
                    await asyncio.wait_for(replica.proc.wait(), 60)
                except asyncio.TimeoutError:
                    replica.proc.kill()
                    await replica.proc.wait()
                if replica.reader is not None:
                    await replica.reader
        print(table(replicas))
        problems = [p for r in replicas for p in verdict(r.name, r.samples, warm_up)]
        problems += [
            f"{r.name} exited with status {r.proc.returncode}"
            for r in replicas
            if r.proc.returncode not in (0, -signal.SIGTERM)
        ]
        print(f"\nchurn: {churn.writes} writes ({churn.refused} refused: conflicts, races)")
        for replica in replicas:
            growth = allocator_growth(replica.name, replica.samples, warm_up)
            if growth is not None:
                print(growth)
            traced = [s["growth"] for s in replica.samples if "growth" in s]
            if traced:
                held = [s["traced_kib"] for s in replica.samples if "growth" in s]
                print(
                    f"{replica.name}: traced allocations held {held[-1] - held[0]:+,} KiB "
                    "over the traced samples; grew most, by source line:"
                )
                print("\n".join(f"  {line}" for line in traced[-1]))
        print("verdict: " + ("nothing grew" if not problems else "; ".join(problems)))
        return {
            "minutes": args.minutes,
            "server": config.server,
            "writes": churn.writes,
            "replicas": {r.name: r.samples for r in replicas},
            "problems": problems,
        }
    raise AssertionError("not reached: the exit stack swallows nothing")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long (default 30)")
    parser.add_argument("--sample-every", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--warm-up", type=float, help="minutes left out (default: a sixth)")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--parents", type=int, default=20)
    parser.add_argument("--rate", type=float, default=2.0, help="writes per second")
    parser.add_argument("--kubeconfig", help="a server on the loopback (default: an emulator)")
    parser.add_argument("--json", help="write the samples and the verdict there")
    parser.add_argument(
        "--trace-allocations",
        action="store_true",
        help="trace allocations after the warm-up and report where memory grew (slower)",
    )
    args = parser.parse_args(argv)
    if not 0 < args.minutes <= MAX_MINUTES:
        parser.error(f"--minutes must be more than 0 and at most {MAX_MINUTES}")
    if args.sample_every <= 0 or args.rate <= 0 or args.replicas < 1 or args.parents < 1:
        parser.error("--sample-every, --rate, --replicas and --parents must be positive")
    report = asyncio.run(soak(args))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
