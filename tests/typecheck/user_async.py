"""A user's asyncio controller, as mypy --strict sees it: a factory, handlers
typed with KubeObject, listers and an index. Type-checked by test_typecheck.py
(never run: it would need a cluster)."""

from __future__ import annotations

from typing_extensions import assert_type

from kubereflector import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    FilteringResourceEventHandler,
    KubeObject,
    Lister,
    NamespaceLister,
    Registration,
    ResourceEventHandlerDetailedFuncs,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    SharedInformerFactory,
    get_name,
    run,
    wait_for_cache_sync,
)
from kubereflector.client import load_config


def by_node(pod: KubeObject) -> list[str]:
    node = pod.get("spec", {}).get("nodeName")
    return [node] if node else []


def is_web(obj: KubeObject | DeletedFinalStateUnknown[KubeObject]) -> bool:
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key.startswith("web")
    return get_name(obj) == "web"


async def on_add(pod: KubeObject) -> None:
    print(pod["metadata"]["name"])


def on_update(old: KubeObject, new: KubeObject) -> None:
    print(old.get("metadata"), new.get("metadata"))


async def on_delete(obj: KubeObject | DeletedFinalStateUnknown[KubeObject]) -> None:
    if isinstance(obj, DeletedFinalStateUnknown):
        assert_type(obj.obj, KubeObject | None)
    else:
        assert_type(obj, KubeObject)


def on_add_detailed(pod: KubeObject, is_in_initial_list: bool) -> None:
    print(is_in_initial_list)


async def main() -> None:
    async with SharedInformerFactory(load_config(), namespace="shop") as factory:
        pods = factory.informer_for("pods")
        assert_type(pods, SharedIndexInformer[KubeObject])
        pods.add_indexers({"node": by_node})
        handlers = ResourceEventHandlerFuncs(
            on_add=on_add, on_update=on_update, on_delete=on_delete
        )
        assert_type(handlers, ResourceEventHandlerFuncs[KubeObject])
        registration = pods.add_event_handler(handlers)
        assert_type(registration, Registration[KubeObject])
        pods.add_event_handler(FilteringResourceEventHandler(is_web, handlers))
        pods.add_event_handler(ResourceEventHandlerDetailedFuncs(on_add=on_add_detailed))
        factory.start()

        synced = await factory.wait_for_cache_sync(timeout=60, handlers=[registration])
        assert_type(synced, dict[str, bool])
        assert_type(await wait_for_cache_sync(pods, registration, timeout=5), bool)

        lister = factory.lister_for("po")
        assert_type(lister, Lister[KubeObject])
        assert_type(lister.list("app=web"), list[KubeObject])
        assert_type(lister.get("node-1"), KubeObject | None)
        shop = lister.namespaced("shop")
        assert_type(shop, NamespaceLister[KubeObject])
        assert_type(shop.get("web-1"), KubeObject | None)
        assert_type(lister.by_index(NAMESPACE_INDEX, "shop"), list[KubeObject])
        assert_type(pods.indexer.by_index("node", "n1"), list[KubeObject])
        assert_type(pods.indexer.get_by_key("shop/web-1"), KubeObject | None)
        assert_type(factory.informers(), dict[str, SharedIndexInformer[KubeObject]])
        await factory.shutdown()


async def count_pods() -> int:
    async with SharedInformerFactory(load_config()) as factory:
        factory.informer_for("pods")
        factory.start()
        await factory.wait_for_cache_sync(timeout=60)
        return len(factory.lister_for("pods").list())


if __name__ == "__main__":
    # run(): asyncio.run that returns None instead when Ctrl-C or SIGTERM stopped it.
    assert_type(run(count_pods()), int | None)
    assert_type(run(main()), None)
