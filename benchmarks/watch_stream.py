"""Watch throughput and initial list over HTTP: kubereflector against its limit and a peer.

    .venv/bin/python benchmarks/watch_stream.py [--events 20000] [--pods 10000] [--repeat 3]

A recorded API server (``_server.py``, its own process) serves realistic Pods
(~5 KB of JSON each, managedFields included). Three clients read the same bytes,
each case in a fresh process, ``--repeat`` interleaved runs, the median kept:

- **bare**: aiohttp + msgspec, split lines, decode, keep the newest object per
  key in a dict (the practical limit for a cache fed from a stream); for the
  list, the Reflector's requests (RV "0", pages of 500), with the collector
  off meanwhile;
- **kubereflector**: ``ResourceListWatch`` + ``Reflector`` into a ``Cache``;
- **official**: the ``kubernetes`` client (``watch.Watch().stream`` and paged
  ``list_namespaced_pod``), which deserializes into its models.

Printed: a markdown table with absolute figures and the ratios to the bare loop
and to the peer. Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES = [
    "watch-bare",
    "watch-kubereflector",
    "watch-official",
    "list-bare",
    "list-kubereflector",
    "list-official",
]


# -- the cases (each runs in a fresh process) -------------------------------------


async def watch_bare(url: str, events: int) -> int:
    import aiohttp
    import msgspec

    decode = msgspec.json.Decoder().decode
    store: dict[str, Any] = {}
    count = 0
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{url}/api/v1/namespaces/stream/pods", params={"watch": "1", "resourceVersion": "1"}
        ) as response,
    ):
        tail = b""
        async for chunk in response.content.iter_any():
            lines = (tail + chunk).split(b"\n") if tail else chunk.split(b"\n")
            tail = lines.pop()
            for line in lines:
                if line:
                    obj = decode(line)["object"]
                    meta = obj["metadata"]
                    store[f"{meta['namespace']}/{meta['name']}"] = obj
                    count += 1
    assert count == events, count
    return count


async def watch_kubereflector(url: str, events: int) -> int:
    from kubereflector import Cache, Reflector, ReflectorOptions
    from kubereflector.client import Client, ClientConfig, ResourceListWatch

    target = str(events + 1)
    done = asyncio.Event()

    class Store(Cache):
        def update_resource_version(self, resource_version: str) -> None:
            super().update_resource_version(resource_version)
            if resource_version == target:
                done.set()

    store = Store()
    async with Client(ClientConfig(server=url)) as client:
        lw = ResourceListWatch(client, "pods", namespace="stream")
        await lw.list(_list_options())  # resolve discovery before the clock starts
        options = ReflectorOptions(use_watch_list=False, idle_timeout=None)
        reflector = Reflector(lw, store, options=options)
        task = asyncio.create_task(reflector.run())
        await done.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return reflector.stats().events


def _list_options() -> Any:
    from kubereflector import ListOptions

    return ListOptions()


def watch_official(url: str, events: int) -> int:
    from kubernetes import client as k8s
    from kubernetes import watch

    api = k8s.CoreV1Api(_official_client(url))
    count = 0
    store: dict[str, Any] = {}
    for event in watch.Watch().stream(
        api.list_namespaced_pod, "stream", resource_version="1", timeout_seconds=600
    ):
        pod = event["object"]
        store[f"{pod.metadata.namespace}/{pod.metadata.name}"] = pod
        count += 1
        if count == events:
            break
    return count


async def list_bare(url: str, pods: int) -> int:
    import aiohttp
    import msgspec

    decode = msgspec.json.Decoder().decode
    items: list[Any] = []
    # The Reflector's request: RV "0" with client-go's limit of 500 (which
    # kube-apiserver's watch cache ignores, answering whole; this server pages).
    # The collector is off meanwhile (the limit: what an application that owns
    # its process may do; the Reflector defers full collections during a list).
    params = {"resourceVersion": "0", "limit": "500"}
    gc.disable()
    try:
        async with aiohttp.ClientSession() as session:
            while True:
                async with session.get(f"{url}/api/v1/namespaces/bench/pods", params=params) as r:
                    page = decode(await r.read())
                items.extend(page["items"])
                token = page["metadata"].get("continue")
                if not token:
                    break
                params = {"limit": "500", "continue": token}
        store = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in items}
    finally:
        gc.enable()
    assert len(store) == pods, len(store)
    return len(store)


async def list_kubereflector(url: str, pods: int) -> int:
    from kubereflector import Cache, Reflector, ReflectorOptions
    from kubereflector.client import Client, ClientConfig, ResourceListWatch

    synced = asyncio.Event()

    class Store(Cache):
        def replace(self, items: list[Any], resource_version: str) -> None:
            super().replace(items, resource_version)
            synced.set()

    store = Store()
    async with Client(ClientConfig(server=url)) as client:
        reflector = Reflector(
            ResourceListWatch(client, "pods", namespace="bench"),
            store,
            options=ReflectorOptions(use_watch_list=False, idle_timeout=None),
        )
        task = asyncio.create_task(reflector.run())
        await synced.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len(store) == pods, len(store)
    return len(store)


def list_official(url: str, pods: int) -> int:
    from kubernetes import client as k8s

    api = k8s.CoreV1Api(_official_client(url))
    items: list[Any] = []
    token = None
    while True:
        page = api.list_namespaced_pod("bench", limit=500, _continue=token, resource_version=None)
        items.extend(page.items)
        token = page.metadata._continue
        if not token:
            break
    assert len(items) == pods, len(items)
    return len(items)


def _official_client(url: str) -> Any:
    from kubernetes import client as k8s

    configuration = k8s.Configuration()
    configuration.host = url
    return k8s.ApiClient(configuration)


def run_case(case: str, url: str, events: int, pods: int) -> dict[str, float]:
    size = events if case.startswith("watch") else pods
    func = globals()[case.replace("-", "_")]
    # Imports are not what is measured: load every client's modules first.
    import aiohttp  # noqa: F401
    import kubernetes.client
    import kubernetes.watch  # noqa: F401
    import msgspec  # noqa: F401

    import kubereflector.client  # noqa: F401

    start = time.perf_counter()
    count = asyncio.run(func(url, size)) if asyncio.iscoroutinefunction(func) else func(url, size)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "count": count}


# -- the driver -------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.url, args.events, args.pods)))
        return

    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "_server.py"),
            "--port",
            str(port),
            "--pods",
            str(args.pods),
            "--events",
            str(args.events),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise SystemExit("the benchmark server did not start")
        url = f"http://127.0.0.1:{port}"
        runs: dict[str, list[float]] = {case: [] for case in CASES}
        for _ in range(args.repeat):  # interleaved: each round runs every case once
            for case in CASES:
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--case",
                        case,
                        "--url",
                        url,
                        "--events",
                        str(args.events),
                        "--pods",
                        str(args.pods),
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                    env={**os.environ},
                ).stdout
                runs[case].append(json.loads(out.strip().splitlines()[-1])["seconds"])
        median = {case: statistics.median(seconds) for case, seconds in runs.items()}
        for case, seconds in runs.items():
            shown = ", ".join(f"{s:.3f}" for s in seconds)
            print(f"  {case}: [{shown}] -> median {median[case]:.3f} s", file=sys.stderr)
    finally:
        server.terminate()
        server.wait()
    _print_table(median, args.events, args.pods, args.repeat)


def _print_table(median: dict[str, float], events: int, pods: int, repeat: int) -> None:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(
        f"\nMachine: {machine}; medians of {repeat} interleaved runs; "
        "Pods of ~5 KB JSON with managedFields.\n"
    )
    header = ["measure", "bare aiohttp+msgspec", "kubereflector", "official client"]
    print("| " + " | ".join([*header, "ours / bare", "ours vs official"]) + " |")
    print("|" + "---|" * (len(header) + 2))
    rate = {k: events / median[f"watch-{k}"] for k in ("bare", "kubereflector", "official")}
    cells = [f"{rate[k]:,.0f}" for k in ("bare", "kubereflector", "official")]
    ratios = [f"{rate['kubereflector'] / rate['bare']:.2f}"]
    ratios.append(f"{rate['kubereflector'] / rate['official']:.1f}x")
    print(f"| watch stream, {events:,} events (events/s) | " + " | ".join(cells + ratios) + " |")
    took = {k: median[f"list-{k}"] for k in ("bare", "kubereflector", "official")}
    cells = [f"{took[k]:.2f}" for k in ("bare", "kubereflector", "official")]
    ratios = [f"{took['bare'] / took['kubereflector']:.2f}"]
    ratios.append(f"{took['official'] / took['kubereflector']:.1f}x")
    label = f"initial list, {pods:,} pods, pages of 500 (s; at RV 0, official: at the newest)"
    print(f"| {label} | " + " | ".join(cells + ratios) + " |")


if __name__ == "__main__":
    main()
