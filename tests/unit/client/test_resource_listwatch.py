"""ResourceListWatch: paths, query parameters and resolution for any resource."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import pytest_asyncio
from aiohttp import web

from discovery_doc import Resource, aggregated_discovery
from fake_http import FakeServer, serve
from kubereflector import (
    ApiError,
    Cache,
    ExpiredError,
    ListerWatcher,
    ListOptions,
    Reflector,
    ReflectorOptions,
)
from kubereflector.client import (
    Client,
    ClientConfig,
    ResourceInfo,
    ResourceListWatch,
    UnknownResourceError,
)
from kubereflector.models import Deployment, Node
from running_task import running

pytestmark = pytest.mark.asyncio

RESOURCES = [
    Resource("", "v1", "pods", "Pod", True, ["po"]),
    Resource("", "v1", "nodes", "Node", False, ["no"]),
    Resource("", "v1", "componentstatuses", "ComponentStatus", False, ["cs"], ["get", "list"]),
    Resource("", "v1", "bindings", "Binding", True, [], ["create"]),
    Resource("apps", "v1", "deployments", "Deployment", True, ["deploy"]),
    Resource("example.com", "v1", "gadgets", "Gadget", False, ["gd"]),
]


def pod(name: str, rv: str) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"namespace": "ns", "name": name, "resourceVersion": rv}}


def line(etype: str, obj: dict[str, Any]) -> bytes:
    return msgspec.json.encode({"type": etype, "object": obj}) + b"\n"


class Api:
    """Answers lists with one pod and watches with ``watch_lines``, on any path."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.watch_lines: list[bytes] = []
        self.hold = asyncio.Event()  # watches stay open until this is set
        server.json("GET", "/api", aggregated_discovery(RESOURCES, core=True))
        server.json("GET", "/apis", aggregated_discovery(RESOURCES, core=False))

    def serve_collection(self, path: str) -> None:
        self.server.route("GET", path, self.collection)

    async def collection(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "1":
            response = web.StreamResponse()
            await response.prepare(request)
            for chunk in self.watch_lines:
                await response.write(chunk)
            await self.hold.wait()
            return response
        return web.json_response(
            {"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": [pod("a", "4")]}
        )

    def requests_to(self, path: str) -> list[dict[str, str]]:
        return [dict(r.query) for r in self.server.requests if r.path == path]

    def discovery_requests(self) -> int:
        return sum(r.path in ("/api", "/apis") for r in self.server.requests)


@pytest_asyncio.fixture
async def api() -> AsyncIterator[tuple[Api, Client]]:
    async with serve() as server, Client(ClientConfig(server=server.url)) as client:
        api = Api(server)
        try:
            yield api, client
        finally:
            api.hold.set()


async def list_and_watch_paths(lw: ResourceListWatch, api: Api) -> list[str]:
    path = await lw.path()
    api.serve_collection(path)
    await lw.list(ListOptions())
    api.hold.set()
    async with lw.watch(ListOptions()) as events:
        assert [e async for e in events] == []
    api.hold.clear()
    return [r.path for r in api.server.requests if r.path not in ("/api", "/apis")]


@pytest.mark.parametrize(
    ("resource", "namespace", "path"),
    [
        ("pods", "ns", "/api/v1/namespaces/ns/pods"),
        ("po", None, "/api/v1/pods"),
        ("Pod", "", "/api/v1/pods"),
        ("nodes", "ns", "/api/v1/nodes"),  # cluster-scoped: the namespace is ignored
        ("deploy", "team-a", "/apis/apps/v1/namespaces/team-a/deployments"),
        ("apps/v1/deployments", None, "/apis/apps/v1/deployments"),
        ("gd", "ns", "/apis/example.com/v1/gadgets"),
        ("gadgets.example.com", None, "/apis/example.com/v1/gadgets"),
    ],
)
async def test_paths(
    api: tuple[Api, Client], resource: str, namespace: str | None, path: str
) -> None:
    server_api, client = api
    lw = ResourceListWatch(client, resource, namespace=namespace)
    assert await list_and_watch_paths(lw, server_api) == [path, path]


async def test_a_resource_info_needs_no_discovery(api: tuple[Api, Client]) -> None:
    server_api, client = api
    info = ResourceInfo("apps", "v1", "deployments", "Deployment", True)
    lw = ResourceListWatch(client, info, namespace="ns")
    assert await lw.resource_info() is info
    paths = await list_and_watch_paths(lw, server_api)
    assert paths == ["/apis/apps/v1/namespaces/ns/deployments"] * 2
    assert server_api.discovery_requests() == 0


async def test_a_model_needs_no_discovery(api: tuple[Api, Client]) -> None:
    server_api, client = api
    lw = ResourceListWatch(client, Deployment, namespace="ns")
    assert await lw.resource_info() == ResourceInfo("apps", "v1", "deployments", "Deployment", True)
    assert lw.with_object_mode("compact").resource is lw.resource
    paths = await list_and_watch_paths(lw, server_api)
    assert paths == ["/apis/apps/v1/namespaces/ns/deployments"] * 2
    assert server_api.discovery_requests() == 0
    with pytest.raises(ValueError, match=r"Node \(nodes\) is cluster-scoped"):
        ResourceListWatch(client, Node, namespace="ns")


async def test_resolved_once(api: tuple[Api, Client]) -> None:
    server_api, client = api
    lw = ResourceListWatch(client, "pods")
    server_api.serve_collection("/api/v1/pods")
    for _ in range(3):
        await lw.list(ListOptions())
    assert server_api.discovery_requests() == 2


async def test_selectors_are_combined(api: tuple[Api, Client]) -> None:
    server_api, client = api
    server_api.serve_collection("/api/v1/namespaces/ns/pods")
    server_api.hold.set()
    own = ResourceListWatch(
        client, "pods", "ns", label_selector="app=web", field_selector="status.phase=Running"
    )
    plain = ResourceListWatch(client, "pods", "ns")
    await own.list(ListOptions())
    await own.list(ListOptions(label_selector="tier in (a,b)", field_selector="spec.nodeName=n1"))
    await plain.list(ListOptions(label_selector="x=y"))
    async with own.watch(ListOptions(label_selector="tier=db", resource_version="7")) as events:
        assert [e async for e in events] == []
    assert server_api.requests_to("/api/v1/namespaces/ns/pods") == [
        {"labelSelector": "app=web", "fieldSelector": "status.phase=Running"},
        {
            "labelSelector": "app=web,tier in (a,b)",
            "fieldSelector": "status.phase=Running,spec.nodeName=n1",
        },
        {"labelSelector": "x=y"},
        {
            "watch": "1",
            "resourceVersion": "7",
            "labelSelector": "app=web,tier=db",
            "fieldSelector": "status.phase=Running",
        },
    ]


async def test_metadata_only(api: tuple[Api, Client]) -> None:
    server_api, client = api
    server_api.serve_collection("/api/v1/pods")
    server_api.hold.set()
    lw = ResourceListWatch(client, "pods", metadata_only=True)
    await lw.list(ListOptions())
    async with lw.watch(ListOptions()) as events:
        assert [e async for e in events] == []
    accepts = [r.headers["Accept"] for r in server_api.server.requests if r.path == "/api/v1/pods"]
    assert accepts == [
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
    ]


async def test_unknown_resource(api: tuple[Api, Client]) -> None:
    _server_api, client = api
    lw = ResourceListWatch(client, "podz")
    with pytest.raises(UnknownResourceError, match="podz"):
        await lw.list(ListOptions())
    with pytest.raises(UnknownResourceError):
        async with lw.watch(ListOptions()):
            pytest.fail("the watch opened")


@pytest.mark.parametrize(("resource", "verb"), [("bindings", "list"), ("cs", "watch")])
async def test_verbs_the_resource_lacks(api: tuple[Api, Client], resource: str, verb: str) -> None:
    _server_api, client = api
    lw = ResourceListWatch(client, resource)

    async def call() -> None:
        if verb == "list":
            await lw.list(ListOptions())
        else:
            async with lw.watch(ListOptions()):
                pytest.fail("the watch opened")

    with pytest.raises(ApiError) as info:
        await call()
    assert info.value.status == 405
    assert f"'{verb}'" in str(info.value)
    assert client.server in str(info.value)


async def test_is_a_lister_watcher(api: tuple[Api, Client]) -> None:
    _server_api, client = api
    lw = ResourceListWatch(client, "pods", "ns", label_selector="a=b", metadata_only=True)
    assert isinstance(lw, ListerWatcher)
    assert repr(lw) == (
        "ResourceListWatch(pods, namespace='ns', label_selector='a=b', metadata_only=True)"
    )


class SignallingCache(Cache):
    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def replace(self, items: list[Any], resource_version: str) -> None:
        super().replace(items, resource_version)
        self.changed.set()

    def add(self, obj: Any) -> None:
        super().add(obj)
        self.changed.set()


async def test_a_reflector_syncs_by_watch_list(api: tuple[Api, Client]) -> None:
    server_api, client = api
    server_api.serve_collection("/api/v1/namespaces/ns/pods")
    end = {
        "kind": "Pod",
        "metadata": {"resourceVersion": "9", "annotations": {"k8s.io/initial-events-end": "true"}},
    }
    server_api.watch_lines = [
        line("ADDED", pod("a", "7")) + line("ADDED", pod("b", "8")),
        line("BOOKMARK", end),
    ]
    store = SignallingCache()
    reflector = Reflector(
        ResourceListWatch(client, "pods", "ns"), store, options=ReflectorOptions(idle_timeout=None)
    )
    async with running(reflector):
        await asyncio.wait_for(store.changed.wait(), 10)
    assert sorted(store.list_keys()) == ["ns/a", "ns/b"]
    assert reflector.last_sync_resource_version == "9"
    (query,) = server_api.requests_to("/api/v1/namespaces/ns/pods")
    assert (
        query.items()
        >= {
            "watch": "1",
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": "true",
        }.items()
    )
    assert "timeoutSeconds" in query


async def test_an_error_event_reaches_the_reflector_as_its_class(
    api: tuple[Api, Client],
) -> None:
    server_api, client = api
    server_api.serve_collection("/api/v1/pods")
    expired = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    server_api.watch_lines = [line("ERROR", expired)]
    errors: list[BaseException] = []
    seen = asyncio.Event()

    def on_error(_reflector: Reflector, err: BaseException) -> None:
        errors.append(err)
        seen.set()

    store = SignallingCache()
    reflector = Reflector(
        ResourceListWatch(client, "pods"),
        store,
        options=ReflectorOptions(use_watch_list=False, idle_timeout=None),
        on_watch_error=on_error,
    )
    async with running(reflector):
        await asyncio.wait_for(seen.wait(), 10)
    assert isinstance(errors[0], ExpiredError)
    assert store.list_keys() == ["ns/a"]


async def test_a_stream_can_be_left_mid_way_again_and_again(api: tuple[Api, Client]) -> None:
    server_api, client = api
    server_api.serve_collection("/api/v1/pods")
    server_api.watch_lines = [line("ADDED", pod("a", "2"))]
    lw = ResourceListWatch(client, "pods")
    for _ in range(3):  # each stream is held open by the server until the client leaves
        async with lw.watch(ListOptions()) as events:
            first = await asyncio.wait_for(anext(aiter(events)), 5)
            assert first.type == "ADDED"
    assert len(server_api.requests_to("/api/v1/pods")) == 3
