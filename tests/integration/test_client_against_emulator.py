"""The REST client, discovery and ResourceListWatch against the bundled API-server emulator.

Each test gets a fresh emulator on a FakeClock (bookmarks come when the test
advances it) and a Client configured with its URL and token. Nothing sleeps:
tests wait for events with timeouts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from kubereflector import (
    INITIAL_EVENTS_END_ANNOTATION,
    ApiError,
    DecodeError,
    ExpiredError,
    ForbiddenError,
    ListOptions,
    NotFoundError,
    TooLargeResourceVersionError,
    TooManyRequestsError,
    UnauthorizedError,
    WatchEvent,
    error_from_status,
)
from kubereflector.client import (
    AuthInfo,
    Client,
    ClientConfig,
    ResourceListWatch,
    StaticAuth,
    UnknownResourceError,
)
from kubereflector.testing import ApiServerEmulator, FakeClock
from kubereflector.testing.apiserver import sample_pod

pytestmark = pytest.mark.asyncio

BOOKMARK_INTERVAL = 5.0
PODS = "/api/v1/namespaces/default/pods"
TIMEOUT = 10.0


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ApiServerEmulator]:
    async with ApiServerEmulator(clock=FakeClock(), bookmark_interval=BOOKMARK_INTERVAL) as s:
        yield s


@pytest_asyncio.fixture
async def client(server: ApiServerEmulator) -> AsyncIterator[Client]:
    config = ClientConfig(server=server.url, auth=StaticAuth(token=server.token))
    async with Client(config) as c:
        yield c


def clock_of(server: ApiServerEmulator) -> FakeClock:
    assert isinstance(server.clock, FakeClock)
    return server.clock


async def next_event(events: AsyncIterator[WatchEvent]) -> WatchEvent:
    return await asyncio.wait_for(anext(events), TIMEOUT)


def names(items: list[dict[str, Any]]) -> list[str]:
    return [i["metadata"]["name"] for i in items]


# -- lists --------------------------------------------------------------------------


async def test_list_pages_through_everything(server: ApiServerEmulator, client: Client) -> None:
    for i in range(12):
        server.create("pods", sample_pod(f"p{i:02d}"))
    pages = []
    options = ListOptions(limit=5)
    while True:
        page = await client.list(PODS, options)
        pages.append(page)
        if not page.continue_:
            break
        options = ListOptions(limit=5, continue_=page.continue_)
    assert [len(p.items) for p in pages] == [5, 5, 2]
    assert [p.remaining_item_count for p in pages] == [7, 2, None]
    assert len({p.resource_version for p in pages}) == 1
    assert pages[0].resource_version == server.resource_version
    everything = [item for p in pages for item in p.items]
    assert names(everything) == [f"p{i:02d}" for i in range(12)]
    assert {(i["kind"], i["apiVersion"]) for i in everything} == {("Pod", "v1")}


async def test_a_continue_token_expires_with_the_history(
    server: ApiServerEmulator, client: Client
) -> None:
    for i in range(3):
        server.create("pods", sample_pod(f"p{i}"))
    first = await client.list(PODS, ListOptions(limit=1))
    server.create("pods", sample_pod("later"))
    server.compact()
    with pytest.raises(ExpiredError) as info:
        await client.list(PODS, ListOptions(limit=1, continue_=first.continue_))
    assert info.value.status == 410
    assert f"{server.url}{PODS}?limit=1&continue=" in str(info.value)


async def test_selectors_reach_the_server(server: ApiServerEmulator, client: Client) -> None:
    server.create("pods", sample_pod("web", labels={"app": "web"}))
    server.create("pods", sample_pod("db", labels={"app": "db"}))
    web = await client.list(PODS, ListOptions(label_selector="app in (web, cache)"))
    assert names(web.items) == ["web"]
    db = await client.list(PODS, ListOptions(field_selector="metadata.name=db"))
    assert names(db.items) == ["db"]


# -- watches -------------------------------------------------------------------------


async def test_watch_from_a_list_with_bookmarks(server: ApiServerEmulator, client: Client) -> None:
    server.create("pods", sample_pod("a"))
    listed = await client.list(PODS, ListOptions())
    options = ListOptions(resource_version=listed.resource_version, allow_watch_bookmarks=True)
    async with client.watch(PODS, options) as events:
        await server.wait_for_watches(1)
        server.create("pods", sample_pod("b"))
        server.patch("pods", "a", {"metadata": {"labels": {"changed": "yes"}}})
        server.delete("pods", "b")
        got = [await next_event(events) for _ in range(3)]
        assert [(e.type, e.object["metadata"]["name"]) for e in got] == [
            ("ADDED", "b"),
            ("MODIFIED", "a"),
            ("DELETED", "b"),
        ]
        assert got[1].object["metadata"]["labels"]["changed"] == "yes"
        await clock_of(server).advance(BOOKMARK_INTERVAL)
        bookmark = await next_event(events)
        assert bookmark.type == "BOOKMARK"
        assert bookmark.object["metadata"]["resourceVersion"] == server.resource_version
    assert server.requests[-1] == (
        "GET",
        f"{PODS}?watch=1&resourceVersion={listed.resource_version}&allowWatchBookmarks=true",
    )


async def test_watch_list_sends_initial_events_then_the_end_bookmark(
    server: ApiServerEmulator, client: Client
) -> None:
    for name in ("a", "b", "c"):
        server.create("pods", sample_pod(name))
    options = ListOptions(
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        timeout_seconds=300,
    )
    async with client.watch(PODS, options) as events:
        initial = [await next_event(events) for _ in range(3)]
        assert sorted((e.type, e.object["metadata"]["name"]) for e in initial) == [
            ("ADDED", "a"),
            ("ADDED", "b"),
            ("ADDED", "c"),
        ]
        end = await next_event(events)
        assert end.type == "BOOKMARK"
        annotations = end.object["metadata"]["annotations"]
        assert annotations[INITIAL_EVENTS_END_ANNOTATION] == "true"
        server.create("pods", sample_pod("d"))
        added = await next_event(events)
        assert (added.type, added.object["metadata"]["name"]) == ("ADDED", "d")


async def test_a_large_object_crosses_the_wire_whole(
    server: ApiServerEmulator, client: Client
) -> None:
    listed = await client.list(PODS, ListOptions())
    async with client.watch(PODS, ListOptions(resource_version=listed.resource_version)) as events:
        await server.wait_for_watches(1)
        server.create("pods", sample_pod("big", annotation_bytes=1_500_000))
        server.create("pods", sample_pod("small"))
        big, small = await next_event(events), await next_event(events)
    padding = big.object["metadata"]["annotations"]["kubereflector.example/padding"]
    assert len(padding) == 1_500_000
    assert small.object["metadata"]["name"] == "small"


async def test_watch_at_an_expired_version_delivers_an_expired_status(
    server: ApiServerEmulator, client: Client
) -> None:
    server.create("pods", sample_pod("a"))
    old = server.resource_version
    server.create("pods", sample_pod("b"))
    server.compact()
    async with client.watch(PODS, ListOptions(resource_version=old)) as events:
        event = await next_event(events)
    assert event.type == "ERROR"
    assert event.object["code"] == 410
    assert isinstance(error_from_status(event.object), ExpiredError)


async def test_a_too_large_version(server: ApiServerEmulator, client: Client) -> None:
    future = str(int(server.resource_version) + 1000)
    with pytest.raises(TooLargeResourceVersionError):
        await client.list(PODS, ListOptions(resource_version=future))
    options = ListOptions(
        resource_version=future,
        resource_version_match="NotOlderThan",
        send_initial_events=True,
        allow_watch_bookmarks=True,
    )
    async with client.watch(PODS, options) as events:
        event = await next_event(events)
    assert event.type == "ERROR"
    assert isinstance(error_from_status(event.object), TooLargeResourceVersionError)


async def test_dropped_watches(server: ApiServerEmulator, client: Client) -> None:
    listed = await client.list(PODS, ListOptions())
    options = ListOptions(resource_version=listed.resource_version)
    async with client.watch(PODS, options) as events:
        await server.wait_for_watches(1)
        server.drop_watches()
        assert [e async for e in events] == []
    async with client.watch(PODS, options) as events:
        await server.wait_for_watches(1)
        server.drop_watches(abrupt=True)
        with pytest.raises(DecodeError, match="truncated watch stream"):
            await next_event(events)


# -- metadata only -------------------------------------------------------------------


async def test_metadata_only_list_and_watch(server: ApiServerEmulator, client: Client) -> None:
    server.create("pods", sample_pod("a"))
    listed = await client.list(PODS, ListOptions(), metadata_only=True)
    (item,) = listed.items
    assert item["kind"] == "PartialObjectMetadata"
    assert item["apiVersion"] == "meta.k8s.io/v1"
    assert set(item) == {"kind", "apiVersion", "metadata"}
    assert item["metadata"]["name"] == "a"
    options = ListOptions(resource_version=listed.resource_version)
    async with client.watch(PODS, options, metadata_only=True) as events:
        await server.wait_for_watches(1)
        server.create("pods", sample_pod("b"))
        event = await next_event(events)
    assert event.type == "ADDED"
    assert set(event.object) == {"kind", "apiVersion", "metadata"}
    assert event.object["kind"] == "PartialObjectMetadata"


# -- discovery -----------------------------------------------------------------------


async def test_discovery_of_built_ins_and_custom_resources(
    server: ApiServerEmulator, client: Client
) -> None:
    server.register_resource("example.com", "v1", "widgets", "Widget", short_names=["wd"])
    discovery = client.discovery
    for name, expected in [
        ("pods", "v1/pods"),
        ("po", "v1/pods"),
        ("Pod", "v1/pods"),
        ("v1/pods", "v1/pods"),
        ("deploy", "apps/v1/deployments"),
        ("deployments.apps", "apps/v1/deployments"),
        ("apps/v1/deployments", "apps/v1/deployments"),
        ("widgets", "example.com/v1/widgets"),
        ("wd", "example.com/v1/widgets"),
        ("Widget", "example.com/v1/widgets"),
        ("widgets.example.com", "example.com/v1/widgets"),
        ("widgets.v1.example.com", "example.com/v1/widgets"),
    ]:
        assert str(await discovery.resolve(name)) == expected, name
    pods = await discovery.resolve("pods")
    assert pods.namespaced
    assert pods.supports("watch")
    assert pods.supports("list")
    assert not (await discovery.resolve("namespaces")).namespaced
    discovery_requests = [p for _m, p in server.requests if p in ("/api", "/apis")]
    assert discovery_requests == ["/api", "/apis"]


async def test_a_resource_registered_later_is_found_after_a_refresh(
    server: ApiServerEmulator, client: Client
) -> None:
    await client.discovery.resolve("pods")
    server.register_resource(
        "stable.example.com", "v1", "gadgets", "Gadget", namespaced=False, short_names=["gd"]
    )
    gadgets = await client.discovery.resolve("gd")
    assert (gadgets.group, gadgets.resource, gadgets.namespaced) == (
        "stable.example.com",
        "gadgets",
        False,
    )
    with pytest.raises(UnknownResourceError) as info:
        await client.discovery.resolve("gadgetz")
    assert "gadgets" in info.value.suggestions
    assert [p for _m, p in server.requests].count("/apis") == 3


async def test_resource_list_watch_of_custom_resources(
    server: ApiServerEmulator, client: Client
) -> None:
    server.register_resource("example.com", "v1", "widgets", "Widget", short_names=["wd"])
    server.register_resource("example.com", "v1", "gadgets", "Gadget", namespaced=False)
    server.create("widgets.example.com", {"metadata": {"name": "w1"}, "spec": {"size": 1}})
    server.create("gadgets.example.com", {"metadata": {"name": "g1"}})
    widgets = ResourceListWatch(client, "wd", namespace="default")
    gadgets = ResourceListWatch(client, "gadgets", namespace="ignored")
    assert await widgets.path() == "/apis/example.com/v1/namespaces/default/widgets"
    assert await gadgets.path() == "/apis/example.com/v1/gadgets"
    listed = await widgets.list(ListOptions())
    assert names(listed.items) == ["w1"]
    assert names((await gadgets.list(ListOptions())).items) == ["g1"]
    async with widgets.watch(ListOptions(resource_version=listed.resource_version)) as events:
        await server.wait_for_watches(1)
        server.create("widgets.example.com", {"metadata": {"name": "w2"}})
        event = await next_event(events)
    assert (event.type, event.object["kind"], event.object["metadata"]["name"]) == (
        "ADDED",
        "Widget",
        "w2",
    )


# -- errors --------------------------------------------------------------------------


async def test_api_errors_map_to_their_classes(server: ApiServerEmulator, client: Client) -> None:
    with pytest.raises(NotFoundError) as not_found:
        await client.get(f"{PODS}/missing")
    assert f"{server.url}{PODS}/missing" in str(not_found.value)
    server.create("pods", sample_pod("dup"))
    with pytest.raises(ApiError) as conflict:
        await client.create(PODS, sample_pod("dup"))
    assert (conflict.value.status, conflict.value.reason) == (409, "AlreadyExists")

    server.fail_next(1, 429, retry_after=3)
    with pytest.raises(TooManyRequestsError) as throttled:
        await client.list(PODS, ListOptions())
    assert throttled.value.retry_after == 3.0

    for code, cls in [(410, ExpiredError), (403, ForbiddenError), (500, ApiError)]:
        server.fail_next(1, code)
        with pytest.raises(cls) as info:
            async with client.watch(PODS, ListOptions()):
                pytest.fail("the watch opened")
        assert info.value.status == code
        assert server.token is not None
        assert server.token not in str(info.value)
    assert (await client.list(PODS, ListOptions())).items  # faults are used up


class CountingAuth:
    def __init__(self, token: str) -> None:
        self.token = token
        self.invalidated = 0

    async def authorize(self) -> AuthInfo:
        return AuthInfo({"Authorization": f"Bearer {self.token}"})

    def invalidate(self) -> None:
        self.invalidated += 1


async def test_unauthorized(server: ApiServerEmulator) -> None:
    assert server.token is not None
    wrong = CountingAuth("not-the-token")
    async with Client(ClientConfig(server=server.url, auth=wrong)) as client:
        with pytest.raises(UnauthorizedError) as info:
            await client.list(PODS, ListOptions())
    assert wrong.invalidated == 1
    assert "not-the-token" not in str(info.value)
    # a single 401 (an expired token, say) is retried once and succeeds
    right = CountingAuth(server.token)
    async with Client(ClientConfig(server=server.url, auth=right)) as client:
        server.fail_next(1, 401)
        assert (await client.list(PODS, ListOptions())).items == []
    assert right.invalidated == 1


async def test_tls_with_the_emulators_ca() -> None:
    async with ApiServerEmulator(tls=True) as server:
        assert server.url.startswith("https://")
        trusted = ClientConfig(
            server=server.url, ca_data=server.ca_pem, auth=StaticAuth(token=server.token)
        )
        async with Client(trusted) as client:
            assert (await client.list(PODS, ListOptions())).items == []
        untrusted = ClientConfig(server=server.url, auth=StaticAuth(token=server.token))
        async with Client(untrusted) as client:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await client.list(PODS, ListOptions())
