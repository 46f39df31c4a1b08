"""One replica of examples/configmap_replicator.py for tools/soak.py, which samples
itself: every ``--sample-every`` seconds it prints one line of JSON to stdout
with its resident memory, asyncio tasks, threads, open file descriptors, the
objects the garbage collector tracks (and the most common types among them),
the blocks Python's allocator has handed out, and each informer's counters
(objects, queued, relists, watch restarts, stalls).

    python tools/_soak_replica.py --sample-every 60 -- <configmap_replicator.py's flags>

It runs the example's own Manager (``build()``), so what is measured is the
example as users run it. SIGTERM stops it gracefully, as the example; Linux
only (it reads ``/proc/self``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import logging
import os
import sys
import threading
import time
from types import ModuleType
from typing import Any

from _replicator import load_example

from kubereflector.runtime import LeaderElectionLostError, Manager


def rss_kib() -> int:
    """Resident memory (VmRSS) of this process, in KiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def sample(manager: Manager, started: float) -> dict[str, Any]:
    informers = {}
    for name, informer in manager.factory.informers().items():
        stats = informer.stats()
        informers[name] = {
            "objects": stats.objects,
            "queued": stats.queued,
            "relists": stats.relists,
            "watch_restarts": stats.watch_restarts,
            "stalls": stats.stalls,
        }
    objects = gc.get_objects()
    types = collections.Counter(type(o).__name__ for o in objects)
    return {
        "seconds": round(time.monotonic() - started, 1),
        "rss_kib": rss_kib(),
        "tasks": len(asyncio.all_tasks()),
        "threads": threading.active_count(),
        "fds": len(os.listdir("/proc/self/fd")),
        "gc_objects": len(objects),
        # Python's allocator's blocks in use: flat while RSS creeps up means the
        # allocator's arenas, not objects kept alive.
        "allocated_blocks": sys.getallocatedblocks(),
        "types": dict(types.most_common(12)),
        "leader": manager.is_leader(),
        "informers": informers,
    }


async def sampling(manager: Manager, every: float) -> None:
    started = time.monotonic()
    while True:
        print(json.dumps(sample(manager, started)), flush=True)
        await asyncio.sleep(every)


async def run(example: ModuleType, args: argparse.Namespace, every: float) -> None:
    async with example.build(args) as manager:
        sampler = asyncio.create_task(sampling(manager, every))
        try:
            await manager.run()
        finally:
            sampler.cancel()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample-every", type=float, default=60.0, help="seconds")
    parser.add_argument("example_args", nargs=argparse.REMAINDER, help="-- and the example's")
    args = parser.parse_args(argv)
    if args.sample_every <= 0:
        parser.error("--sample-every must be > 0")
    example_args = args.example_args[1:] if args.example_args[:1] == ["--"] else args.example_args
    example = load_example()
    replicator_args = example.parse_args(example_args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(run(example, replicator_args, args.sample_every))
    except LeaderElectionLostError as err:
        print(f"{err}: exiting", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
