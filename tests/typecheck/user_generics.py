"""A user's program typed with models all the way through, as mypy --strict sees it:
the informers, listers and handlers of a factory (async, sync and compact), the
client (async and blocking), a ListerWatcher, a custom resource's model and a
manager's reconciler. Names keep giving KubeObject. Type-checked by
test_typecheck.py, never run; the mistakes these types catch are in user_mistakes.py."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from typing_extensions import NotRequired, TypedDict, assert_type

from kubereflector import (
    DeletedFinalStateUnknown,
    FilteringResourceEventHandler,
    KubeObject,
    Lister,
    ListOptions,
    ListResult,
    NamespaceLister,
    Registration,
    ResourceEventHandlerDetailedFuncs,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    SharedInformerFactory,
    SyncSharedInformerFactory,
    WatchEvent,
    get_name,
)
from kubereflector.client import (
    Client,
    ResourceClient,
    ResourceListWatch,
    SyncClient,
    SyncResourceClient,
    load_config,
    retry_on_conflict,
)
from kubereflector.models import (
    ApiResource,
    ConfigMap,
    Deployment,
    Node,
    ObjectMeta,
    Pod,
    Secret,
    register,
)
from kubereflector.models.core_v1 import PodSpec
from kubereflector.runtime import Manager, Request, Result, enqueue_object, finalizer


class WidgetSpec(TypedDict):
    size: int
    color: NotRequired[str]


class Widget(TypedDict):
    """A custom resource's model: registered, it is a model like the built-ins."""

    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: WidgetSpec


register(Widget, ApiResource("example.com", "v1", "Widget", "widgets", namespaced=True))


def by_node(pod: Pod) -> list[str]:
    node = pod.get("spec", {}).get("nodeName")
    return [node] if node else []


def on_add(pod: Pod) -> None:
    print(pod["spec"]["containers"][0]["name"])


async def on_update(old: Pod, new: Pod) -> None:
    print(old.get("status", {}).get("phase"), new.get("status", {}).get("phase"))


def on_delete(obj: Pod | DeletedFinalStateUnknown[Pod]) -> None:
    pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
    if pod is not None:
        print(get_name(pod))


def on_add_detailed(deployment: Deployment, is_in_initial_list: bool) -> None:
    print(deployment["spec"].get("replicas", 1), is_in_initial_list)


def scheduled(obj: Pod | DeletedFinalStateUnknown[Pod]) -> bool:
    if isinstance(obj, DeletedFinalStateUnknown):
        return False
    return "nodeName" in obj.get("spec", {})


async def typed_informers(factory: SharedInformerFactory) -> None:
    pods = factory.informer_for(Pod)
    assert_type(pods, SharedIndexInformer[Pod])
    pods.add_indexers({"node": by_node})
    registration = pods.add_event_handler(
        ResourceEventHandlerFuncs(on_add=on_add, on_update=on_update, on_delete=on_delete)
    )
    assert_type(registration, Registration[Pod])
    pods.add_event_handler(
        FilteringResourceEventHandler(scheduled, ResourceEventHandlerFuncs(on_add=on_add))
    )
    deployments = factory.informer_for(Deployment)
    deployments.add_event_handler(ResourceEventHandlerDetailedFuncs(on_add=on_add_detailed))
    factory.start()
    await factory.wait_for_cache_sync(timeout=60, handlers=[registration])

    lister = factory.lister_for(Pod)
    assert_type(lister, Lister[Pod])
    assert_type(lister.list("app=web"), list[Pod])
    assert_type(lister.namespaced("shop"), NamespaceLister[Pod])
    web = lister.namespaced("shop").get("web")
    assert_type(web, Pod | None)
    if web is not None:
        assert_type(web["spec"], PodSpec)
        mine = copy.deepcopy(web)  # the cache's objects are shared: change a copy
        mine["metadata"]["labels"] = {"seen": "yes"}
    assert_type(pods.indexer.by_index("node", "node-1"), list[Pod])
    assert_type(factory.lister_for(Node).get("node-1"), Node | None)
    assert_type(factory.informer_for(Widget), SharedIndexInformer[Widget])
    for widget in factory.lister_for(Widget).list():
        assert_type(widget["spec"]["size"], int)

    # Names and ResourceInfos stay untyped.
    assert_type(factory.informer_for("pods"), SharedIndexInformer[KubeObject])
    assert_type(factory.lister_for("deploy"), Lister[KubeObject])
    assert_type(factory.informers(), dict[str, SharedIndexInformer[KubeObject]])


def typed_sync_informers() -> None:
    with SyncSharedInformerFactory(load_config(), object_mode="compact") as factory:
        # Compact objects are read-only mappings at run time, typed as the model for
        # reading (a write raises ReadOnlyObjectError).
        pods = factory.informer_for(Pod)
        assert_type(pods, SharedIndexInformer[Pod])
        pods.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add, on_delete=on_delete))
        factory.start()
        factory.wait_for_cache_sync(timeout=60)
        for pod in factory.lister_for(Pod).list():
            assert_type(pod.get("status", {}).get("podIP"), str | None)
        secrets = factory.sync_client().resource(Secret, namespace="shop")
        assert_type(secrets, SyncResourceClient[Secret])


async def typed_client(client: Client) -> None:
    pods = client.resource(Pod, namespace="shop")
    assert_type(pods, ResourceClient[Pod])
    web = await pods.get("web")
    assert_type(web, Pod)
    assert_type(await pods.list(label_selector="app=web"), ListResult[Pod])
    assert_type((await pods.list()).items, list[Pod])
    assert_type(await pods.list_page(ListOptions(limit=10)), ListResult[Pod])
    async with pods.watch() as events:
        async for event in events:
            assert_type(event, WatchEvent[Pod])
            if event.type != "ERROR":
                assert_type(event.object, Pod)
    created = await pods.create(
        {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
    )
    assert_type(created, Pod)
    assert_type(await pods.update(created), Pod)
    assert_type(await pods.update_status(created), Pod)
    assert_type(await pods.patch("web", {"metadata": {"labels": {"a": "b"}}}), Pod)
    assert_type(await pods.apply(created, field_manager="me"), Pod)
    assert_type(await pods.delete("web"), dict[str, Any])  # the object, or a Status

    deployments = client.resource(Deployment, namespace="shop")

    async def scale() -> Deployment:
        current = await deployments.get("web")
        current["spec"]["replicas"] = 3
        return await deployments.update(current)

    assert_type(await retry_on_conflict(scale), Deployment)
    widgets = client.resource(Widget, namespace="shop")
    assert_type(await widgets.create({"metadata": {"name": "w"}, "spec": {"size": 3}}), Widget)
    assert_type(client.resource("pods"), ResourceClient[KubeObject])
    assert_type(ResourceListWatch(client, Pod), ResourceListWatch[Pod])
    informer = SharedIndexInformer[Pod](ResourceListWatch(client, Pod, namespace="shop"))
    assert_type(informer.lister.list(), list[Pod])


def typed_blocking_client() -> None:
    with SyncClient(load_config()) as client:
        config_maps = client.resource(ConfigMap, namespace="shop")
        assert_type(config_maps, SyncResourceClient[ConfigMap])
        settings = config_maps.get("settings")
        assert_type(settings.get("data", {}), dict[str, str])
        assert_type(config_maps.list().items, list[ConfigMap])
        with config_maps.watch() as events:
            assert_type(events, Iterator[WatchEvent[ConfigMap]])
            for event in events:
                assert_type(event.object, ConfigMap)
        assert_type(config_maps.apply(settings, field_manager="me"), ConfigMap)
        assert_type(client.resource("cm"), SyncResourceClient[KubeObject])


manager = Manager(load_config())


@manager.reconciler(Widget, owns=[Deployment], watches=[(ConfigMap, enqueue_object)])
async def reconcile(request: Request) -> Result | None:
    widget = manager.lister_for(Widget).namespaced(request.namespace).get(request.name)
    if widget is None:
        return None
    assert_type(widget, Widget)
    assert_type(manager.informer_for(Deployment), SharedIndexInformer[Deployment])
    api = manager.client.resource(Widget, namespace=request.namespace)

    async def apply(obj: Widget) -> Result:
        deployments = manager.client.resource(Deployment, namespace=request.namespace)
        await deployments.apply(
            {
                "metadata": {"name": get_name(obj) or ""},
                "spec": {
                    "replicas": obj["spec"]["size"],
                    "selector": {"matchLabels": {"app": "widget"}},
                    "template": {"spec": {"containers": [{"name": "w", "image": "nginx"}]}},
                },
            },
            field_manager="widget-controller",
        )
        return Result(requeue_after=300)

    async def cleanup(obj: Widget) -> None:
        return None

    return await finalizer(api, "example.com/cleanup", widget, apply=apply, cleanup=cleanup)


def reconcile_on_a_thread(request: Request) -> None:
    pods = manager.sync_client.resource(Pod, namespace=request.namespace)
    assert_type(pods.get(request.name), Pod)


manager.reconciler("pods", name="plain", owns=[Pod], reconcile=reconcile_on_a_thread)
assert_type(manager.lister_for("widgets.example.com"), Lister[KubeObject])
