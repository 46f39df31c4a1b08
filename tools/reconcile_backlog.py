"""Kubernetes' sample-controller on kubereflector.runtime, counting what the initial backlog
costs: reconciles per object, 409 Conflicts, echoes skipped, read-your-own-writes waits.

The workload of issue 25: N Foos exist before the controller starts, and
``examples/foo_controller.py`` reconciles them: each reconcile reads its Foo from the
cache, applies the Foo's Deployment (owned by it; server-side apply) and patches
``status.availableReplicas`` and its ``Ready`` condition through the status subresource
when they changed, two workers, as sample-controller's ``threadiness``. With
``--coroutine``, issue 25's port instead: it creates the Deployment when the cache has
none, updates it when the replicas differ and writes the status with ``update_status``
(conditional on the resourceVersion read, as sample-controller's ``UpdateStatus``). The
run ends once every Foo has its Deployment and its status and no reconcile happened for
``--settle`` seconds.

``--mode before`` runs the runtime as it was (echoes of the controller's own writes
queue their request again, no read-your-own-writes); ``after`` as it is now; ``both``
runs one then the other, on fresh objects each time, and prints both rows. This is a
count, not a timing benchmark (the seconds are printed for the record only)::

    python tools/reconcile_backlog.py --foos 2000                       # the emulator
    python tools/reconcile_backlog.py --foos 2000 --coroutine           # issue 25's port
    python tools/reconcile_backlog.py --foos 2000 --kubeconfig ~/.kube/config

Against a cluster it works in a fresh namespace it deletes afterwards, and creates the
Foo CRD if it is missing (and leaves it). Without a deployment controller (a bare
kube-apiserver) Deployments have no status: every Foo gets ``availableReplicas: 0``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import importlib.util
import logging
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from prometheus_client.parser import text_string_to_metric_families

from kubereflector.client import Client, load_config
from kubereflector.errors import AlreadyExistsError, ConflictError, NotFoundError
from kubereflector.models import Deployment
from kubereflector.models.crd import crd_manifest, custom_resource_of
from kubereflector.runtime import (
    ControllerOptions,
    Manager,
    Request,
    TerminalError,
    is_controlled_by,
)


def _load_example() -> ModuleType:
    """examples/foo_controller.py, imported once under its own name (the example is a
    program, not a package: its annotations resolve in its module)."""
    path = Path(__file__).resolve().parents[1] / "examples" / "foo_controller.py"
    spec = importlib.util.spec_from_file_location("foo_controller", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["foo_controller"] = module
    spec.loader.exec_module(module)
    return module


_example = _load_example()
Foo, GROUP, NAME, deployment_for = (
    _example.Foo,
    _example.GROUP,
    _example.NAME,
    _example.deployment_for,
)
FOO_CRD, FOOS = crd_manifest(Foo), custom_resource_of(Foo).name


def add_to(manager: Manager, *, options: ControllerOptions) -> None:
    """The example's reconciler."""
    _example.add_controller(manager, options)


def add_coroutine_to(manager: Manager, *, options: ControllerOptions) -> None:
    """Issue 25's port of sample-controller's reconcile, a coroutine on the manager's
    loop: create, update, and a resourceVersion-conditional ``update_status``."""
    events = manager.event_recorder(NAME)

    @manager.reconciler(Foo, owns=[Deployment], options=options, name=NAME)
    async def sync(request: Request) -> None:
        foo = manager.lister_for(Foo).namespaced(request.namespace).get(request.name)
        if foo is None:
            return
        name = foo["spec"]["deploymentName"]
        deployments = manager.client.resource(Deployment, namespace=request.namespace)
        deployment = manager.lister_for(Deployment).namespaced(request.namespace).get(name)
        if deployment is None:
            deployment = await deployments.create(deployment_for(foo))
        if not is_controlled_by(deployment, foo):
            raise TerminalError(f"Resource {name!r} already exists and is not managed by Foo")
        if deployment["spec"].get("replicas") != foo["spec"].get("replicas", 1):
            deployment = await deployments.update(deployment_for(foo))
        updated = copy.deepcopy(foo)
        updated["status"] = {
            "availableReplicas": deployment.get("status", {}).get("availableReplicas", 0)
        }
        await manager.client.resource(Foo, namespace=request.namespace).update_status(updated)
        events.record(foo, "Normal", "Synced", "Foo synced successfully")


@dataclass
class Row:
    mode: str
    foos: int
    reconciles: int
    conflicts: int
    stale: int
    echoes: int
    waits: int
    seconds: float

    def cells(self) -> list[str]:
        return [
            self.mode,
            str(self.foos),
            str(self.reconciles),
            f"{self.reconciles / self.foos:.3f}",
            str(self.conflicts),
            str(self.stale),
            str(self.echoes),
            str(self.waits),
            f"{self.seconds:.1f}",
        ]


HEADER = ["mode", "foos", "reconciles", "per foo", "409s", "stale", "echoes", "waits", "s"]


async def ensure_crd(client: Client) -> None:
    crds = client.resource("customresourcedefinitions.apiextensions.k8s.io")
    with contextlib.suppress(AlreadyExistsError):
        await crds.create(FOO_CRD)
    for _ in range(100):  # established: discovery serves it
        with contextlib.suppress(Exception):
            await client.discovery.resolve(FOOS)
            return
        client.discovery.invalidate()
        await asyncio.sleep(0.1)
    raise RuntimeError("the Foo CRD was not established within 10 s")


async def create_foos(client: Client, namespace: str, count: int) -> None:
    foos = client.resource(FOOS, namespace=namespace)
    limit = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with limit:
            await foos.create(
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "Foo",
                    "metadata": {"name": f"foo-{i}"},
                    "spec": {"deploymentName": f"foo-{i}-nginx", "replicas": 1},
                }
            )

    await asyncio.gather(*(one(i) for i in range(count)))


def reconciled(manager: Manager) -> int:
    """Reconciles of the Foo controller so far, whatever their result."""
    return int(
        sum(
            sample.value
            for family in text_string_to_metric_families(manager.metrics.exposition().decode())
            for sample in family.samples
            if sample.name == "controller_runtime_reconcile_total"
            and sample.labels.get("controller") == NAME
        )
    )


async def run_once(client: Client, namespace: str, args: argparse.Namespace, mode: str) -> Row:
    await create_foos(client, namespace, args.foos)
    before = mode == "before"
    manager = Manager(
        client,
        namespace=namespace,
        read_your_writes_timeout=None if before else 10.0,
    )
    options = ControllerOptions(max_concurrent_reconciles=2, requeue_on_own_writes=before)
    (add_coroutine_to if args.coroutine else add_to)(manager, options=options)

    started = time.monotonic()
    async with manager:
        task = asyncio.create_task(manager.run(handle_signals=False))
        foos = manager.informer_for(FOOS)
        deployments = manager.informer_for("deployments.apps")
        reconciles, last_reconcile = 0, time.monotonic()
        while True:
            await asyncio.sleep(0.2)
            if task.done():
                task.result()
            now = reconciled(manager)
            if now != reconciles:
                reconciles, last_reconcile = now, time.monotonic()
            done = sum(1 for f in foos.indexer.list() if "status" in f)
            if (
                done == args.foos
                and len(deployments.indexer.list()) == args.foos
                and time.monotonic() - last_reconcile >= args.settle
            ):
                break
        seconds = time.monotonic() - started - args.settle
        reconciles = reconciled(manager)
        manager.stop()
        await task
        metrics = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(manager.metrics.exposition().decode())
            for sample in family.samples
        }
    label = (("controller", NAME),)
    ledger = manager.own_writes
    return Row(
        mode=mode,
        foos=args.foos,
        reconciles=reconciles,
        conflicts=int(metrics.get(("kubereflector_reconcile_conflicts_total", label), 0)),
        stale=int(metrics.get(("kubereflector_reconcile_stale_reads_total", label), 0)),
        echoes=ledger.echoes if ledger is not None else 0,
        waits=ledger.waits if ledger is not None else 0,
        seconds=seconds,
    )


@contextlib.asynccontextmanager
async def target(kubeconfig: str | None) -> AsyncIterator[Client]:
    if kubeconfig is None:
        from kubereflector.testing import ApiServerEmulator

        async with (
            ApiServerEmulator() as emulator,
            Client(load_config(emulator.kubeconfig_path)) as client,
        ):
            yield client
        return
    async with Client(load_config(kubeconfig)) as client:
        yield client


@contextlib.asynccontextmanager
async def fresh_namespace(client: Client) -> AsyncIterator[str]:
    name = f"kr-sample-{uuid.uuid4().hex[:8]}"
    namespaces = client.resource("namespaces")
    await namespaces.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        with contextlib.suppress(NotFoundError):
            await namespaces.delete(name)


async def main_async(args: argparse.Namespace) -> list[Row]:
    rows = []
    modes = ["before", "after"] if args.mode == "both" else [args.mode]
    async with target(args.kubeconfig) as client:
        await ensure_crd(client)
        for mode in modes:
            async with fresh_namespace(client) as namespace:
                rows.append(await run_once(client, namespace, args, mode))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="a cluster (default: the emulator, in process)")
    parser.add_argument("--foos", type=int, default=2000)
    parser.add_argument("--mode", choices=["before", "after", "both"], default="both")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds without reconciles")
    parser.add_argument(
        "--coroutine",
        action="store_true",
        help="issue 25's port: create, update, update_status (default: the example's)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    try:
        rows = asyncio.run(main_async(args))
    except ConflictError as err:  # pragma: no cover - a setup write lost a race
        print(f"setup failed: {err}", file=sys.stderr)
        return 1
    widths = [max(len(h), *(len(r.cells()[i]) for r in rows)) for i, h in enumerate(HEADER)]
    print("  ".join(h.rjust(w) for h, w in zip(HEADER, widths, strict=True)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row.cells(), widths, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
