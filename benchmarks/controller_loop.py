"""The controller's hot loop: Kubernetes' sample-controller reconcile on kubereflector.runtime,
beside a bare asyncio loop that makes the same HTTP requests with the same concurrency.

    .venv/bin/python benchmarks/controller_loop.py [--kubeconfig PATH] [--foos 400]
        [--workers 1,2,4,8,16,32] [--repeat 3] [--first-foos 3000]

The servers: the ``ApiServerEmulator`` in its own process (HTTPS and a token, as a
cluster is), then, with ``--kubeconfig``, that cluster (a real kube-apiserver). A ``Foo``
CRD (``loop.bench.kubereflector.io/v1``, a status subresource) is installed once. Every
run gets a fresh namespace with ``--foos`` Foos, created before its process starts, and
deleted after it (Foos, Deployments, Events, then the namespace). Each case runs in a
process of its own, imports done before the clock starts; cases are interleaved over
``--repeat`` rounds and the best run is kept.

1. **Reconciles per second and CPU per reconcile**, at each of ``--workers``. The
   reconcile is k8s.io/sample-controller's ``syncHandler``: read the Foo from the cache,
   read its Deployment from the cache and create it (owned by the Foo) when missing,
   update the Foo's status through the status subresource (an update conditional on the
   resourceVersion read), record a ``Synced`` Event.

   - **runtime**: a ``Manager`` with ``reconciler(Foo, owns=[Deployment])`` and
     ``max_concurrent_reconciles`` workers, coroutine reconciles, the manager's event
     recorder; timed from the first reconcile's start until every Foo has been
     reconciled once and the recorder has written every Event. Everything the runtime
     does meanwhile counts: the watch events of its own writes, echo suppression,
     read-your-own-writes, the queue.
   - **bare**: one aiohttp session, the Foos listed once (untimed: the runtime's cache
     holds them too), then the same three writes per Foo (POST the Deployment, PUT the
     status, POST the Event, bodies built the same way, responses decoded with msgspec)
     under an ``asyncio.Semaphore`` of the same size; timed from the first request to the
     last answer. No cache, no watch, no queue: the floor of this workload's client side.
     (The runtime's recorder writes Events in the background, as client-go's broadcaster
     does, so they overlap the next reconcile; the bare loop awaits each.)

   Target: runtime at least 0.8 of bare at every concurrency. Also printed: reconciles run per
   Foo (1.00 when no write of its own queues a Foo again), and, over the same window, the
   CPU the whole machine spent per reconcile (client, server and anything else) and how
   busy its cores were: where they are all busy, the rate is the machine's CPU divided by
   that figure, and the server's share of it (its work for the runtime's watches
   included) counts as much as the client's.

2. **Start to the first reconcile** with ``--first-foos`` Foos (default 3000): a fresh
   process (imports done) from ``Manager(...)`` until its first reconcile starts, with
   the informers' initial sync by a paginated list and by a watch-list stream
   (``ReflectorOptions(use_watch_list=...)``; target ≤ 0.5 s on the real server).

Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from typing_extensions import NotRequired, TypedDict

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import busy_fraction, machine, machine_cpu  # noqa: E402

from kubereflector.models import Deployment  # noqa: E402
from kubereflector.models.crd import crd_manifest, custom_resource  # noqa: E402
from kubereflector.models.meta_v1 import ObjectMeta  # noqa: E402

GROUP = "loop.bench.kubereflector.io"
FOOS = f"foos.{GROUP}"
TARGET = 0.8
FIRST_RECONCILE_TARGET = 0.5


class FooSpec(TypedDict):
    deploymentName: str
    replicas: NotRequired[int]


class FooStatus(TypedDict):
    availableReplicas: int


@custom_resource(group=GROUP, version="v1")
class Foo(TypedDict):
    """sample-controller's Foo."""

    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: FooSpec
    status: NotRequired[FooStatus]


def foo(name: str) -> Foo:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Foo",
        "metadata": {"name": name},
        "spec": {"deploymentName": f"{name}-nginx", "replicas": 1},
    }


def deployment_for(foo: Foo) -> Deployment:
    """sample-controller's newDeployment, its owner reference written out (the bare loop
    builds the same body)."""
    meta = foo["metadata"]
    labels = {"app": "nginx", "controller": meta["name"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": foo["spec"]["deploymentName"],
            "namespace": meta["namespace"],
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "Foo",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": foo["spec"].get("replicas", 1),
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
            },
        },
    }


def with_status(foo: Foo) -> Foo:
    updated = dict(foo)
    updated["status"] = {"availableReplicas": 0}
    return updated  # type: ignore[return-value]


# -- the cases, each in a process of its own -----------------------------------------------------


async def runtime_case(kubeconfig: str, namespace: str, foos: int, workers: int) -> dict[str, Any]:
    from kubereflector.client import load_config
    from kubereflector.runtime import ControllerOptions, Manager, Request

    manager = Manager(load_config(kubeconfig), namespace=namespace)
    events = manager.event_recorder("loop-bench")
    seen: set[str] = set()
    all_seen = asyncio.Event()
    marks: dict[str, float] = {}
    machine_marks: list[tuple[int, int] | None] = []
    reconciles = 0

    @manager.reconciler(
        Foo,
        owns=[Deployment],
        name="foo",
        options=ControllerOptions(max_concurrent_reconciles=workers),
    )
    async def sync(request: Request) -> None:
        nonlocal reconciles
        if not marks:
            marks["start"], marks["cpu"] = time.perf_counter(), time.process_time()
            machine_marks.append(machine_cpu())
        reconciles += 1
        obj = manager.lister_for(Foo).namespaced(namespace).get(request.name)
        if obj is None:
            return
        name = obj["spec"]["deploymentName"]
        if manager.lister_for(Deployment).namespaced(namespace).get(name) is None:
            await manager.client.resource(Deployment, namespace=namespace).create(
                deployment_for(obj)
            )
        await manager.client.resource(Foo, namespace=namespace).update_status(with_status(obj))
        events.record(obj, "Normal", "Synced", "Foo synced successfully")
        seen.add(request.name)
        if len(seen) == foos:
            all_seen.set()

    async with manager:
        task = asyncio.create_task(manager.run(handle_signals=False))
        await asyncio.wait_for(all_seen.wait(), 600)
        await events.flush()
        end, cpu = time.perf_counter(), time.process_time()
        machine_marks.append(machine_cpu())
        counted = reconciles
        manager.stop()
        await task
    return {
        "seconds": end - marks["start"],
        "cpu_per_reconcile": (cpu - marks["cpu"]) / foos,
        "reconciles_per_foo": counted / foos,
        **_machine_share(machine_marks[0], machine_marks[1], foos),
    }


def _machine_share(
    before: tuple[int, int] | None, after: tuple[int, int] | None, foos: int
) -> dict[str, float | None]:
    """How busy the machine's cores were between two readings, and the CPU every process
    (this one, the server, anything else running) spent per reconcile meanwhile."""
    if before is None or after is None:
        return {"busy": None, "machine_cpu_per_reconcile": None}
    seconds = (after[0] - before[0]) / os.sysconf("SC_CLK_TCK")
    return {"busy": busy_fraction(before, after), "machine_cpu_per_reconcile": seconds / foos}


async def _session(kubeconfig: str) -> Any:
    import aiohttp

    from kubereflector.client import load_config

    config = load_config(kubeconfig)
    context = ssl.create_default_context()
    if config.ca_data:
        context.load_verify_locations(cadata=config.ca_data.decode())
    auth = await config.auth.authorize()
    session = aiohttp.ClientSession(
        base_url=config.server,
        connector=aiohttp.TCPConnector(ssl=context),
        headers={**auth.headers, "Content-Type": "application/json"},
    )
    return session


async def bare_case(kubeconfig: str, namespace: str, foos: int, workers: int) -> dict[str, Any]:
    import msgspec

    encode, decode = msgspec.json.encode, msgspec.json.decode
    foos_path = f"/apis/{GROUP}/v1/namespaces/{namespace}/foos"
    deployments_path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    events_path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    async with await _session(kubeconfig) as session:
        async with session.get(foos_path) as response:
            response.raise_for_status()
            items = decode(await response.read())["items"]
        limit = asyncio.Semaphore(workers)

        async def write(method: str, path: str, body: object) -> object:
            async with session.request(method, path, data=encode(body)) as response:
                data = decode(await response.read())
                if response.status >= 300:
                    raise SystemExit(f"{method} {path}: {response.status} {data}")
                return data

        async def reconcile(obj: Foo) -> None:
            async with limit:
                name = obj["metadata"]["name"]
                await write("POST", deployments_path, deployment_for(obj))
                await write("PUT", f"{foos_path}/{name}/status", with_status(obj))
                await write("POST", events_path, _event(obj, namespace))

        start, cpu, machine_start = time.perf_counter(), time.process_time(), machine_cpu()
        await asyncio.gather(*(reconcile(obj) for obj in items))
        end, cpu_end, machine_end = time.perf_counter(), time.process_time(), machine_cpu()
    return {
        "seconds": end - start,
        "cpu_per_reconcile": (cpu_end - cpu) / foos,
        "reconciles_per_foo": 1.0,
        **_machine_share(machine_start, machine_end, foos),
    }


def _event(obj: Foo, namespace: str) -> dict[str, Any]:
    """The Event the runtime's recorder writes for the same call."""
    meta = obj["metadata"]
    now = time.time()
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{time.time_ns():x}", "namespace": namespace},
        "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
        + f".{int(now % 1 * 1e6):06d}Z",
        "reportingController": "loop-bench",
        "reportingInstance": "loop-bench-bare",
        "action": "Synced",
        "reason": "Synced",
        "regarding": {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Foo",
            "name": meta["name"],
            "namespace": namespace,
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
        },
        "note": "Foo synced successfully",
        "type": "Normal",
    }


async def first_reconcile_case(kubeconfig: str, namespace: str, watch_list: bool) -> dict[str, Any]:
    from kubereflector import ReflectorOptions
    from kubereflector.client import load_config
    from kubereflector.runtime import InformerOptions, Manager, Request

    start = time.perf_counter()
    informers = InformerOptions(reflector_options=ReflectorOptions(use_watch_list=watch_list))
    manager = Manager(load_config(kubeconfig), namespace=namespace, informers=informers)
    first = asyncio.Event()
    marks: dict[str, float] = {}

    @manager.reconciler(Foo, owns=[Deployment], name="foo")
    async def sync(request: Request) -> None:
        marks.setdefault("first", time.perf_counter())
        first.set()

    async with manager:
        task = asyncio.create_task(manager.run(handle_signals=False))
        await asyncio.wait_for(first.wait(), 600)
        manager.stop()
        await task
    return {"seconds": marks["first"] - start}


def _import_everything() -> None:
    """Imports are not what is measured: load what every case uses first."""
    import aiohttp  # noqa: F401
    import msgspec  # noqa: F401

    import kubereflector.runtime  # noqa: F401
    from kubereflector.client import Client  # noqa: F401


def run_case(case: str, kubeconfig: str, namespace: str, foos: int, workers: int) -> None:
    _import_everything()
    if case == "runtime":
        result = asyncio.run(runtime_case(kubeconfig, namespace, foos, workers))
    elif case == "bare":
        result = asyncio.run(bare_case(kubeconfig, namespace, foos, workers))
    else:
        watch_list = case == "first-watchlist"
        result = asyncio.run(first_reconcile_case(kubeconfig, namespace, watch_list))
    print(json.dumps(result), flush=True)


# -- the parent: the server, the namespaces, the table ------------------------------------------


@contextmanager
def emulator() -> Iterator[str]:
    """An emulator in its own process; yields its kubeconfig's path."""
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = os.path.join(tmp, "kubeconfig")
        command = [sys.executable, "-m", "kubereflector.testing.apiserver", "--port", "0"]
        process = subprocess.Popen(
            [*command, "--write-kubeconfig", kubeconfig, "--history-limit", "100000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert process.stdout is not None
            if not process.stdout.readline():
                raise SystemExit("the emulator did not start")
            yield kubeconfig
        finally:
            process.terminate()
            process.wait(30)


async def _install_crd(kubeconfig: str) -> None:
    from kubereflector import AlreadyExistsError
    from kubereflector.client import Client, load_config

    async with Client(load_config(kubeconfig)) as client:
        crds = client.resource("customresourcedefinitions.apiextensions.k8s.io")
        with suppress(AlreadyExistsError):
            await crds.create(crd_manifest(Foo))
        for _ in range(300):
            conditions = (await crds.get(FOOS)).get("status", {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return
            await asyncio.sleep(0.1)
        raise SystemExit(f"the CRD {FOOS} was not established")


async def _populate(kubeconfig: str, namespace: str, count: int) -> None:
    from kubereflector.client import Client, load_config

    async with Client(load_config(kubeconfig)) as client:
        await client.resource("namespaces").create({"metadata": {"name": namespace}})
        foos = client.resource(Foo, namespace=namespace)
        limit = asyncio.Semaphore(32)

        async def create(i: int) -> None:
            async with limit:
                await foos.create(foo(f"foo-{i:05d}"))

        await asyncio.gather(*(create(i) for i in range(count)))


async def _clean(kubeconfig: str, namespace: str) -> None:
    """Delete what a run made (no namespace controller runs beside a bare kube-apiserver:
    its namespace's objects would stay)."""
    from kubereflector.client import Client, load_config

    async with Client(load_config(kubeconfig)) as client:
        limit = asyncio.Semaphore(32)
        for resource in (Foo, Deployment, "events.events.k8s.io"):
            api = client.resource(resource, namespace=namespace)
            names = [item["metadata"]["name"] for item in (await api.list()).items]

            async def delete(name: str, api: Any = api) -> None:
                async with limit:
                    await api.delete(name)

            await asyncio.gather(*(delete(name) for name in names))
        await client.resource("namespaces").delete(namespace)


def run(kubeconfig: str, case: str, foos: int, workers: int = 0) -> dict[str, Any]:
    namespace = f"loop-{uuid.uuid4().hex[:8]}"
    asyncio.run(_populate(kubeconfig, namespace, foos))
    try:
        arguments = ["--case", case, "--kubeconfig", kubeconfig, "--namespace", namespace]
        out = subprocess.run(
            [sys.executable, __file__, *arguments, "--foos", str(foos), "--workers", str(workers)],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if out.returncode != 0:
            raise SystemExit(f"{case} ({workers} workers) failed:\n{out.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return result
    finally:
        asyncio.run(_clean(kubeconfig, namespace))


def measure(kubeconfig: str, args: argparse.Namespace, server: str) -> None:
    asyncio.run(_install_crd(kubeconfig))
    best: dict[tuple[str, int], dict[str, Any]] = {}
    for _ in range(args.repeat):
        for workers in args.workers:
            for case in ("runtime", "bare"):
                result = run(kubeconfig, case, args.foos, workers)
                key = (case, workers)
                if key not in best or result["seconds"] < best[key]["seconds"]:
                    best[key] = result
        for case in ("first-list", "first-watchlist"):
            result = run(kubeconfig, case, args.first_foos)
            if (case, 0) not in best or result["seconds"] < best[case, 0]["seconds"]:
                best[case, 0] = result
    print(f"\n{server}: {args.foos} Foos, sample-controller's reconcile, best of {args.repeat}")
    print(
        f"{'workers':>7} {'runtime/s':>10} {'bare/s':>8} {'ratio':>6} {'target':>7}"
        f" {'CPU µs/rec (rt, bare)':>22} {'machine CPU µs/rec':>19} {'cores busy':>11}"
        f" {'reconciles/Foo':>15}"
    )
    for workers in args.workers:
        rt, bare = best["runtime", workers], best["bare", workers]
        rate, bare_rate = args.foos / rt["seconds"], args.foos / bare["seconds"]
        ratio = rate / bare_rate
        cpu = f"{rt['cpu_per_reconcile'] * 1e6:.0f}, {bare['cpu_per_reconcile'] * 1e6:.0f}"
        whole = ", ".join(_micros(r.get("machine_cpu_per_reconcile")) for r in (rt, bare))
        busy = ", ".join(_percent(r.get("busy")) for r in (rt, bare))
        print(
            f"{workers:>7} {rate:>10.0f} {bare_rate:>8.0f} {ratio:>6.2f} {'≥ 0.8':>7}"
            f" {cpu:>22} {whole:>19} {busy:>11} {rt['reconciles_per_foo']:>15.2f}"
            + ("" if ratio >= TARGET else "  MISSED")
        )
    print(f"\nstart to the first reconcile, {args.first_foos} Foos (target ≤ 0.5 s):")
    for case, label in (("first-list", "paginated list"), ("first-watchlist", "watch-list")):
        seconds = best[case, 0]["seconds"]
        missed = "" if seconds <= FIRST_RECONCILE_TARGET else "  MISSED"
        print(f"  {label:<15} {seconds:6.3f} s{missed}")


def _micros(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e6:.0f}"


def _percent(fraction: float | None) -> str:
    return "n/a" if fraction is None else f"{fraction:.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="also a real cluster, after the emulator")
    parser.add_argument("--foos", type=int, default=400)
    parser.add_argument("--first-foos", type=int, default=3000)
    parser.add_argument(
        "--workers", type=lambda s: [int(w) for w in s.split(",")], default=[1, 2, 4, 8, 16, 32]
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        run_case(args.case, args.kubeconfig, args.namespace, args.foos, args.workers[0])
        return
    print(machine())
    with emulator() as kubeconfig:
        measure(kubeconfig, args, "emulator (not a real server)")
    if args.kubeconfig:
        measure(args.kubeconfig, args, "real kube-apiserver")


if __name__ == "__main__":
    main()
