"""The Reflector over HTTP with ResourceListWatch: against the emulator, or a real cluster.

See conftest.py for how to point this suite at a cluster. Time is real here (it
is HTTP), but nothing sleeps: tests wait on the cache's changes, with timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from conftest import Target, WatchedCache

from kubereflector import Backoff, ListOptions, Reflector, ReflectorOptions, UnauthorizedError
from kubereflector.client import Client, ClientConfig, ResourceListWatch, StaticAuth, load_config
from kubereflector.testing import ApiServerEmulator

pytestmark = pytest.mark.asyncio


def fast_backoff() -> Backoff:
    return Backoff(initial=0.01, cap=0.05)


@contextlib.asynccontextmanager
async def reflecting(reflector: Reflector) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(reflector.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


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
    async with reflecting(reflector):
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
    async with reflecting(reflector):
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
    async with reflecting(reflector):
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
    async with reflecting(reflector):
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
    async with reflecting(reflector):
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
            async with reflecting(Reflector(lw, store, backoff=fast_backoff())):
                await store.wait_until(lambda: "default/p0" in store)
        bad = ClientConfig(server=config.server, ca_data=config.ca_data, auth=StaticAuth(token="x"))
        async with Client(bad) as client:
            with pytest.raises(UnauthorizedError):
                await ResourceListWatch(client, "pods").list(ListOptions())
