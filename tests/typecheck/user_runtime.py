"""A user's operator on kubereflector.runtime, as mypy --strict sees it: the two
ways to run a Manager, reconcilers (coroutine and plain), predicates, the
finalizer helper, leader election and sharding. Type-checked by test_typecheck.py (never
run: it would need a cluster)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from typing_extensions import assert_type

from kubereflector import KubeObject
from kubereflector.client import ResourceClient, SyncResourceClient, load_config
from kubereflector.leaderelection import LeaderElector, LeaseLock, default_identity
from kubereflector.runtime import (
    LeaderElection,
    Manager,
    Request,
    Result,
    Sharding,
    ShardingStatus,
    TerminalError,
    and_,
    finalizer,
    finalizer_sync,
    generation_changed,
    label_selector,
)

manager = Manager(load_config(), leader_election=LeaderElection("my-operator"), metrics_port=8080)


@manager.reconciler("widgets.example.com", owns=["configmaps"], predicates=[generation_changed])
async def reconcile(request: Request) -> Result | None:
    assert_type(request.namespace, str)
    widget = (
        manager.lister_for("widgets.example.com").namespaced(request.namespace).get(request.name)
    )
    if widget is None:
        return None
    assert_type(widget, KubeObject)
    api = manager.client.resource("widgets.example.com", namespace=request.namespace)
    assert_type(api, ResourceClient)

    async def apply(obj: KubeObject) -> Result:
        if "spec" not in obj:
            raise TerminalError("a widget needs a spec")
        return Result(requeue_after=300)

    async def cleanup(obj: KubeObject) -> None:
        return None

    return await finalizer(api, "example.com/cleanup", widget, apply=apply, cleanup=cleanup)


# The decorator gives the function back, typed as it was.
still_a_coroutine_function: Callable[[Request], Coroutine[Any, Any, Result | None]] = reconcile


def reconcile_on_a_thread(request: Request) -> None:
    api = manager.sync_client.resource("configmaps", namespace=request.namespace)
    assert_type(api, SyncResourceClient)
    cm = api.get(request.name)

    def apply(obj: KubeObject) -> None:
        print(obj["metadata"]["name"])

    finalizer_sync(api, "example.com/cleanup", cm, apply=apply, cleanup=apply)


manager.reconciler(
    "configmaps",
    name="plain",
    predicates=[and_(label_selector("app=web"), generation_changed)],
    reconcile=reconcile_on_a_thread,
)


async def main() -> None:
    async with manager:
        await manager.run()


def main_on_threads() -> None:
    manager.run_sync()


async def lead_alone() -> None:
    async def work() -> None:
        print("leading")

    lock = LeaseLock(manager.client, namespace="default", name="x", identity=default_identity())
    elector = LeaderElector(lock, on_started_leading=work, release_on_cancel=True)
    await elector.run()
    assert_type(elector.is_leader(), bool)


def a_sharded_operator() -> Manager:
    """Replicas splitting the work: each reconciles the objects of its shards."""
    sharded = Manager(load_config(), sharding=Sharding(name="my-operator", shards=64))

    @sharded.reconciler("configmaps", owns=["configmaps"])
    async def reconcile_one(request: Request) -> None:
        return None

    coordinator = sharded.sharding
    if coordinator is not None:
        status = coordinator.status()
        assert_type(status, ShardingStatus)
        assert_type(status.held, frozenset[int])
        assert_type(coordinator.ready(), bool)
    return sharded
