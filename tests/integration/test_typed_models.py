"""Models where resources are named, against the emulator or a real cluster: a typed
client (async and blocking), a typed informer shared with its names, compact
objects read as the model, a manager whose reconciler is declared with models,
and the errors of a model asked for in the wrong scope (refused before a request
where its scope is known; the server's answer, the same from both targets, where
it is not).

The models' static types are checked by tests/typecheck (user_generics.py); here
they are run.
"""

from __future__ import annotations

import asyncio

import pytest
from conftest import Target
from typing_extensions import NotRequired, TypedDict

from kubereflector import (
    ListOptions,
    MethodNotAllowedError,
    NotFoundError,
    ReadOnlyObjectError,
    ResourceEventHandlerFuncs,
    SharedInformerFactory,
    SyncSharedInformerFactory,
)
from kubereflector.client import SyncClient
from kubereflector.models import ApiResource, ConfigMap, Namespace, Secret, register
from kubereflector.models.meta_v1 import ObjectMeta
from kubereflector.runtime import Manager, Request

pytestmark = pytest.mark.asyncio

WAIT = 20.0
"""Upper bound (seconds) on any wait; never reached when things work."""


class ClusterConfigMap(TypedDict):
    """A model of ConfigMaps registered, wrongly, as cluster-scoped."""

    metadata: NotRequired[ObjectMeta]
    data: NotRequired[dict[str, str]]


class NamespacedNamespace(TypedDict):
    """A model of Namespaces registered, wrongly, as namespaced."""

    metadata: NotRequired[ObjectMeta]


register(ClusterConfigMap, ApiResource("", "v1", "ConfigMap", "configmaps", namespaced=False))
register(NamespacedNamespace, ApiResource("", "v1", "Namespace", "namespaces", namespaced=True))


def config_map(name: str, **data: str) -> ConfigMap:
    return {"metadata": {"name": name}, "data": dict(data)}


async def test_a_typed_client_reads_and_writes_its_model(target: Target) -> None:
    cms = target.client.resource(ConfigMap, namespace=target.namespace)
    created = await cms.create(config_map("a", k="1"))
    assert (created["apiVersion"], created["kind"]) == ("v1", "ConfigMap")  # from the model
    assert created.get("data") == {"k": "1"}
    rv = created["metadata"]["resourceVersion"]
    fetched = await cms.get("a")
    assert fetched["metadata"].get("uid") == created["metadata"].get("uid")
    fetched["data"] = {"k": "2"}
    updated = await cms.update(fetched)
    assert updated.get("data") == {"k": "2"}
    patched = await cms.patch("a", {"data": {"p": "3"}})
    assert patched.get("data") == {"k": "2", "p": "3"}
    applied = await cms.apply(config_map("b", k="v"), field_manager="kr-test")
    assert applied["metadata"].get("managedFields", [{}])[0].get("manager") == "kr-test"
    listed = await cms.list()
    assert sorted(cm["metadata"].get("name", "") for cm in listed.items) == ["a", "b"]
    async with cms.watch(ListOptions(resource_version=rv)) as events:
        seen: list[tuple[str, str]] = []
        async for event in events:
            seen.append((event.type, event.object["metadata"].get("name", "")))
            if len(seen) == 3:
                break
    assert seen == [("MODIFIED", "a"), ("MODIFIED", "a"), ("ADDED", "b")]
    await cms.delete("b")
    with pytest.raises(NotFoundError):
        await cms.get("b")
    everywhere = target.client.resource(ConfigMap)  # a namespaced model: list in every namespace
    assert "a" in {cm["metadata"].get("name") for cm in (await everywhere.list()).items}


async def test_the_blocking_client_is_typed_the_same(target: Target) -> None:
    def program() -> list[tuple[str, str]]:
        with SyncClient(target.client.config) as client:
            cms = client.resource(ConfigMap, namespace=target.namespace)
            start = cms.list().resource_version
            cms.create(config_map("s", k="1"))
            assert cms.get("s").get("data") == {"k": "1"}
            cms.delete("s")
            seen = []
            with cms.watch(ListOptions(resource_version=start)) as events:
                for event in events:
                    seen.append((event.type, event.object["metadata"].get("name", "")))
                    if len(seen) == 2:
                        break
            return seen

    assert await asyncio.to_thread(program) == [("ADDED", "s"), ("DELETED", "s")]


async def test_an_informer_of_a_model_is_the_informer_of_its_names(target: Target) -> None:
    cms = target.client.resource(ConfigMap, namespace=target.namespace)
    await cms.create(config_map("before", k="1"))
    added: list[str] = []
    arrived = asyncio.Event()

    def on_add(cm: ConfigMap) -> None:
        added.append(cm["metadata"].get("name", ""))
        if "after" in added:
            arrived.set()

    async with SharedInformerFactory(target.client, namespace=target.namespace) as factory:
        informer = factory.informer_for(ConfigMap)
        assert factory.informer_for("configmaps") is informer
        assert factory.informer_for("cm") is informer
        registration = informer.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add))
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=WAIT, handlers=[registration]) == {
            "configmaps": True
        }
        before = factory.lister_for(ConfigMap).namespaced(target.namespace).get("before")
        assert before is not None
        assert before.get("data") == {"k": "1"}
        await cms.create(config_map("after"))
        await asyncio.wait_for(arrived.wait(), WAIT)
    assert "before" in added
    assert "after" in added


async def test_compact_objects_read_as_the_model_and_refuse_writes(target: Target) -> None:
    cms = target.client.resource(ConfigMap, namespace=target.namespace)
    await cms.create(config_map("c", k="v"))

    def program() -> None:
        with SyncSharedInformerFactory(
            target.client.config, namespace=target.namespace, object_mode="compact"
        ) as factory:
            lister = factory.lister_for(ConfigMap)
            factory.start()
            assert factory.wait_for_cache_sync(timeout=WAIT) == {"configmaps": True}
            cm = lister.namespaced(target.namespace).get("c")
            assert cm is not None
            assert cm["data"]["k"] == "v"  # reads as the model says
            assert cm["metadata"].get("name") == "c"
            with pytest.raises(ReadOnlyObjectError):
                cm["data"]["k"] = "w"  # writes raise, though the type allows them
            with pytest.raises(ReadOnlyObjectError):
                cm["data"] = {}

    await asyncio.to_thread(program)


async def test_a_model_s_known_scope_refuses_the_wrong_namespace_before_a_request(
    target: Target,
) -> None:
    with pytest.raises(ValueError, match=r"Namespace \(namespaces\) is cluster-scoped"):
        target.client.resource(Namespace, namespace=target.namespace)
    anywhere = target.client.resource(ConfigMap)
    with pytest.raises(ValueError, match="configmaps is namespaced: a namespace is needed"):
        await anywhere.get("x")
    with pytest.raises(ValueError, match="give the ResourceClient a namespace"):
        await anywhere.create(config_map("x"))
    namespaces = target.client.resource(Namespace)
    assert (await namespaces.get(target.namespace))["metadata"].get("name") == target.namespace


async def test_a_model_registered_in_the_wrong_scope(target: Target) -> None:
    ns = target.namespace
    # Where discovery is loaded, the factory sees the mistake and names it.
    async with SharedInformerFactory(target.client, namespace=ns) as factory:
        with pytest.raises(
            ValueError,
            match=r"ClusterConfigMap is registered as cluster-scoped, but the server serves "
            r"v1/configmaps namespaced",
        ):
            factory.informer_for(ClusterConfigMap)
        with pytest.raises(
            ValueError,
            match=r"NamespacedNamespace is registered as namespaced, but the server serves "
            r"v1/namespaces cluster-scoped",
        ):
            factory.informer_for(NamespacedNamespace)
        assert factory.informers() == {}
    # The client asks nothing of discovery: the server answers for the paths the
    # registration makes, as kube-apiserver does.
    wrong = target.client.resource(ClusterConfigMap)
    with pytest.raises(NotFoundError, match="could not find the requested resource") as missing:
        await wrong.get("x")
    assert missing.value.url is not None
    assert missing.value.url.endswith("/api/v1/configmaps/x")
    with pytest.raises(MethodNotAllowedError) as refused:
        await wrong.create({"metadata": {"name": "x", "namespace": ns}})
    assert refused.value.reason == "MethodNotAllowed"
    inside = target.client.resource(NamespacedNamespace, namespace=ns)
    with pytest.raises(NotFoundError, match="could not find the requested resource"):
        await inside.get(ns)


async def test_a_reconciler_declared_with_models(target: Target) -> None:
    ns = target.namespace
    owner = await target.client.resource(ConfigMap, namespace=ns).create(config_map("owner", k="1"))
    manager = Manager(target.client.config, namespace=ns, bind_address="127.0.0.1")
    seen: list[tuple[str, dict[str, str]]] = []
    changed = asyncio.Event()

    @manager.reconciler(ConfigMap, owns=[Secret])
    async def reconcile(request: Request) -> None:
        cm = manager.lister_for(ConfigMap).namespaced(request.namespace).get(request.name)
        seen.append((request.name, dict(cm.get("data", {})) if cm is not None else {}))
        changed.set()

    async def until(count: int) -> None:
        while len(seen) < count:
            changed.clear()
            await changed.wait()

    task = asyncio.create_task(manager.run(handle_signals=False))
    try:
        await asyncio.wait_for(manager.wait_elected(), WAIT)
        assert [c.name for c in manager.controllers] == ["configmaps"]  # the model's resource
        await asyncio.wait_for(until(1), WAIT)
        assert seen == [("owner", {"k": "1"})]
        secret: Secret = {
            "metadata": {
                "name": "owned",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "owner",
                        "uid": owner["metadata"].get("uid", ""),
                        "controller": True,
                    }
                ],
            },
            "stringData": {"k": "v"},
        }
        await target.client.resource(Secret, namespace=ns).create(secret)
        await asyncio.wait_for(until(2), WAIT)  # the owned Secret's event reconciles its owner
        assert seen[1] == ("owner", {"k": "1"})
    finally:
        manager.stop()
        await asyncio.wait_for(task, WAIT)
