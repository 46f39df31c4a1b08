"""A user's writes, async and blocking, as mypy --strict sees them: ResourceClient
and SyncClient give the same results, one awaited and one not; retry_on_conflict
types both. A resource named by a string gives KubeObject results (models give
typed ones: user_generics.py). Type-checked by test_typecheck.py, never run."""

from __future__ import annotations

from typing_extensions import assert_type

from kubereflector import (
    ConflictError,
    KubeObject,
    ListResult,
    StatusCause,
    SyncSharedInformerFactory,
)
from kubereflector.client import (
    Client,
    EventRecorder,
    ResourceClient,
    SyncClient,
    SyncResourceClient,
    load_config,
    retry_on_conflict,
)


async def async_writes(client: Client) -> None:
    deployments = client.resource("deploy", namespace="shop")
    assert_type(deployments, ResourceClient)
    web = await deployments.get("web")
    assert_type(web, KubeObject)
    everything = await deployments.list(label_selector="app=web")
    assert_type(everything, ListResult[KubeObject])

    async def scale() -> KubeObject:
        current = await deployments.get("web")
        current["spec"]["replicas"] = 3
        return await deployments.update(current)

    assert_type(await retry_on_conflict(scale), KubeObject)
    try:
        await deployments.apply({"metadata": {"name": "web"}}, field_manager="me")
    except ConflictError as err:
        assert_type(err.causes, tuple[StatusCause, ...])
    EventRecorder(client, "example.com/ctl").record(web, "Normal", "Scaled", "to 3")


def blocking_writes() -> None:
    with SyncClient(load_config()) as client:
        deployments = client.resource("deploy", namespace="shop")
        assert_type(deployments, SyncResourceClient)
        assert_type(deployments.get("web"), KubeObject)

        def scale() -> KubeObject:
            current = deployments.get("web")
            current["spec"]["replicas"] = 3
            return deployments.update(current)

        assert_type(retry_on_conflict(scale), KubeObject)
        recorder = EventRecorder(client, "example.com/ctl")
        recorder.record(deployments.get("web"), "Warning", "Failed", "no")
        assert_type(recorder.flush_blocking(timeout=5), bool)
    with SyncSharedInformerFactory(load_config()) as factory:
        assert_type(factory.sync_client(), SyncClient)
