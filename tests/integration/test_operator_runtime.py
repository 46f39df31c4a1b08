"""The operator author's runtime against the target (the emulator, or a real cluster):
read-your-own-writes (also under a slowed watch, on the emulator), the sample-controller
example's initial backlog, the write helpers, the Manager's event recorder from plain
threads and run_sync(), its informer options, its write observers and /readyz for a
stale watch."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import pytest
from conftest import KUBECONFIG_ENV, Target
from prometheus_client.parser import text_string_to_metric_families

from kubereflector import CompactObject, ResourceEventHandlerFuncs, wait_for_cache_sync
from kubereflector.client import ClientConfig, ResourceInfo, load_config
from kubereflector.runtime import (
    ControllerOptions,
    InformerOptions,
    Manager,
    OperationResult,
    Request,
    Result,
    apply,
    create_or_patch,
    create_or_update,
)

pytestmark = pytest.mark.asyncio

WAIT = 30.0
"""Upper bound (seconds) on any wait; never reached when things work."""
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def config_of(target: Target) -> ClientConfig:
    if target.emulator is not None:
        return load_config(target.emulator.kubeconfig_path)
    return load_config(os.environ[KUBECONFIG_ENV])


def manager_of(target: Target, **kwargs: Any) -> Manager:
    return Manager(
        config_of(target), namespace=target.namespace, bind_address="127.0.0.1", **kwargs
    )


@contextlib.asynccontextmanager
async def running(manager: Manager) -> AsyncIterator[None]:
    async with manager:
        task = asyncio.create_task(manager.run(handle_signals=False))
        try:
            yield
        finally:
            manager.stop()
            await asyncio.wait_for(task, WAIT)


class Changes:
    """Something that may have changed (``touch``, from the loop); ``until`` waits on
    the touches, with a timeout, for a condition to hold."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def touch(self, *_: object) -> None:
        self._changed.set()

    async def touched(self, *_: object) -> None:
        self._changed.set()

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        async def wait() -> None:
            while not condition():
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(wait(), WAIT)
        except asyncio.TimeoutError:  # not TimeoutError before Python 3.11
            raise AssertionError(f"timed out waiting until {what}") from None


def counter(manager: Manager, name: str, **labels: str) -> float:
    text = manager.metrics.exposition().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def cm(name: str, namespace: str, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        **fields,
    }


# -- read your own writes -----------------------------------------------------------------


async def creates_once(target: Target) -> None:
    """A reconcile that creates a child when the cache has none and asks to run again at
    once: the second run sees the child (it waited for the cache), no second create."""
    manager = manager_of(target)
    runs: list[bool] = []
    creates = 0
    changes = Changes()

    @manager.reconciler("configmaps", name="parents")
    async def reconcile(request: Request) -> Result | None:
        nonlocal creates
        if request.name != "parent":
            return None
        cache = manager.lister_for("configmaps").namespaced(request.namespace)
        child = cache.get("child")
        runs.append(child is not None)
        changes.touch()
        if child is None:
            creates += 1
            api = manager.client.resource("configmaps", namespace=request.namespace)
            await api.create(cm("child", request.namespace))
        return Result(requeue_after=0) if len(runs) == 1 else None

    await target.client.create(
        f"/api/v1/namespaces/{target.namespace}/configmaps", cm("parent", target.namespace)
    )
    async with running(manager):
        await changes.until(lambda: len(runs) >= 2, "the second reconcile of the parent")
    assert runs[:2] == [False, True]
    assert creates == 1


async def test_a_reconcile_that_creates_and_runs_again_at_once_creates_once(
    target: Target,
) -> None:
    await creates_once(target)


async def test_the_same_under_a_slowed_watch(target: Target) -> None:
    """Every watch event a quarter second late: the cache trails the writes for a
    while, the reconcile waits for it instead of creating twice."""
    target.faults().slow_streams(0.25)
    await creates_once(target)


def load(name: str) -> ModuleType:
    """The example ``name``, imported once (its custom resource is declared once, and its
    annotations resolve in its module, which must be in ``sys.modules``)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(120)
async def test_the_foo_controller_reconciles_each_foo_once_without_conflicts(
    target: Target,
) -> None:
    """Issue 25's workload, small, on examples/foo_controller.py: Foos that exist before
    the controller starts, each gets its Deployment and its status in about one
    reconcile, with no conflict."""
    example = load("foo_controller")
    foos_name = f"foos.{example.GROUP}"
    # As the program's --install does (a real server may have an older Foo CRD).
    await asyncio.wait_for(example.install_crd(target.client), WAIT)
    target.client.discovery.invalidate()
    foos = target.client.resource(foos_name, namespace=target.namespace)
    count = 20
    for i in range(count):
        await foos.create(
            {
                "apiVersion": f"{example.GROUP}/v1",
                "kind": "Foo",
                "metadata": {"name": f"foo-{i}"},
                "spec": {"deploymentName": f"foo-{i}-nginx", "replicas": 1},
            }
        )
    manager = manager_of(target)
    example.add_controller(manager)
    changes = Changes()
    async with running(manager):
        informer = manager.informer_for(foos_name)
        informer.add_event_handler(
            ResourceEventHandlerFuncs(
                on_add=changes.touched, on_update=changes.touched, on_delete=changes.touched
            )
        )
        await changes.until(
            lambda: sum(1 for f in informer.indexer.list() if "status" in f) == count,
            "every Foo has its status",
        )
        deployments = await target.client.resource(
            "deployments.apps", namespace=target.namespace
        ).list()
        assert len(deployments.items) == count
        # Anything the backlog still queued comes before a change made now (one priority,
        # first-come first-served): once that change is reconciled and the queue drained,
        # nothing else is left.
        deployments_cache = manager.informer_for("deployments.apps")
        deployments_cache.add_event_handler(ResourceEventHandlerFuncs(on_update=changes.touched))
        await foos.patch("foo-0", {"spec": {"replicas": 2}})
        sentinel = f"{target.namespace}/foo-0-nginx"
        await changes.until(
            lambda: (deployments_cache.indexer.get_by_key(sentinel) or {})["spec"]["replicas"] == 2,
            "the sentinel's Deployment scaled",
        )
        (controller,) = manager.controllers
        await asyncio.wait_for(controller.queue.shut_down_with_drain(), WAIT)
        reconciles = counter(manager, "controller_runtime_reconcile_total", controller=example.NAME)
        conflicts = counter(
            manager, "kubereflector_reconcile_conflicts_total", controller=example.NAME
        )
    assert count <= reconciles - 1 <= 1.1 * count  # the sentinel's reconcile aside
    assert conflicts == 0
    events = await target.client.get(f"/apis/events.k8s.io/v1/namespaces/{target.namespace}/events")
    assert {e["reason"] for e in events["items"]} >= {"Synced"}


# -- the write helpers ---------------------------------------------------------------------


async def test_create_or_update_create_or_patch_and_apply_on_the_server(target: Target) -> None:
    api = target.client.resource("configmaps", namespace=target.namespace)

    def data(**values: str) -> Callable[[dict[str, Any]], None]:
        def mutate(obj: dict[str, Any]) -> None:
            obj["data"] = dict(values)

        return mutate

    wanted = cm("a", target.namespace)
    assert (await create_or_update(api, wanted, data(k="v")))[0] is OperationResult.CREATED
    assert (await create_or_update(api, wanted, data(k="v")))[0] is OperationResult.NONE
    result, updated = await create_or_update(api, wanted, data(k="w"))
    assert result is OperationResult.UPDATED
    assert updated["data"] == {"k": "w"}
    result, patched = await create_or_patch(api, wanted, data(k="x"))
    assert result is OperationResult.UPDATED
    assert patched["data"] == {"k": "x"}
    assert (await create_or_patch(api, wanted, data(k="x")))[0] is OperationResult.NONE
    # apply: the field manager owns what it sent.
    applied = await apply(api, cm("b", target.namespace, data={"k": "v"}), field_manager="shop")
    managers = {f["manager"] for f in applied["metadata"]["managedFields"]}
    assert "shop" in managers


async def test_apply_in_a_reconcile_is_the_controllers_field_manager(target: Target) -> None:
    manager = manager_of(target)
    applied: list[dict[str, Any]] = []
    changes = Changes()

    @manager.reconciler("configmaps", name="shop-operator")
    async def reconcile(request: Request) -> None:
        if request.name != "source" or applied:
            return
        api = manager.client.resource("configmaps", namespace=request.namespace)
        applied.append(await apply(api, cm("applied", request.namespace, data={"k": "v"})))
        changes.touch()

    await target.client.create(
        f"/api/v1/namespaces/{target.namespace}/configmaps", cm("source", target.namespace)
    )
    async with running(manager):
        await changes.until(lambda: bool(applied), "the apply")
    assert [f["manager"] for f in applied[0]["metadata"]["managedFields"]] == ["shop-operator"]


async def test_write_observers_are_told_of_each_accepted_write(target: Target) -> None:
    seen: list[tuple[str, str | None, str, bool]] = []

    class Observer:
        def written(
            self,
            resource: ResourceInfo,
            verb: str,
            namespace: str | None,
            name: str,
            result: Any,
        ) -> None:
            rv = result.get("metadata", {}).get("resourceVersion")
            seen.append((verb, namespace, name, bool(rv) or verb == "delete"))

    target.client.write_observers.append(Observer())
    ns = target.namespace
    api = target.client.resource("configmaps", namespace=ns)
    await api.create(cm("a", ns), dry_run=True)  # not stored: not told
    created = await api.create(cm("a", ns))
    await api.update(created | {"data": {"k": "v"}})
    await api.patch("a", {"data": {"k": "w"}})
    await api.apply(cm("a", ns, data={"k": "x"}), field_manager="t", force=True)
    await api.delete("a")
    await target.client.resource("namespaces").get(ns)  # a read: not told
    assert seen == [
        ("create", ns, "a", True),
        ("update", ns, "a", True),
        ("patch", ns, "a", True),
        ("apply", ns, "a", True),
        ("delete", ns, "a", True),
    ]


# -- the Manager ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
async def test_event_recorder_from_a_plain_reconciler_under_run_sync(target: Target) -> None:
    """The README's pattern: everything made beside the Manager, no event loop in
    sight, a plain-function reconciler recording Events."""
    manager = manager_of(target)
    recorder = manager.event_recorder("plain-operator")
    assert manager.event_recorder("plain-operator") is recorder
    recorder.record(cm("early", target.namespace), "Normal", "Early", "recorded before the run")
    reconciled = threading.Event()

    def reconcile(request: Request) -> None:
        if request.name == "watched":
            obj = manager.lister_for("configmaps").namespaced(request.namespace).get("watched")
            recorder.record(obj, "Normal", "Seen", "seen by a plain reconciler")
            reconciled.set()

    manager.reconciler("configmaps", reconcile=reconcile)
    await target.client.create(
        f"/api/v1/namespaces/{target.namespace}/configmaps", cm("watched", target.namespace)
    )
    thread = threading.Thread(target=manager.run_sync, kwargs={"handle_signals": False})
    thread.start()
    try:
        assert await asyncio.to_thread(reconciled.wait, WAIT)
    finally:
        manager.stop()
        await asyncio.to_thread(thread.join, WAIT)
    assert not thread.is_alive()
    events = await target.client.get(f"/apis/events.k8s.io/v1/namespaces/{target.namespace}/events")
    reasons = {(e["reason"], e["reportingController"]) for e in events["items"]}
    assert {("Early", "plain-operator"), ("Seen", "plain-operator")} <= reasons


async def test_informer_options_reach_the_managers_informers(target: Target) -> None:
    def without_annotations(obj: Any) -> Any:
        if isinstance(obj, dict):
            obj.get("metadata", {}).pop("annotations", None)
        return obj

    await target.client.create(
        f"/api/v1/namespaces/{target.namespace}/configmaps",
        {"metadata": {"name": "a", "annotations": {"x": "y"}}, "data": {"k": "v"}},
    )
    manager = manager_of(
        target, informers=InformerOptions(object_mode="compact", transform=without_annotations)
    )
    seen: list[Any] = []
    changes = Changes()

    @manager.reconciler("configmaps")
    async def reconcile(request: Request) -> None:
        seen.append(manager.lister_for("configmaps").namespaced(request.namespace).get("a"))
        changes.touch()

    async with running(manager):
        await changes.until(lambda: bool(seen), "a reconcile")
    assert isinstance(seen[0], CompactObject)
    assert seen[0]["data"] == {"k": "v"}
    with pytest.raises(TypeError, match="InformerOptions"):
        manager_of(target, informers={"object_mode": "compact"})  # type: ignore[arg-type]


async def test_readyz_fails_while_a_watch_has_not_heard_from_the_server(target: Target) -> None:
    async def readyz(manager: Manager) -> tuple[int, str]:
        assert manager.health_url is not None
        async with (
            aiohttp.ClientSession() as session,
            session.get(manager.health_url + "/readyz?verbose") as resp,
        ):
            return resp.status, await resp.text()

    async def synced(manager: Manager) -> None:
        await manager.wait_elected()  # the controllers start once the caches synced
        informer = manager.informer_for("configmaps")
        assert await wait_for_cache_sync(informer, timeout=WAIT)

    manager = manager_of(target, health_port=0)
    manager.reconciler("configmaps", reconcile=lambda request: None)
    async with running(manager):
        await synced(manager)
        assert (await readyz(manager))[0] == 200
    # A threshold the silence of a quiet resource passes at once: not ready.
    manager = manager_of(target, health_port=0, stale_watch_threshold=1e-6)
    manager.reconciler("configmaps", reconcile=lambda request: None)
    async with running(manager):
        await synced(manager)
        status, body = 200, ""
        while status == 200:
            status, body = await readyz(manager)
        assert status == 500
        assert "watches" in body
    with pytest.raises(ValueError, match="stale_watch_threshold"):
        manager_of(target, stale_watch_threshold=0)


async def test_requeue_on_own_writes_keeps_controller_runtimes_behaviour(target: Target) -> None:
    manager = manager_of(target)
    calls: list[str] = []
    changes = Changes()

    @manager.reconciler(
        "configmaps", options=ControllerOptions(requeue_on_own_writes=True), name="echoing"
    )
    async def reconcile(request: Request) -> None:
        calls.append(request.name)
        changes.touch()
        if calls.count(request.name) == 1:
            api = manager.client.resource("configmaps", namespace=request.namespace)
            await api.patch(request.name, {"data": {"touched": "yes"}})

    await target.client.create(
        f"/api/v1/namespaces/{target.namespace}/configmaps", cm("a", target.namespace)
    )
    async with running(manager):
        await changes.until(lambda: calls.count("a") == 2, "the echo's reconcile")
