"""Informers end to end: kubereflector's SharedIndexInformer, its limit, and the official client.

    .venv/bin/python benchmarks/informers.py [--pods 10000] [--events 20000] [--repeat 3]
        [--scale-pods 50000] [--kubeconfig PATH] [--client-go KUBERNETES_TREE [--go GO]]
        [--gc] [--only CASE,...]

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
  for the initial sync (both protocols) and the memory; and raw readers of the
  same list and watch-list in JSON and in protobuf (every byte read, nothing
  decoded): the server's share of each sync, and what protobuf could save.

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
- **client-go** (with ``--client-go``, see ``_client_go.py``): a Go
  ``SharedIndexInformer`` of Pods with one no-op handler, as a Go operator gets
  it (client-go of the tree's release, protobuf unless said), for compact
  mode's targets: its watch of the recorded stream, which the recorded server
  then also serves in protobuf (encoded by Kubernetes' own serializers), and,
  with ``--kubeconfig``, its sync of the real cluster in protobuf and in JSON
  and its heap per Pod after ``runtime.GC()``.

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
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _client_go as client_go
from _informer_cases import CASES, GC_CASES, Ctx, run_case
from _informer_tables import print_tables

HERE = Path(__file__).resolve().parent

STREAM_PODS = 1_000
"""Pods in the namespace the watch bursts update (each event is one of them)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Runner:
    """Runs cases in fresh processes and keeps each one's median run in ``results``
    (under ``prefix + case``)."""

    def __init__(self, args: argparse.Namespace, client_go: Path | None = None) -> None:
        self.args = args
        self.client_go = client_go
        self.results: dict[str, dict[str, Any]] = {}

    def run(self, case: str, ctx: Ctx) -> dict[str, Any]:
        if case in CLIENT_GO_CASES:
            return self.run_client_go(case, ctx)
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

    def run_client_go(self, case: str, ctx: Ctx) -> dict[str, Any]:
        """A client-go case: its watch of the recorded stream, or its sync of the real
        cluster (protobuf, or JSON for ``sync-client-go-json``), with its heap per Pod."""
        assert self.client_go is not None, "client-go cases need --client-go"
        if case == "watch-client-go":
            events = ctx.events
            res = client_go.run(
                self.client_go,
                "watch",
                *("-server", ctx.recorded, "-namespace", "stream", "-events", str(events)),
            )
            return {"rate": res["events_per_second"], "seconds": res["seconds"]}
        assert ctx.kubeconfig is not None, f"{case} runs against a real cluster"
        protocol = "json" if case.endswith("-json") else "protobuf"
        res = client_go.run(
            self.client_go,
            "sync",
            *("-kubeconfig", ctx.kubeconfig, "-namespace", ctx.namespace),
            *("-pods", str(ctx.pods), "-protocol", protocol),
        )
        return {
            "seconds": res["seconds"],
            "handled": res["handled"],
            "heap_per_object": res["heap_bytes_per_object"],
        }

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
    parser.add_argument(
        "--client-go",
        metavar="KUBERNETES_TREE",
        help="also measure client-go (benchmarks/client_go, built in this Kubernetes source "
        "tree with vendor/, e.g. the one ../shared/real-apiserver builds from): its watch of "
        "the recorded stream in protobuf and, with --kubeconfig, its sync and heap per Pod",
    )
    parser.add_argument("--go", default="go", help="the Go toolchain for --client-go")
    parser.add_argument("--gc", action="store_true", help="also run the GC-variant cases")
    parser.add_argument(
        "--only",
        metavar="CASE,...",
        help="run only these cases (comma-separated; see CASES) against the emulator and "
        "the recorded server (and, with --kubeconfig, those of the real-cluster rows "
        "against it too), and print their median runs",
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

    binary = client_go.build(args.client_go, args.go) if args.client_go else None
    runner = Runner(args, binary)
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
        *(("--client-go", str(binary)) if binary else ()),
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
            emulated = [
                case
                for case in _only(args.only)
                if case not in PROTOBUF_CASES and case not in REAL_CLIENT_GO_CASES
            ]
            runner.median_of(emulated, args.repeat, ctx)
        else:
            _emulated(runner, args, ctx)
    if args.only:
        real = [
            case for case in _only(args.only) if case in REAL_CASES or case in REAL_CLIENT_GO_CASES
        ]
        if args.kubeconfig and real:
            _real(runner, args, real)
        return
    if args.scale_pods:
        _scale(runner, args)
    if args.kubeconfig:
        _real(runner, args, REAL_CASES + (REAL_CLIENT_GO_CASES if binary else []))
        _real_memory_and_official(runner, args)
    print_tables(runner.results, args)


def _emulated(runner: Runner, args: argparse.Namespace, ctx: Ctx) -> None:
    """Every case against the emulator and the recorded server."""
    n, slow = args.repeat, args.official_repeat
    sync = [
        "sync-bare-list",
        "sync-bare-watchlist",
        "sync-kubereflector",
        "sync-kubereflector-list",
        "sync-kubereflector-compact",
        "sync-kubereflector-compact-list",
        "sync-kubereflector-compact-protobuf",
    ]
    runner.median_of(sync + (GC_CASES if args.gc else []), n, ctx)
    runner.median_of(["sync-official"], slow, ctx)
    runner.median_of(WATCH_CASES + (["watch-client-go"] if runner.client_go else []), n, ctx)
    runner.median_of(["watch-official"], slow, ctx)
    runner.median_of([c for c in CASES if c.startswith("memory-")], 1, ctx)
    runner.median_of(RELIST_CASES, n, ctx)
    runner.median_of(["relist-official"], 1, ctx)


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
REAL_CLIENT_GO_CASES: Final = ["sync-client-go", "sync-client-go-json"]
"""client-go's sync of the real cluster in protobuf and in JSON (``--client-go``)."""
CLIENT_GO_CASES: Final = {"watch-client-go", *REAL_CLIENT_GO_CASES}
"""Cases run by the Go peer, not by this script (see ``Runner.run_client_go``)."""
PROTOBUF_CASES: Final = {"sync-raw-list-protobuf", "sync-raw-watchlist-protobuf"}
"""Cases only a real cluster answers (the emulator speaks JSON only)."""
REAL_CASES: Final = [
    "sync-bare-list",
    "sync-bare-watchlist",
    "sync-kubereflector",
    "sync-kubereflector-list",
    "sync-kubereflector-compact",
    "sync-kubereflector-compact-list",
    "sync-kubereflector-compact-protobuf",
    "sync-raw-list-json",
    "sync-raw-list-protobuf",
    "sync-raw-watchlist-json",
    "sync-raw-watchlist-protobuf",
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


def _real_ctx(args: argparse.Namespace) -> Ctx:
    """The real cluster's context (``--kubeconfig``), its namespace of Pods made once."""
    namespace = f"kr-bench-{args.pods}"
    print(
        f"preparing {args.pods:,} Pods in namespace {namespace} of the cluster...",
        file=sys.stderr,
        flush=True,
    )
    server = asyncio.run(_seed_real(args.kubeconfig, namespace, args.pods))
    return Ctx(server, "", "", args.pods, 0, namespace, args.kubeconfig)


def _real(runner: Runner, args: argparse.Namespace, cases: list[str]) -> None:
    """The initial sync ``cases`` against a real cluster (``--kubeconfig``)."""
    runner.median_of(cases, args.repeat, _real_ctx(args), "real:")


def _real_memory_and_official(runner: Runner, args: argparse.Namespace) -> None:
    """The official client's sync and the memory per Pod from the real cluster."""
    ctx = _real_ctx(args)
    runner.median_of(["sync-official"], 1, ctx, "real:")
    memory = [
        "memory-bare-tracemalloc",
        "memory-dicts-tracemalloc",
        "memory-compact-tracemalloc",
        "memory-compact-protobuf-tracemalloc",
    ]
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


def _only(names: str) -> list[str]:
    cases = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in cases if name not in CASES and name not in CLIENT_GO_CASES]
    if unknown or not cases:
        raise SystemExit(
            f"--only: unknown case(s) {unknown}; choose from {sorted([*CASES, *CLIENT_GO_CASES])}"
        )
    return cases


if __name__ == "__main__":
    main()
