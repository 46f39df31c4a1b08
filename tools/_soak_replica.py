"""One replica of examples/configmap_replicator.py for tools/soak.py, which samples
itself: every ``--sample-every`` seconds it prints one line of JSON to stdout
with its resident memory, asyncio tasks, threads, open file descriptors, the
objects the garbage collector tracks (and the most common types among them),
the blocks Python's allocator has handed out, and each informer's counters
(objects, queued, relists, watch restarts, stalls).

    python tools/_soak_replica.py --sample-every 60 [--trace-allocations SECONDS]
                                  -- <configmap_replicator.py's flags>

With ``--trace-allocations SECONDS`` it traces allocations (``tracemalloc``,
which slows it down), takes a snapshot at its first sample after SECONDS, and
adds to each later sample the source lines whose live memory grew most since
that snapshot: where a slow growth comes from; and to every sample the memory
the traced allocations hold (``traced_kib``), to tell objects kept alive from
the allocator's own growth in the resident memory.

It runs the example's own Manager (``build()``), so what is measured is the
example as users run it. SIGTERM stops it gracefully, as the example; Linux
only (it reads ``/proc/self``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import ctypes
import gc
import json
import logging
import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from _replicator import load_example

from kubereflector.runtime import LeaderElectionLostError, Manager


def rss_kib() -> int:
    """Resident memory (VmRSS) of this process, in KiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _mallinfo2() -> Callable[[], _MallInfo2] | None:
    """glibc's ``mallinfo2`` (2.33 and later), or ``None`` elsewhere."""
    try:
        function = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return None
    function.restype = _MallInfo2
    function.argtypes = []
    return cast("Callable[[], _MallInfo2]", function)


MALLINFO2 = _mallinfo2()


def malloc_kib() -> dict[str, int]:
    """What C's allocator holds (glibc only; empty elsewhere): ``malloc_used_kib``, the
    memory handed out (Python's large objects and arenas, C libraries' buffers), and
    ``malloc_free_kib``, the free memory kept in its heaps. Resident memory that grows
    while the first stays flat is fragmentation, not objects kept alive."""
    if MALLINFO2 is None:
        return {}
    info = MALLINFO2()
    return {
        "malloc_used_kib": (info.uordblks + info.hblkhd) // 1024,
        "malloc_free_kib": info.fordblks // 1024,
    }


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
        **malloc_kib(),
        "types": dict(types.most_common(12)),
        "leader": manager.is_leader(),
        "informers": informers,
    }


TRACE_FRAMES = 4
GROWTH_LINES = 10


def growth(baseline: tracemalloc.Snapshot) -> list[str]:
    """The source lines whose live memory grew most since ``baseline``, innermost
    frame first, each with its growth in bytes and blocks."""
    now = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    top = now.compare_to(baseline, "traceback")[:GROWTH_LINES]
    return [
        f"{stat.size_diff:+,} B {stat.count_diff:+,} blocks at "
        + " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(stat.traceback))
        for stat in top
    ]


async def sampling(manager: Manager, every: float, trace_after: float | None) -> None:
    started = time.monotonic()
    baseline: tracemalloc.Snapshot | None = None
    while True:
        line = sample(manager, started)
        if trace_after is not None:
            line["traced_kib"] = tracemalloc.get_traced_memory()[0] // 1024
            if baseline is None and line["seconds"] >= trace_after:
                baseline = tracemalloc.take_snapshot()
            elif baseline is not None:
                line["growth"] = growth(baseline)
        print(json.dumps(line), flush=True)
        await asyncio.sleep(every)


async def run(
    example: ModuleType, args: argparse.Namespace, every: float, trace_after: float | None
) -> None:
    async with example.build(args) as manager:
        sampler = asyncio.create_task(sampling(manager, every, trace_after))
        try:
            await manager.run()
        finally:
            sampler.cancel()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample-every", type=float, default=60.0, help="seconds")
    parser.add_argument(
        "--trace-allocations",
        type=float,
        metavar="SECONDS",
        help="trace allocations; report growth since the first sample after SECONDS",
    )
    parser.add_argument("example_args", nargs=argparse.REMAINDER, help="-- and the example's")
    args = parser.parse_args(argv)
    if args.sample_every <= 0:
        parser.error("--sample-every must be > 0")
    example_args = args.example_args[1:] if args.example_args[:1] == ["--"] else args.example_args
    example = load_example()
    replicator_args = example.parse_args(example_args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.trace_allocations is not None:
        tracemalloc.start(TRACE_FRAMES)
    try:
        asyncio.run(run(example, replicator_args, args.sample_every, args.trace_allocations))
    except LeaderElectionLostError as err:
        print(f"{err}: exiting", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
