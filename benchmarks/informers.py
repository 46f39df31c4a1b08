"""Informers end to end: kubereflector's SharedIndexInformer, its limit, and the official client.

    .venv/bin/python benchmarks/informers.py [--pods 10000] [--events 20000] [--repeat 3]
        [--scale-pods 50000] [--kubeconfig PATH] [--gc] [--only CASE,...]

Servers, each in its own process, over HTTP:

- the project's ``ApiServerEmulator`` (``_emulator.py``), seeded through its
  data API with ``--pods`` realistic Pods (``_pods.make_pod``: ~5.5 KB of JSON
  each, managedFields included), for the initial sync, the memory and the
  relist;
- the recorded server (``_server.py``, the one ``watch_stream.py`` uses) for
  the watch stream, because the emulator cannot serve a watch at full speed
  (its write path takes ~0.3 ms per update), and for the scale rows (``--pods``
  and ``--scale-pods`` Pods, pre-encoded);
- with ``--kubeconfig``, a real cluster (e.g. the kube-apiserver v1.28.7 of
  ``../shared/real-apiserver``): a namespace ``kr-bench-<pods>`` gets
  ``--pods`` Pods once (with their status: ~7 KB each), reused by later runs,
  for the initial sync (both protocols) and the memory.

Every case runs in a fresh process (imports done before the clock starts);
cases are run ``--repeat`` times, interleaved, and the median run is kept
(every run is printed on stderr). Contenders read the same bytes from the
same server in the same run:

- **bare**: aiohttp + msgspec, the fastest loop written here (the practical
  limit, not a straw man): one request, typed ``decode_lines`` over ~4 KB
  slices of each chunk (or one ``decode`` of a whole list at resourceVersion
  "0"), a ``dict`` keyed ``namespace/name``; the garbage collector is disabled
  around the work and the result frozen (``gc.freeze()``), as an application
  that owns its process may do. One loop per protocol: a watch-list stream and
  a list;
- **kubereflector**: ``SharedIndexInformer`` over ``ResourceListWatch``, as a
  user gets it (watch-list first, atomic RealFIFO, default GC settings), in
  dict mode and in compact mode (``object_mode="compact"``), with one no-op
  event handler: a plain ``def`` one (run on its own thread) or an ``async
  def`` one (run on the loop). The list protocol is the informer with
  ``ReflectorOptions(use_watch_list=False)``: it lists at resourceVersion "0"
  (from the watch cache, unpaginated there), then watches;
- **official**: ``kubernetes.informer.SharedInformer`` over
  ``CoreV1Api.list_namespaced_pod``, with one handler.

What is measured:

1. *initial sync* of ``--pods`` Pods: from ``run()``/``start()`` until the
   cache has synced (the official client fills its cache before calling its
   first ADDED handler), each informer against the bare loop of its protocol;
2. *watch throughput*: ``--events`` events of ~5.5 KB from the first to the
   last one seen by the handler;
3. *memory per cached object* after the sync, after ``gc.collect()``:
   tracemalloc (bytes allocated and still held, divided by the object count)
   and the RSS delta, each in its own process;
4. *relist after a 410* on the synced ``--pods``: the emulator updates one Pod,
   compacts its history and ends every watch; the re-watch gets a 410 and the
   informer relists. Timed until the handler sees the updated Pod (the last
   of the relist); the Reflector's backoff (0.8-1.6 s the first time, as
   client-go) is measured and shown apart. Also the CPU time, the RSS peak above
   the synced state, the collector's time in the relist and while the
   application allocates 300,000 containers afterwards (deferred work);
5. *scale*: the informer's sync of ``--pods`` and of ``--scale-pods`` Pods, with
   the process's RSS before, at its peak during the sync and once synced;
6. with ``--gc``, round one's garbage collector variants of the initial sync.

Printed: markdown tables with absolute figures and ratios, the targets of the
issues and whether they are met, and the machine line. Nothing here is
asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _informer_cases import CASES, GC_CASES, WORKLOAD, Ctx, run_case
from _measure import machine, versions

HERE = Path(__file__).resolve().parent

STREAM_PODS = 1_000
"""Pods in the namespace the watch bursts update (each event is one of them)."""


# -- the driver ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Runner:
    """Runs cases in fresh processes and keeps each one's median run in ``results``
    (under ``prefix + case``)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.results: dict[str, dict[str, Any]] = {}

    def run(self, case: str, ctx: Ctx) -> dict[str, Any]:
        command = [
            sys.executable,
            __file__,
            "--case",
            case,
            "--url",
            ctx.url,
            "--control",
            ctx.control,
            "--recorded",
            ctx.recorded,
            "--pods",
            str(ctx.pods),
            "--events",
            str(ctx.events),
            "--namespace",
            ctx.namespace,
        ]
        if ctx.kubeconfig is not None:
            command += ["--kubeconfig", ctx.kubeconfig]
        out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=1800)
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return result

    def median_of(self, cases: list[str], repeat: int, ctx: Ctx, prefix: str = "") -> None:
        """Run each case ``repeat`` times, interleaved, keeping each one's median run
        (the run whose deciding figure is the median; every run is printed)."""
        runs: dict[str, list[dict[str, Any]]] = {case: [] for case in cases}
        for _ in range(repeat):
            for case in cases:
                runs[case].append(self.run(case, ctx))
        for case in cases:
            ordered = sorted(runs[case], key=lambda res: res[_decider(res)])
            self.results[prefix + case] = median = ordered[(len(ordered) - 1) // 2]
            decider = _decider(median)
            every = ", ".join(f"{res[decider]:.4g}" for res in runs[case])
            shown = {k: round(v, 4) for k, v in median.items()}
            print(
                f"  {prefix}{case}: {decider} [{every}] -> median {shown}",
                file=sys.stderr,
                flush=True,
            )


def _decider(result: dict[str, Any]) -> str:
    """The figure of a case's result that orders its runs."""
    for name in ("rate", "seconds", "per_object"):
        if name in result:
            return name
    raise KeyError(f"no rate, seconds or per_object in {sorted(result)}")


@contextlib.contextmanager
def _server(script: str, *args: str) -> Iterator[None]:
    """Run a benchmark server in its own process until the block ends."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / script), *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise SystemExit(f"{script} did not start")
        yield
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--official-repeat", type=int, default=2)
    parser.add_argument(
        "--scale-pods",
        type=int,
        default=50_000,
        help="the scale rows' large sync, beside --pods (0: no scale rows)",
    )
    parser.add_argument(
        "--kubeconfig",
        help="also measure the initial sync and memory against this cluster (it gets a "
        "namespace of --pods Pods, created once and reused)",
    )
    parser.add_argument("--gc", action="store_true", help="also run the GC-variant cases")
    parser.add_argument(
        "--only",
        metavar="CASE,...",
        help="run only these cases (comma-separated; see CASES) against the emulator and "
        "the recorded server, and print their median runs",
    )
    parser.add_argument("--case", choices=sorted(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--control", help=argparse.SUPPRESS)
    parser.add_argument("--recorded", help=argparse.SUPPRESS)
    parser.add_argument("--namespace", default="bench", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        ctx = Ctx(
            args.url,
            args.control,
            args.recorded,
            args.pods,
            args.events,
            args.namespace,
            args.kubeconfig,
        )
        print(json.dumps(run_case(args.case, ctx)), flush=True)
        os._exit(0)  # the official informer's thread blocks in a read: do not join it

    runner = Runner(args)
    n, slow = args.repeat, args.official_repeat
    port, control_port, recorded_port = _free_port(), _free_port(), _free_port()
    print(
        f"starting the emulator with {args.pods:,} Pods and the recorded server with "
        f"{args.events:,} events...",
        file=sys.stderr,
        flush=True,
    )
    emulator = _server(
        "_emulator.py",
        *("--port", str(port), "--control-port", str(control_port), "--pods", str(args.pods)),
    )
    recorded = _server(
        "_server.py",
        *("--port", str(recorded_port), "--pods", str(STREAM_PODS), "--events", str(args.events)),
    )
    with emulator, recorded:
        ctx = Ctx(
            f"http://127.0.0.1:{port}",
            f"http://127.0.0.1:{control_port}",
            f"http://127.0.0.1:{recorded_port}",
            args.pods,
            args.events,
        )
        if args.only:
            runner.median_of(_only(args.only), n, ctx)
            return
        sync = [
            "sync-bare-list",
            "sync-bare-watchlist",
            "sync-kubereflector",
            "sync-kubereflector-list",
            "sync-kubereflector-compact",
            "sync-kubereflector-compact-list",
        ]
        runner.median_of(sync + (GC_CASES if args.gc else []), n, ctx)
        runner.median_of(["sync-official"], slow, ctx)
        runner.median_of(WATCH_CASES, n, ctx)
        runner.median_of(["watch-official"], slow, ctx)
        runner.median_of([c for c in CASES if c.startswith("memory-")], 1, ctx)
        runner.median_of(RELIST_CASES, n, ctx)
        runner.median_of(["relist-official"], 1, ctx)
    if args.scale_pods:
        _scale(runner, args)
    if args.kubeconfig:
        _real(runner, args)
    print_tables(runner.results, args)


WATCH_CASES: Final = [
    "watch-bare",
    "watch-kubereflector",
    "watch-kubereflector-async",
    "watch-kubereflector-compact",
    "watch-kubereflector-compact-async",
]
RELIST_CASES: Final = [
    "relist-bare",
    "relist-kubereflector",
    "relist-kubereflector-async",
    "relist-kubereflector-compact",
    "relist-kubereflector-compact-async",
]
REAL_CASES: Final = [
    "sync-bare-list",
    "sync-bare-watchlist",
    "sync-kubereflector",
    "sync-kubereflector-list",
    "sync-kubereflector-compact",
    "sync-kubereflector-compact-list",
]


def _scale(runner: Runner, args: argparse.Namespace) -> None:
    """The informer's sync of --pods and of --scale-pods Pods from recorded servers."""
    for pods in (args.pods, args.scale_pods):
        port = _free_port()
        print(f"starting a recorded server with {pods:,} Pods...", file=sys.stderr, flush=True)
        with _server("_server.py", "--port", str(port), "--pods", str(pods), "--events", "0"):
            url = f"http://127.0.0.1:{port}"
            ctx = Ctx(url, "", url, pods, 0)
            cases = ["sync-bare-watchlist", "scale-dict", "scale-compact"]
            runner.median_of(cases, args.repeat, ctx, f"{pods}:")


def _real(runner: Runner, args: argparse.Namespace) -> None:
    """The initial sync and memory against a real cluster (``--kubeconfig``)."""
    namespace = f"kr-bench-{args.pods}"
    print(
        f"preparing {args.pods:,} Pods in namespace {namespace} of the cluster...",
        file=sys.stderr,
        flush=True,
    )
    server = asyncio.run(_seed_real(args.kubeconfig, namespace, args.pods))
    ctx = Ctx(server, "", "", args.pods, 0, namespace, args.kubeconfig)
    runner.median_of(REAL_CASES, args.repeat, ctx, "real:")
    runner.median_of(["sync-official"], 1, ctx, "real:")
    memory = ["memory-bare-tracemalloc", "memory-dicts-tracemalloc", "memory-compact-tracemalloc"]
    runner.median_of(memory, 1, ctx, "real:")


async def _seed_real(kubeconfig: str, namespace: str, pods: int) -> str:
    """Make ``namespace`` hold ``pods`` benchmark Pods (created once, with their
    status, so they are as large as a running Pod's); return the server URL."""
    from _pods import make_pod

    from kubereflector import AlreadyExistsError
    from kubereflector.client import Client, load_config

    config = load_config(kubeconfig)
    marker = "kubereflector.dev/bench-pods"
    async with Client(config) as client:
        try:
            await client.request(
                "POST", "/api/v1/namespaces", json={"metadata": {"name": namespace}}
            )
        except AlreadyExistsError:
            ns = await client.request("GET", f"/api/v1/namespaces/{namespace}")
            if (ns.get("metadata", {}).get("labels") or {}).get(marker) == str(pods):
                return config.server
        path = f"/api/v1/namespaces/{namespace}/pods"
        limit = asyncio.Semaphore(16)

        async def create(i: int) -> None:
            pod = make_pod(i, namespace=namespace)
            status = pod.pop("status")
            meta = pod["metadata"]
            for field in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
                meta.pop(field)
            async with limit:
                try:
                    created = await client.request("POST", path, json=pod)
                except AlreadyExistsError:
                    return
                created["status"] = status
                await client.request("PUT", f"{path}/{meta['name']}/status", json=created)

        await asyncio.gather(*(create(i) for i in range(pods)))
        await client.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}",
            json={"metadata": {"labels": {marker: str(pods)}}},
            content_type="application/merge-patch+json",
        )
        return config.server


# -- the tables ------------------------------------------------------------------------------------


def _only(names: str) -> list[str]:
    cases = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in cases if name not in CASES]
    if unknown or not cases:
        raise SystemExit(f"--only: unknown case(s) {unknown}; choose from {sorted(CASES)}")
    return cases


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], rows: list[list[str]]) -> None:
    print(_row(header))
    print("|" + "---|" * len(header))
    for row in rows:
        print(_row(row))
    print()


def print_tables(r: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    pods, events = args.pods, args.events
    today = datetime.date.today().isoformat()
    print(f"\n{today}; {machine()}; {versions()}.")
    print(
        f"Medians of {args.repeat} interleaved runs ({args.official_repeat} for the official "
        "client, 1 for memory), each case in a fresh process; servers in their own "
        "processes over HTTP (the ApiServerEmulator for sync, memory and relist; the recorded "
        "server for the watch); Pods of ~5.5 KB of JSON with managedFields. The machine is "
        "shared: trust the ratios within a run more than the absolute figures.\n"
    )
    targets: list[tuple[str, bool, str]] = []

    def target(name: str, ok: bool, shown: str) -> None:
        targets.append((name, ok, shown))

    def sec(key: str) -> float:
        return float(r[key]["seconds"])

    def rate(key: str) -> float:
        return float(r[key]["rate"])

    def kb(key: str) -> float:
        return float(r[key]["per_object"]) / 1000

    # -- summary -------------------------------------------------------------------------------
    w_bare, w_official = rate("watch-bare"), rate("watch-official")
    s_bare_wl, s_bare_list = sec("sync-bare-watchlist"), sec("sync-bare-list")
    rows = [
        [
            f"initial sync, {pods:,} pods, watch-list (s)",
            f"{s_bare_wl:.2f}",
            f"{sec('sync-kubereflector'):.2f}",
            f"{sec('sync-kubereflector-compact'):.2f}",
            f"{sec('sync-official'):.2f} (list)",
            f"{s_bare_wl / sec('sync-kubereflector'):.2f}",
            f"{s_bare_wl / sec('sync-kubereflector-compact'):.2f}",
        ],
        [
            f"initial sync, {pods:,} pods, list at RV 0 (s)",
            f"{s_bare_list:.2f}",
            f"{sec('sync-kubereflector-list'):.2f}",
            f"{sec('sync-kubereflector-compact-list'):.2f}",
            f"{sec('sync-official'):.2f}",
            f"{s_bare_list / sec('sync-kubereflector-list'):.2f}",
            f"{s_bare_list / sec('sync-kubereflector-compact-list'):.2f}",
        ],
        [
            f"watch, {events:,} events, `async def` handler (events/s)",
            f"{w_bare:,.0f}",
            f"{rate('watch-kubereflector-async'):,.0f}",
            f"{rate('watch-kubereflector-compact-async'):,.0f}",
            f"{w_official:,.0f}",
            f"{rate('watch-kubereflector-async') / w_bare:.2f}",
            f"{rate('watch-kubereflector-compact-async') / w_bare:.2f}",
        ],
        [
            f"watch, {events:,} events, plain `def` handler (events/s)",
            f"{w_bare:,.0f}",
            f"{rate('watch-kubereflector'):,.0f}",
            f"{rate('watch-kubereflector-compact'):,.0f}",
            f"{w_official:,.0f}",
            f"{rate('watch-kubereflector') / w_bare:.2f}",
            f"{rate('watch-kubereflector-compact') / w_bare:.2f}",
        ],
        [
            "memory per cached pod, tracemalloc (KB)",
            f"{kb('memory-bare-tracemalloc'):.1f}",
            f"{kb('memory-dicts-tracemalloc'):.1f}",
            f"{kb('memory-compact-tracemalloc'):.1f}",
            f"{kb('memory-official-tracemalloc'):.1f}",
            f"{kb('memory-dicts-tracemalloc') / kb('memory-bare-tracemalloc'):.2f}",
            f"{kb('memory-compact-tracemalloc') / kb('memory-bare-tracemalloc'):.2f}",
        ],
    ]
    for kind, suffix in (("plain `def`", ""), ("`async def`", "-async")):
        rows.append(
            [
                f"relist after a 410, {pods:,} pods, {kind} handler (s, backoff excluded)",
                f"{sec('relist-bare'):.2f}",
                f"{sec('relist-kubereflector' + suffix):.2f}",
                f"{sec('relist-kubereflector-compact' + suffix):.2f}",
                f"{sec('relist-official'):.2f}",
                f"{sec('relist-kubereflector' + suffix) / sec('relist-bare'):.2f}",
                f"{sec('relist-kubereflector-compact' + suffix) / sec('relist-bare'):.2f}",
            ]
        )
    print(
        "Summary (sync times: bare / ours, higher is better; relist times: ours / bare, as "
        "the target reads, lower is better; rates and memory: ours / bare):\n"
    )
    _table(
        [
            "measure",
            "bare aiohttp+msgspec (dicts)",
            "kubereflector, dict",
            "kubereflector, compact",
            "official client",
            "dict vs bare",
            "compact vs bare",
        ],
        rows,
    )

    # -- initial list -----------------------------------------------------------------------
    print(
        "Initial sync in detail (s until has_synced; each informer against the bare loop of "
        "the same protocol; GC: collections during the sync):\n"
    )
    rows = []
    for name, key, bare in (
        ("bare, watch-list stream, GC off + freeze", "sync-bare-watchlist", None),
        ("kubereflector, dict, watch-list (the default)", "sync-kubereflector", s_bare_wl),
        ("kubereflector, compact, watch-list", "sync-kubereflector-compact", s_bare_wl),
        ("bare, one list at RV 0, GC off + freeze", "sync-bare-list", None),
        ("kubereflector, dict, list at RV 0", "sync-kubereflector-list", s_bare_list),
        ("kubereflector, compact, list at RV 0", "sync-kubereflector-compact-list", s_bare_list),
        ("official SharedInformer (one list)", "sync-official", None),
    ):
        res = r[key]
        rows.append(
            [
                name,
                f"{res['seconds']:.2f}",
                "" if bare is None else f"{bare / res['seconds']:.2f}",
                f"{res['gc_young']:.3f}",
                f"{res['gc_full']:.3f} ({res['gc_full_count']})",
                "" if "after_gc_total" not in res else f"{res['after_gc_total']:.3f}",
            ]
        )
    _table(
        [
            "contender",
            "has_synced (s)",
            "bare / this",
            "GC young (s)",
            "GC full (s, n)",
            f"GC while allocating {WORKLOAD:,} after (s)",
        ],
        rows,
    )

    # -- watch -----------------------------------------------------------------------------
    print(f"Watch throughput in detail ({events:,} MODIFIED events, GC during them):\n")
    rows = []
    for name, key in (
        ("bare (GC off)", "watch-bare"),
        ("kubereflector, dict, `async def` handler", "watch-kubereflector-async"),
        ("kubereflector, dict, plain `def` handler (its own thread)", "watch-kubereflector"),
        ("kubereflector, compact, `async def` handler", "watch-kubereflector-compact-async"),
        ("kubereflector, compact, plain `def` handler", "watch-kubereflector-compact"),
        ("official SharedInformer", "watch-official"),
    ):
        res = r[key]
        rows.append(
            [
                name,
                f"{res['rate']:,.0f}",
                f"{res['rate'] / w_bare:.2f}",
                f"{res['rate'] / w_official:.1f}x",
                f"{res['gc_young']:.3f}",
                f"{res['gc_full']:.3f} ({res['gc_full_count']})",
            ]
        )
    _table(
        ["contender", "events/s", "/ bare", "/ official", "GC young (s)", "GC full (s, n)"], rows
    )

    # -- memory ----------------------------------------------------------------------------
    print("Memory per cached object after the sync, after gc.collect() (KB):\n")
    official = kb("memory-official-tracemalloc")
    rows = []
    for name, key in (
        ("bare dict of decoded dicts", "bare"),
        ("kubereflector, dict", "dicts"),
        ("kubereflector, dict + strip_managed_fields", "strip"),
        ("kubereflector, compact", "compact"),
        ("kubereflector, compact + strip_managed_fields", "compact-strip"),
        ("kubereflector, metadata-only", "metadata"),
        ("kubereflector, metadata-only + strip_managed_fields", "metadata-strip"),
        ("official SharedInformer (models)", "official"),
    ):
        traced = kb(f"memory-{key}-tracemalloc")
        rss = kb(f"memory-{key}-rss")
        rows.append([name, f"{traced:.1f}", f"{rss:.1f}", f"{traced / official:.2f}"])
    _table(["cache", "tracemalloc", "RSS delta", "vs official (tracemalloc)"], rows)

    # -- relist ----------------------------------------------------------------------------
    print(
        f"Relist after a 410 on {pods:,} synced pods (until the handler has seen the whole "
        "relist; GC after: while the application then allocates "
        f"{WORKLOAD:,} containers, i.e. collection work deferred, not saved):\n"
    )
    rows = []
    for name, key in (
        ("bare: list again into a new dict (GC off)", "relist-bare"),
        ("kubereflector, dict, plain `def` handler", "relist-kubereflector"),
        ("kubereflector, dict, `async def` handler", "relist-kubereflector-async"),
        ("kubereflector, compact, plain `def` handler", "relist-kubereflector-compact"),
        ("kubereflector, compact, `async def` handler", "relist-kubereflector-compact-async"),
        ("official", "relist-official"),
    ):
        res = r[key]
        rows.append(
            [
                name,
                f"{res['wall']:.2f}",
                f"{res['backoff']:.2f}",
                f"{res['seconds']:.2f}",
                f"{res['seconds'] / sec('relist-bare'):.2f}",
                f"{res['cpu']:.2f}",
                f"{res['peak'] / 1e6:.0f}",
                f"{res.get('gc_total', 0.0):.2f}",
                f"{res.get('after_gc_total', 0.0):.2f}",
            ]
        )
    _table(
        [
            "contender",
            "caught up (s)",
            "of it backoff (s)",
            "relist (s)",
            "/ bare",
            "CPU (s)",
            "RSS peak above synced (MB)",
            "GC in relist (s)",
            "GC after (s)",
        ],
        rows,
    )

    # -- scale -----------------------------------------------------------------------------
    big = args.scale_pods
    if big:
        print(
            f"Scale: the informer's watch-list sync of {pods:,} and {big:,} pods from the "
            "recorded server (RSS of the whole process: before, peak during the sync, and "
            "steady once synced, after gc.collect()), beside the bare watch-list loop (GC off), "
            "whose own growth shows what the machine adds:\n"
        )
        bare_growth = sec(f"{big}:sync-bare-watchlist") / sec(f"{pods}:sync-bare-watchlist")
        rows = [
            [
                f"bare loop, {count:,} pods",
                f"{sec(f'{count}:sync-bare-watchlist'):.2f}",
                f"{sec(f'{count}:sync-bare-watchlist') / sec(f'{pods}:sync-bare-watchlist'):.2f}",
                "",
                "",
                "",
                "",
                "",
            ]
            for count in (pods, big)
        ]
        for mode in ("dict", "compact"):
            small_s = sec(f"{pods}:scale-{mode}")
            for count in (pods, big):
                res = r[f"{count}:scale-{mode}"]
                rows.append(
                    [
                        f"{mode}, {count:,} pods",
                        f"{res['seconds']:.2f}",
                        f"{res['seconds'] / small_s:.2f}",
                        f"{res['base'] / 1e6:.0f}",
                        f"{res['peak'] / 1e6:.0f}",
                        f"{res['steady'] / 1e6:.0f}",
                        f"{res['peak_over_steady']:.2f}",
                        f"{res['growth_peak_over_steady']:.2f}",
                    ]
                )
            growth = sec(f"{big}:scale-{mode}") / small_s
            target(
                f"{mode}: {big:,}-pod sync <= {big / pods * 1.1:.1f}x the {pods:,}-pod one",
                growth <= big / pods * 1.1,
                f"{growth:.2f}x (bare loop: {bare_growth:.2f}x)",
            )
            # What the machine adds (caches, page faults) shows in the bare loop's own
            # growth: judged against it, the informer's growth is its own doing.
            target(
                f"{mode}: grows no faster than the bare loop (growth / bare growth <= 1.1)",
                growth <= bare_growth * 1.1,
                f"{growth / bare_growth:.2f} ({growth:.2f}x / {bare_growth:.2f}x)",
            )
            ratio = r[f"{big}:scale-{mode}"]["peak_over_steady"]
            target(
                f"{mode}: peak RSS during the {big:,}-pod sync <= 1.3x the steady state",
                ratio <= 1.3,
                f"{ratio:.2f}",
            )
        _table(
            [
                "informer",
                "sync (s)",
                f"/ {pods:,}-pod sync",
                "RSS before (MB)",
                "peak (MB)",
                "steady (MB)",
                "peak / steady",
                "growth: peak / steady",
            ],
            rows,
        )

    # -- a real cluster --------------------------------------------------------------------
    if args.kubeconfig:
        print(
            f"Against a real cluster ({args.kubeconfig}; {pods:,} Pods created there once, "
            "~7 KB each with their status and managedFields):\n"
        )
        rb_wl, rb_list = sec("real:sync-bare-watchlist"), sec("real:sync-bare-list")
        rows = []
        for name, key, bare in (
            ("bare, watch-list stream", "real:sync-bare-watchlist", None),
            ("kubereflector, dict, watch-list", "real:sync-kubereflector", rb_wl),
            ("kubereflector, compact, watch-list", "real:sync-kubereflector-compact", rb_wl),
            ("bare, one list at RV 0", "real:sync-bare-list", None),
            ("kubereflector, dict, list at RV 0", "real:sync-kubereflector-list", rb_list),
            (
                "kubereflector, compact, list at RV 0",
                "real:sync-kubereflector-compact-list",
                rb_list,
            ),
            ("official SharedInformer (one list)", "real:sync-official", None),
        ):
            res = r[key]
            rows.append(
                [
                    name,
                    f"{res['seconds']:.2f}",
                    "" if bare is None else f"{bare / res['seconds']:.2f}",
                ]
            )
        _table(["initial sync", "has_synced (s)", "bare (same protocol) / this"], rows)
        _table(
            ["memory per cached pod (tracemalloc, KB)", "bare dicts", "dict", "compact"],
            [
                [
                    "real cluster",
                    f"{kb('real:memory-bare-tracemalloc'):.1f}",
                    f"{kb('real:memory-dicts-tracemalloc'):.1f}",
                    f"{kb('real:memory-compact-tracemalloc'):.1f}",
                ]
            ],
        )
        for label, key, bare in (
            ("watch-list", "real:sync-kubereflector", rb_wl),
            ("list", "real:sync-kubereflector-list", rb_list),
        ):
            ratio = bare / sec(key)
            target(
                f"real cluster: initial sync ({label}) >= 0.75 of the bare {label} loop",
                ratio >= 0.75,
                f"{ratio:.2f}",
            )
        for label, key, bare in (
            ("watch-list", "real:sync-kubereflector-compact", rb_wl),
            ("list", "real:sync-kubereflector-compact-list", rb_list),
        ):
            ratio = sec(key) / bare
            target(
                f"real cluster: compact sync ({label}) <= 0.8x the bare dict {label} loop",
                ratio <= 0.8,
                f"{ratio:.2f}x",
            )

    # -- GC variants -----------------------------------------------------------------------
    if all(case in r for case in GC_CASES):
        print(
            f"The garbage collector in the informer's initial sync of {pods:,} pods, then while "
            f"the application allocates {WORKLOAD:,} containers (what was deferred, not saved):\n"
        )
        rows = []
        for name, key in (
            ("default (no remedy)", "gc-none"),
            ("**full collections deferred during the sync (shipped)**", "sync-kubereflector"),
            ("gc.disable() during the sync", "gc-pause"),
            ("gen-0 threshold x100 during the sync", "gc-gen0"),
            ("shipped + the application's gc.freeze() after the sync", "gc-freeze"),
        ):
            res = r[key]
            rows.append(
                [
                    name,
                    f"{res['seconds']:.2f}",
                    f"{res['gc_total']:.3f}",
                    str(res["gc_full_count"]),
                    f"{res['after_gc_total']:.3f}",
                    f"{res['gc_total'] + res['after_gc_total']:.3f}",
                ]
            )
        _table(
            [
                "GC handling",
                "has_synced (s)",
                "GC in sync (s)",
                "full collections in sync",
                "GC after (s)",
                "GC in sync + after (s)",
            ],
            rows,
        )

    # -- targets ---------------------------------------------------------------------------
    s_official = sec("sync-official")
    for label, key, bare in (
        ("watch-list", "sync-kubereflector", s_bare_wl),
        ("list at RV 0", "sync-kubereflector-list", s_bare_list),
    ):
        ratio = bare / sec(key)
        target(
            f"initial sync ({label}) >= 0.75 of the bare {label} loop",
            ratio >= 0.75,
            f"{ratio:.2f}",
        )
    for kind, key in (
        ("`async def`", "watch-kubereflector-async"),
        ("plain `def`", "watch-kubereflector"),
    ):
        ratio = rate(key) / w_bare
        target(
            f"watch events/s >= 0.75 of the bare loop, {kind} handler",
            ratio >= 0.75,
            f"{ratio:.2f}",
        )
    for kind, suffix in (("plain `def`", ""), ("`async def`", "-async")):
        ratio = sec("relist-kubereflector" + suffix) / sec("relist-bare")
        target(f"relist <= 1.5x the bare loop's, {kind} handler", ratio <= 1.5, f"{ratio:.2f}x")
    compact_kb = kb("memory-compact-tracemalloc")
    target(
        "compact: memory per pod <= 10 KB (tracemalloc)", compact_kb <= 10, f"{compact_kb:.1f} KB"
    )
    for label, key, bare in (
        ("watch-list", "sync-kubereflector-compact", s_bare_wl),
        ("list", "sync-kubereflector-compact-list", s_bare_list),
    ):
        ratio = sec(key) / bare
        target(
            f"compact: initial sync ({label}) <= 0.8x the bare dict {label} loop",
            ratio <= 0.8,
            f"{ratio:.2f}x",
        )
    for kind, key in (
        ("`async def`", "watch-kubereflector-compact-async"),
        ("plain `def`", "watch-kubereflector-compact"),
    ):
        ratio = rate(key) / w_bare
        target(
            f"compact: watch events/s >= 2x the bare dict loop, {kind} handler",
            ratio >= 2,
            f"{ratio:.2f}x",
        )
    ratio = s_official / sec("sync-kubereflector")
    target("initial sync >= 8x faster than official (round one)", ratio >= 8, f"{ratio:.1f}x")
    for kind, key in (
        ("`async def`", "watch-kubereflector-async"),
        ("plain `def`", "watch-kubereflector"),
    ):
        ratio = rate(key) / w_official
        target(
            f"watch events/s >= 6x official, {kind} handler (round one)",
            ratio >= 6,
            f"{ratio:.1f}x",
        )
    ratio = kb("memory-dicts-tracemalloc") / official
    target("memory per pod <= 0.5 of official (round one)", ratio <= 0.5, f"{ratio:.2f}")
    strip = kb("memory-strip-tracemalloc")
    target(
        "memory per pod <= 20 KB with strip_managed_fields (round one)",
        strip <= 20,
        f"{strip:.1f} KB",
    )
    print("Targets (this machine, this run):\n")
    _table(
        ["target", "measured", "met"],
        [[name, shown, "yes" if ok else "**no**"] for name, ok, shown in targets],
    )


if __name__ == "__main__":
    main()
