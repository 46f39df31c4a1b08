"""SharedInformerFactory over HTTP: against the emulator, or a real cluster.

See conftest.py for how to point this suite at a cluster. Time is real here (it
is HTTP), but nothing sleeps: tests wait on the informers' notifications (or,
from plain threads, on threading events), always with a timeout. A relist after
an expired watch waits out the Reflector's default backoff (about a second):
SharedIndexInformer has no way to pass a faster one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest
from conftest import KUBECONFIG_ENV, Target

from kubereflector import (
    ListOptions,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    SharedInformerFactory,
    SyncSharedInformerFactory,
    deletion_handling_meta_namespace_key_func,
)
from kubereflector.client import load_config

pytestmark = pytest.mark.asyncio

WAIT = 20.0
"""Upper bound (seconds) on any wait; never reached when things work."""


# -- helpers ----------------------------------------------------------------------------------


def kubeconfig_path(target: Target) -> str:
    if target.emulator is not None:
        return target.emulator.kubeconfig_path
    return os.environ[KUBECONFIG_ENV]


class Changes:
    """Wakes a waiter on every notification of the informers it watches (coroutine
    handlers: they run on the test's loop, after the cache has changed)."""

    def __init__(self, *informers: SharedIndexInformer) -> None:
        self._changed = asyncio.Event()
        for informer in informers:
            informer.add_event_handler(
                ResourceEventHandlerFuncs(
                    on_add=self._touch, on_update=self._touch, on_delete=self._touch
                )
            )

    async def _touch(self, *_args: Any) -> None:
        self._changed.set()

    async def until(self, predicate: Callable[[], bool]) -> None:
        async def loop() -> None:
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(loop(), WAIT)


def cached(informer: SharedIndexInformer) -> dict[str, str]:
    """key -> resourceVersion of what the informer's cache holds."""
    return {
        deletion_handling_meta_namespace_key_func(obj): obj["metadata"]["resourceVersion"]
        for obj in informer.indexer.list()
    }


async def on_server(target: Target, resource: str) -> dict[str, str]:
    """key -> resourceVersion of the namespace's objects, as the server has them."""
    body = await target.client.request("GET", f"/api/v1/namespaces/{target.namespace}/{resource}")
    return {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
        for o in body["items"]
    }


async def in_step(
    target: Target, changes: Changes, informers: dict[str, SharedIndexInformer]
) -> None:
    """Wait until every informer's cache is exactly the server's objects."""
    expected = {resource: await on_server(target, resource) for resource in informers}
    await changes.until(
        lambda: all(cached(informer) == expected[r] for r, informer in informers.items())
    )


def cm_path(target: Target, name: str = "") -> str:
    base = f"/api/v1/namespaces/{target.namespace}/configmaps"
    return f"{base}/{name}" if name else base


async def create_cm(target: Target, name: str, value: str = "0") -> None:
    await target.client.request(
        "POST", cm_path(target), json={"metadata": {"name": name}, "data": {"v": value}}
    )


async def update_cm(target: Target, name: str, value: str) -> None:
    await target.client.request(
        "PATCH",
        cm_path(target, name),
        json={"data": {"v": value}},
        content_type="application/merge-patch+json",
    )


async def delete_cm(target: Target, name: str) -> None:
    await target.client.request("DELETE", cm_path(target, name))


# -- tests ------------------------------------------------------------------------------------


async def test_shared_informers_follow_every_change(target: Target) -> None:
    for i in range(4):
        await target.create_pod(f"p{i}", {"app": "web"})
    for i in range(3):
        await create_cm(target, f"c{i}")
    factory = SharedInformerFactory(target.client, namespace=target.namespace)
    async with factory:
        pods = factory.informer_for("po")
        configmaps = factory.informer_for("configmaps")
        assert factory.informer_for("Pod") is pods
        assert factory.informer_for("v1/configmaps") is configmaps
        changes = Changes(pods, configmaps)
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=WAIT) == {
            "pods": True,
            "configmaps": True,
        }
        informers = {"pods": pods, "configmaps": configmaps}
        await in_step(target, changes, informers)
        await target.create_pod("new")
        await target.label_pod("p0", {"app": "changed"})
        await target.delete_pod("p1")
        await create_cm(target, "c9")
        await update_cm(target, "c0", "1")
        await delete_cm(target, "c1")
        await in_step(target, changes, informers)
        web = factory.lister_for("pods").namespaced(target.namespace).list("app=web")
        assert sorted(p["metadata"]["name"] for p in web) == ["p2", "p3"]
        assert factory.lister_for("cm").namespaced(target.namespace).get("c0")["data"] == {"v": "1"}
    assert pods.is_stopped()
    assert configmaps.is_stopped()
    assert not target.client.closed  # the caller's Client stays open


async def test_tweak_list_options_applies_to_list_and_watch(target: Target) -> None:
    await target.create_pod("web-0", {"app": "web"})
    await target.create_pod("db-0", {"app": "db"})

    def only_web(options: ListOptions) -> ListOptions:
        return dataclasses.replace(options, label_selector="app=web")

    async with SharedInformerFactory(
        target.client, namespace=target.namespace, tweak_list_options=only_web
    ) as factory:
        pods = factory.informer_for("pods")
        changes = Changes(pods)
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=WAIT) == {"pods": True}
        assert [p["metadata"]["name"] for p in pods.indexer.list()] == ["web-0"]
        # Watch events come in order: once the second web pod is in, the db pod
        # written before it would have been too, had the watch let it through.
        await target.create_pod("db-1", {"app": "db"})
        await target.create_pod("web-1", {"app": "web"})
        await changes.until(lambda: len(pods.indexer) == 2)
        assert sorted(p["metadata"]["name"] for p in pods.indexer.list()) == ["web-0", "web-1"]


async def test_churn_with_dropped_watches_and_expired_history(target: Target) -> None:
    server = target.faults()
    for i in range(6):
        await target.create_pod(f"p{i}")
    for i in range(4):
        await create_cm(target, f"c{i}")
    async with SharedInformerFactory(target.client, namespace=target.namespace) as factory:
        informers = {"pods": factory.informer_for("pods"), "configmaps": factory.informer_for("cm")}
        changes = Changes(*informers.values())
        factory.start()
        assert all((await factory.wait_for_cache_sync(timeout=WAIT)).values())
        await in_step(target, changes, informers)

        # Churn, with every watch dropped halfway: the informers re-watch from
        # their last resourceVersion and miss nothing.
        await target.create_pod("p10")
        await target.label_pod("p0", {"round": "1"})
        await create_cm(target, "c10")
        await server.wait_for_watches(1, resource="pods")
        await server.wait_for_watches(1, resource="configmaps")
        server.drop_watches()
        await target.delete_pod("p1")
        await update_cm(target, "c0", "1")
        await delete_cm(target, "c1")
        await target.create_pod("p11")
        await in_step(target, changes, informers)

        # Churn while the watches are dead, then the history is compacted and the
        # connections cut: the re-watches get 410 Expired and only a relist catches up.
        lists_before = {r: i.stats().lists for r, i in informers.items()}
        await server.wait_for_watches(1, resource="pods")
        await server.wait_for_watches(1, resource="configmaps")
        server.stall_watches()
        await target.delete_pod("p2")
        await target.label_pod("p3", {"round": "2"})
        await target.create_pod("p12")
        await create_cm(target, "c11")
        await update_cm(target, "c2", "2")
        await delete_cm(target, "c3")
        server.compact()
        server.drop_watches()
        await in_step(target, changes, informers)
        for resource, informer in informers.items():
            assert informer.stats().lists > lists_before[resource], resource

        # And on they go.
        await target.create_pod("p13")
        await delete_cm(target, "c2")
        await in_step(target, changes, informers)
        assert await factory.wait_for_cache_sync(timeout=WAIT) == {
            "pods": True,
            "configmaps": True,
        }


async def test_a_factory_that_owns_its_client_closes_it(target: Target) -> None:
    await target.create_pod("p0")
    config = load_config(kubeconfig_path(target))
    async with SharedInformerFactory(config, namespace=target.namespace) as factory:
        factory.informer_for("pods")
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=WAIT) == {"pods": True}
        assert [p["metadata"]["name"] for p in factory.lister_for("pods").list()] == ["p0"]
    assert factory.client.closed


async def test_the_sync_factory_over_http_from_plain_threads(target: Target) -> None:
    """The whole sync lifecycle runs in plain threads (no event loop there), while
    this test's loop serves the emulator and makes the changes."""
    await target.create_pod("p0")
    config = load_config(kubeconfig_path(target))
    added = threading.Event()
    seen: list[tuple[str, bool]] = []

    def on_add(pod: Any) -> None:
        seen.append((pod["metadata"]["name"], threading.current_thread().name == "MainThread"))
        if pod["metadata"]["name"] == "p1":
            added.set()

    def start() -> tuple[SyncSharedInformerFactory, dict[str, bool]]:
        factory = SyncSharedInformerFactory(config, namespace=target.namespace)
        registration = factory.informer_for("pods").add_event_handler(
            ResourceEventHandlerFuncs(on_add=on_add)
        )
        factory.start()
        return factory, factory.wait_for_cache_sync(timeout=WAIT, handlers=[registration])

    factory, synced = await asyncio.to_thread(start)
    try:
        assert synced == {"pods": True}
        assert seen == [("p0", False)]
        await target.create_pod("p1")
        assert await asyncio.to_thread(added.wait, WAIT)
        lister = factory.lister_for("pods")  # resolved from the loaded discovery
        assert sorted(p["metadata"]["name"] for p in lister.list()) == ["p0", "p1"]
    finally:
        await asyncio.to_thread(factory.shutdown)
    assert factory.client.closed
    assert factory.loop is not None
    assert factory.loop.is_closed()
    assert not [t for t in threading.enumerate() if t.name == "kubereflector-factory"]
