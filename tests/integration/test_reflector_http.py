"""The Reflector over HTTP with ResourceListWatch: against the emulator, or a real cluster.

See conftest.py for how to point this suite at a cluster. Time is real here (it
is HTTP), but nothing sleeps: tests wait on the cache's changes, with timeouts.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import Target, WatchedCache

from kubereflector import (
    Backoff,
    ListOptions,
    ListResult,
    Reflector,
    ReflectorOptions,
    UnauthorizedError,
    WatchEvent,
)
from kubereflector.client import Client, ClientConfig, ResourceListWatch, StaticAuth, load_config
from kubereflector.testing import ApiServerEmulator
from running_task import running

pytestmark = pytest.mark.asyncio


def fast_backoff() -> Backoff:
    return Backoff(initial=0.01, cap=0.05)


async def in_step(target: Target, store: WatchedCache) -> None:
    """Wait until the cache holds exactly the server's pods at their versions."""
    expected = await target.server_pods()
    await store.wait_until(lambda: store.versions() == expected)


@pytest.mark.parametrize("use_watch_list", [False, True], ids=["list", "watch-list"])
async def test_sync_then_follow_every_change(target: Target, use_watch_list: bool) -> None:
    for i in range(12):
        await target.create_pod(f"p{i:02d}", {"app": "web" if i % 2 else "db"})
    store = WatchedCache()
    lw = ResourceListWatch(target.client, "pods", namespace=target.namespace)
    options = ReflectorOptions(page_size=5, use_watch_list=use_watch_list)
    reflector = Reflector(lw, store, options=options, backoff=fast_backoff())
    async with running(reflector):
        await in_step(target, store)
        await target.create_pod("new")
        await target.label_pod("p00", {"app": "changed"})
        await target.delete_pod("p01")
        await in_step(target, store)
        assert store.get_by_key(f"{target.namespace}/p00")["metadata"]["labels"] == {
            "app": "changed"
        }
        assert store.get_by_key(f"{target.namespace}/p01") is None


async def test_label_selector_and_metadata_only(target: Target) -> None:
    for i in range(6):
        await target.create_pod(f"p{i}", {"app": "web" if i < 4 else "db"})
    store = WatchedCache()
    lw = ResourceListWatch(
        target.client,
        "po",
        namespace=target.namespace,
        label_selector="app in (web)",
        metadata_only=True,
    )
    reflector = Reflector(lw, store, backoff=fast_backoff())
    async with running(reflector):
        await store.wait_until(lambda: len(store) == 4)
        assert sorted(store.list_keys()) == [f"{target.namespace}/p{i}" for i in range(4)]
        obj = store.get_by_key(f"{target.namespace}/p0")
        assert "spec" not in obj
        assert obj["metadata"]["labels"] == {"app": "web"}
        await target.create_pod("p9", {"app": "web"})
        await store.wait_until(lambda: len(store) == 5)


async def test_relists_after_the_history_behind_the_watch_expired(target: Target) -> None:
    server = target.faults()
    for i in range(5):
        await target.create_pod(f"p{i}")
    store = WatchedCache()
    lw = ResourceListWatch(target.client, "pods", namespace=target.namespace)
    options = ReflectorOptions(use_watch_list=False)
    reflector = Reflector(lw, store, options=options, backoff=fast_backoff())
    async with running(reflector):
        await in_step(target, store)
        lists_before = reflector.stats().lists
        await server.wait_for_watches(1, resource="pods")
        # While the watch is down, things change and the history is compacted:
        # the re-watch gets a 410 and only a relist can catch up.
        server.stall_watches()
        await target.delete_pod("p0")
        await target.create_pod("p7")
        server.compact()
        server.drop_watches()
        await in_step(target, store)
        assert reflector.stats().lists > lists_before


async def test_recovers_from_throttling_and_server_errors(target: Target) -> None:
    server = target.faults()
    await target.create_pod("p0")
    store = WatchedCache()
    lw = ResourceListWatch(target.client, "pods", namespace=target.namespace)
    reflector = Reflector(lw, store, backoff=fast_backoff())
    server.fail_next(2, 500)
    async with running(reflector):
        await in_step(target, store)
        server.fail_next(2, 429, retry_after=0)
        server.drop_watches()
        await target.create_pod("p1")
        await in_step(target, store)


async def test_a_stalled_watch_is_detected_and_reopened(target: Target) -> None:
    server = target.faults()
    await target.create_pod("p0")
    store = WatchedCache()
    lw = ResourceListWatch(target.client, "pods", namespace=target.namespace)
    options = ReflectorOptions(idle_timeout=0.2)
    reflector = Reflector(lw, store, options=options, backoff=fast_backoff())
    async with running(reflector):
        await in_step(target, store)
        await server.wait_for_watches(1, resource="pods")
        server.stall_watches()
        await target.create_pod("p1")  # lost on the stalled stream
        await in_step(target, store)
        assert reflector.stats().stalls >= 1


async def test_tls_and_token_from_the_emulators_kubeconfig() -> None:
    async with ApiServerEmulator(tls=True) as server:
        config = load_config(server.kubeconfig_path)
        assert config.server.startswith("https://")
        server.create("pods", {"metadata": {"name": "p0"}, "spec": {}}, namespace="default")
        async with Client(config) as client:
            lw = ResourceListWatch(client, "pods", namespace="default")
            store = WatchedCache()
            async with running(Reflector(lw, store, backoff=fast_backoff())):
                await store.wait_until(lambda: "default/p0" in store)
        bad = ClientConfig(server=config.server, ca_data=config.ca_data, auth=StaticAuth(token="x"))
        async with Client(bad) as client:
            with pytest.raises(UnauthorizedError):
                await ResourceListWatch(client, "pods").list(ListOptions())


class MisversioningProxy:
    """Between the Reflector and the server, gives the next watch event (not a
    bookmark) the resourceVersion ``"abc"`` once armed, as a broken proxy might;
    records every list's options."""

    def __init__(self, inner: ResourceListWatch) -> None:
        self.inner = inner
        self.armed = False
        self.lists: list[ListOptions] = []

    async def list(self, options: ListOptions) -> ListResult:
        self.lists.append(options)
        return await self.inner.list(options)

    @contextlib.asynccontextmanager
    async def watch(self, options: ListOptions) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        async with self.inner.watch(options) as events:
            yield self._rewrite(events)

    async def _rewrite(self, events: AsyncIterator[WatchEvent]) -> AsyncIterator[WatchEvent]:
        async for event in events:
            if self.armed and event.type != "BOOKMARK":
                self.armed = False
                obj: Any = event.object
                obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "abc"}}
                event = WatchEvent(event.type, obj)
            yield event


async def test_a_resource_version_the_server_refuses_leads_to_a_relist(target: Target) -> None:
    """Issue 16's livelock, against the real server's answer: the watch from "abc"
    is refused (kube-apiserver: 500 "resourceVersion: Invalid value"), and the
    Reflector lists at "" instead of sending "abc" forever. The server ends each
    watch after 1-2 s (timeoutSeconds), so the re-watch at "abc" comes by itself."""
    await target.create_pod("p0")
    store = WatchedCache()
    proxy = MisversioningProxy(ResourceListWatch(target.client, "pods", namespace=target.namespace))
    options = ReflectorOptions(use_watch_list=False, min_watch_timeout=1)
    reflector = Reflector(proxy, store, options=options, backoff=fast_backoff())
    async with running(reflector):
        await in_step(target, store)
        proxy.armed = True
        await target.create_pod("p1")  # its event reaches the Reflector with RV "abc"
        await store.wait_until(lambda: reflector.last_sync_resource_version == "abc")
        # Nothing else changes (an event would move the RV on): the watch ends,
        # the re-watch from "abc" is refused, the Reflector relists (a replace).
        await store.wait_until(lambda: len(proxy.lists) == 2)
        await in_step(target, store)
        await target.create_pod("p2")
        await in_step(target, store)
    assert [o.resource_version for o in proxy.lists] == ["0", ""]


async def test_resource_versions_that_are_not_strings_over_http(
    target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    """The emulator sends an object, then a number, as resourceVersions: both are
    ignored (logged once, with the URL), and the cache converges."""
    server = target.faults()
    await target.create_pod("p0")
    store = WatchedCache()
    lw = ResourceListWatch(target.client, "pods", namespace=target.namespace)
    reflector = Reflector(lw, store, backoff=fast_backoff())
    with caplog.at_level(logging.DEBUG, logger="kubereflector.reflector"):
        async with running(reflector):
            await in_step(target, store)
            await server.wait_for_watches(1, resource="pods")
            synced_to = reflector.last_sync_resource_version
            server.corrupt_resource_versions(1, {"rv": 1})
            await target.create_pod("p1")
            await store.wait_until(lambda: len(store) == 2)
            server.corrupt_resource_versions(1, 12)
            await target.create_pod("p2")
            await store.wait_until(lambda: len(store) == 3)
            assert reflector.last_sync_resource_version == synced_to
            # The stream ends with the RV behind p1 and p2 (which a watch from it
            # would replay): the Reflector lists at "" instead.
            server.drop_watches()
            await target.create_pod("p3")
            await in_step(target, store)
            assert reflector.stats().lists == 2
    notes = [r for r in caplog.records if "is not a string" in r.getMessage()]
    assert [r.levelno for r in notes] == [logging.WARNING, logging.DEBUG]
    assert f"/api/v1/namespaces/{target.namespace}/pods" in notes[0].getMessage()
