"""SyncClient: the same writes from plain threads, against the emulator or a real cluster.

The server may run on the test's event loop (the emulator), so every blocking
call runs in a worker thread (``asyncio.to_thread``), as a plain-threads
program's calls would.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Target

from kubereflector import (
    CompactObject,
    ConflictError,
    DecodeError,
    ListOptions,
    NotFoundError,
    ResourceEventHandlerFuncs,
    SyncSharedInformerFactory,
    WatchEvent,
)
from kubereflector.client import EventRecorder, SyncClient, retry_on_conflict

pytestmark = pytest.mark.asyncio


def sync_client(target: Target) -> SyncClient:
    return SyncClient(target.client.config)


async def test_blocking_twin_of_every_verb(target: Target) -> None:
    ns = target.namespace

    def program() -> dict[str, Any]:
        with sync_client(target) as client:
            cms = client.resource("cm", namespace=ns)
            created = cms.create({"metadata": {"name": "a"}, "data": {"n": "0"}})
            assert cms.get("a")["metadata"]["uid"] == created["metadata"]["uid"]
            cms.patch("a", {"data": {"p": "1"}})
            stale = copy.deepcopy(created)
            stale["data"]["n"] = "9"
            try:
                cms.update(stale)
            except ConflictError:
                pass
            else:
                raise AssertionError("a stale update went through")

            def increment() -> dict[str, Any]:
                current = cms.get("a")
                current["data"]["n"] = str(int(current["data"]["n"]) + 1)
                return cms.update(current)

            assert retry_on_conflict(increment)["data"] == {"n": "1", "p": "1"}
            applied = cms.apply({"metadata": {"name": "b"}, "data": {"k": "v"}}, field_manager="me")
            assert applied["metadata"]["managedFields"][0]["manager"] == "me"
            listed = cms.list(limit=1)
            assert sorted(o["metadata"]["name"] for o in listed.items) == ["a", "b"]
            assert client.request("GET", f"/api/v1/namespaces/{ns}/configmaps/b")["data"] == {
                "k": "v"
            }
            cms.delete("b")
            try:
                cms.get("b")
            except NotFoundError:
                pass
            else:
                raise AssertionError("b was not deleted")
            return cms.get("a")

    final = await asyncio.to_thread(program)
    assert final["data"]["n"] == "1"


async def test_watch_from_a_thread(target: Target) -> None:
    ns = target.namespace
    client = sync_client(target)
    try:
        cms = client.resource("configmaps", namespace=ns)
        rv = (await asyncio.to_thread(cms.list)).resource_version
        stream = cms.watch(ListOptions(resource_version=rv))
        events: Iterator[WatchEvent] = await asyncio.to_thread(stream.__enter__)
        try:
            await asyncio.to_thread(cms.create, {"metadata": {"name": "w"}})
            event = await asyncio.wait_for(asyncio.to_thread(next, events), 10)
            assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "w")
        finally:
            await asyncio.to_thread(stream.__exit__, None, None, None)
    finally:
        await asyncio.to_thread(client.close)
    assert client.closed
    with pytest.raises(RuntimeError, match="closed"):
        client.resource("configmaps", namespace=ns).get("w")


@pytest.mark.timeout(90)
async def test_a_sync_factory_hands_out_a_client_on_its_own_loop(target: Target) -> None:
    ns = target.namespace

    def program() -> str:
        with SyncSharedInformerFactory(target.client.config, namespace=ns) as factory:
            seen = threading.Event()
            informer = factory.informer_for("configmaps")
            informer.add_event_handler(
                ResourceEventHandlerFuncs(
                    on_add=lambda obj: obj["metadata"]["name"] == "via" and seen.set()
                )
            )
            factory.start()
            assert factory.wait_for_cache_sync(timeout=60) == {"configmaps": True}
            client = factory.sync_client()
            assert client.loop is factory.loop
            assert client.client is factory.client  # one Client, one connection pool
            created = client.resource("configmaps", namespace=ns).create(
                {"metadata": {"name": "via"}}
            )
            assert seen.wait(30)  # the factory's informer saw the write
            recorder = EventRecorder(client, "example.com/sync-test")
            recorder.record(created, "Normal", "Seen", "from a plain thread")
            assert recorder.flush_blocking(timeout=30)
            client.close()  # closes nothing of the factory's
            events = factory.sync_client().resource("events.k8s.io/v1/events", namespace=ns)
            return str(events.list().items[0]["reason"])

    assert await asyncio.to_thread(program) == "Seen"


async def test_blocking_on_the_loop_thread_is_refused(target: Target) -> None:
    client = sync_client(target)
    try:
        cms = client.resource("configmaps", namespace=target.namespace)

        async def on_the_loop() -> None:
            cms.get("anything")

        with pytest.raises(RuntimeError, match="deadlock"):
            await asyncio.to_thread(client.run, on_the_loop())
    finally:
        await asyncio.to_thread(client.close)


async def test_compact_objects_from_a_thread(target: Target) -> None:
    ns = target.namespace

    def program() -> tuple[list[Any], WatchEvent]:
        with sync_client(target) as client:
            cms = client.resource("cm", namespace=ns)
            assert cms.resource_name == "cm"
            assert cms.url == f"{client.server} (cm)"  # not resolved yet
            cms.create({"metadata": {"name": "before"}, "data": {"k": "v"}})
            assert cms.url == f"{client.server}/api/v1/namespaces/{ns}/configmaps"
            page = cms.list_page(ListOptions(), object_mode="compact")
            with cms.watch(
                ListOptions(resource_version=page.resource_version), object_mode="compact"
            ) as events:
                cms.create({"metadata": {"name": "after"}})
                return page.items, next(events)

    items, event = await asyncio.to_thread(program)
    assert [type(item) for item in items] == [CompactObject]
    assert items[0]["data"] == {"k": "v"}
    assert type(event.object) is CompactObject
    assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "after")


async def test_size_limits_are_the_clients(target: Target) -> None:
    ns = target.namespace
    await target.client.resource("configmaps", namespace=ns).create(
        {"metadata": {"name": "big"}, "data": {"blob": "x" * 8192}}
    )

    def listed() -> None:
        with SyncClient(target.client.config, max_body_bytes=64) as client:
            client.resource("configmaps", namespace=ns).list()

    with pytest.raises(DecodeError, match="limit of 64 bytes"):
        await asyncio.to_thread(listed)

    def watched() -> None:
        with SyncClient(target.client.config, max_event_bytes=4096) as client:
            cms = client.resource("configmaps", namespace=ns)
            with cms.watch(ListOptions(resource_version="0")) as events:
                for _ in events:
                    pass

    with pytest.raises(DecodeError, match="limit of 4096 bytes"):
        await asyncio.wait_for(asyncio.to_thread(watched), 20)
