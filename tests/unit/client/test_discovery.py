"""Discovery: the documents a server publishes, and the names users type."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from fake_http import FakeServer, serve, status
from kubereflector.client import (
    Client,
    ClientConfig,
    Discovery,
    ResourceInfo,
    UnknownResourceError,
)
from kubereflector.client.discovery import ACCEPT_AGGREGATED

pytestmark = pytest.mark.asyncio

ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

# (group, [versions, preferred first], [(version, plural, kind, namespaced, short names, verbs)])
Catalog = list[tuple[str, list[str], list[tuple[str, str, str, bool, list[str], list[str]]]]]


HPA = "HorizontalPodAutoscaler"


def catalog() -> Catalog:
    return [
        (
            "",
            ["v1"],
            [
                ("v1", "pods", "Pod", True, ["po"], ALL_VERBS),
                ("v1", "services", "Service", True, ["svc"], ALL_VERBS),
                ("v1", "nodes", "Node", False, ["no"], ALL_VERBS),
                ("v1", "namespaces", "Namespace", False, ["ns"], ALL_VERBS),
                ("v1", "events", "Event", True, ["ev"], ALL_VERBS),
                ("v1", "bindings", "Binding", True, [], ["create"]),
            ],
        ),
        (
            "apps",
            ["v1"],
            [
                ("v1", "deployments", "Deployment", True, ["deploy"], ALL_VERBS),
                ("v1", "replicasets", "ReplicaSet", True, ["rs"], ALL_VERBS),
            ],
        ),
        ("events.k8s.io", ["v1"], [("v1", "events", "Event", True, ["ev"], ALL_VERBS)]),
        (
            "autoscaling",
            ["v2", "v1"],
            [
                ("v2", "horizontalpodautoscalers", HPA, True, ["hpa"], ALL_VERBS),
                ("v1", "horizontalpodautoscalers", HPA, True, ["hpa"], ALL_VERBS),
            ],
        ),
        (
            "metrics.k8s.io",
            ["v1beta1"],
            [
                ("v1beta1", "pods", "PodMetrics", True, [], ["get", "list"]),
                ("v1beta1", "nodes", "NodeMetrics", False, [], ["get", "list"]),
            ],
        ),
        (
            "example.com",
            ["v1", "v1alpha1"],
            [
                ("v1", "widgets", "Widget", True, ["wd"], ALL_VERBS),
                ("v1alpha1", "widgets", "Widget", True, ["wd"], ALL_VERBS),
                ("v1alpha1", "gadgets", "Gadget", False, [], ALL_VERBS),
            ],
        ),
    ]  # fmt: skip


def aggregated(cat: Catalog, core: bool) -> dict[str, Any]:
    items = []
    for group, versions, resources in cat:
        if (group == "") != core:
            continue
        items.append(
            {
                "metadata": {"name": group} if group else {"creationTimestamp": None},
                "versions": [
                    {
                        "version": v,
                        "freshness": "Current",
                        "resources": [
                            {
                                "resource": plural,
                                "responseKind": {"group": group, "version": v, "kind": kind},
                                "scope": "Namespaced" if namespaced else "Cluster",
                                "singularResource": kind.lower(),
                                "verbs": verbs,
                                **({"shortNames": short} if short else {}),
                                "subresources": [
                                    {"subresource": "status", "verbs": ["get", "patch"]}
                                ],
                            }
                            for (rv, plural, kind, namespaced, short, verbs) in resources
                            if rv == v
                        ],
                    }
                    for v in versions
                ],
            }
        )
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": items}


def legacy_resource_list(group: str, version: str, cat: Catalog) -> dict[str, Any]:
    gv = f"{group}/{version}" if group else version
    resources: list[dict[str, Any]] = []
    for g, _versions, entries in cat:
        if g != group:
            continue
        for v, plural, kind, namespaced, short, verbs in entries:
            if v != version:
                continue
            resources.append(
                {
                    "name": plural,
                    "singularName": "",  # old servers leave it empty
                    "namespaced": namespaced,
                    "kind": kind,
                    "verbs": verbs,
                    **({"shortNames": short} if short else {}),
                }
            )
            resources.append(
                {
                    "name": f"{plural}/status",
                    "namespaced": namespaced,
                    "kind": kind,
                    "verbs": ["get"],
                }
            )
    return {"kind": "APIResourceList", "groupVersion": gv, "resources": resources}


class DiscoveryServer:
    """Serves a catalog, aggregated or legacy; the catalog can change between requests."""

    def __init__(self, server: FakeServer, *, legacy: bool = False) -> None:
        self.server = server
        self.catalog = catalog()
        self.legacy = legacy
        self.failing: set[str] = set()
        server.route("GET", "/api", self.api)
        server.route("GET", "/apis", self.apis)
        server.route("GET", "/api/v1", self.group_version)
        for group, versions, _ in self.catalog:
            for v in versions if group else ():
                server.route("GET", f"/apis/{group}/{v}", self.group_version)

    def discovery_requests(self) -> int:
        return len(self.server.requests)

    async def api(self, request: web.Request) -> web.StreamResponse:
        if not self.legacy and "APIGroupDiscoveryList" in request.headers.get("Accept", ""):
            return web.json_response(aggregated(self.catalog, core=True))
        return web.json_response({"kind": "APIVersions", "versions": ["v1"]})

    async def apis(self, request: web.Request) -> web.StreamResponse:
        if not self.legacy and "APIGroupDiscoveryList" in request.headers.get("Accept", ""):
            return web.json_response(aggregated(self.catalog, core=False))
        groups = []
        for group, versions, _ in self.catalog:
            if not group:
                continue
            gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
            groups.append(
                {
                    "name": group,
                    # served order differs from preference, as it may on real servers
                    "versions": list(reversed(gvs)),
                    "preferredVersion": gvs[0],
                }
            )
        return web.json_response({"kind": "APIGroupList", "groups": groups})

    async def group_version(self, request: web.Request) -> web.StreamResponse:
        parts = request.path.strip("/").split("/")
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        if f"{group}/{version}" in self.failing:
            return web.json_response(status(503, "ServiceUnavailable", "down"), status=503)
        return web.json_response(legacy_resource_list(group, version, self.catalog))


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with serve() as s:
        yield s


@pytest_asyncio.fixture
async def client(server: FakeServer) -> AsyncIterator[Client]:
    async with Client(ClientConfig(server=server.url)) as c:
        yield c


NAMES = [
    ("pods", "", "v1", "pods"),
    ("pod", "", "v1", "pods"),
    ("Pod", "", "v1", "pods"),
    ("PODS", "", "v1", "pods"),
    ("po", "", "v1", "pods"),
    ("v1/pods", "", "v1", "pods"),
    ("nodes", "", "v1", "nodes"),
    ("pods.metrics.k8s.io", "metrics.k8s.io", "v1beta1", "pods"),
    ("podmetrics", "metrics.k8s.io", "v1beta1", "pods"),
    ("deployments", "apps", "v1", "deployments"),
    ("deployment", "apps", "v1", "deployments"),
    ("Deployment", "apps", "v1", "deployments"),
    ("deploy", "apps", "v1", "deployments"),
    ("deployments.apps", "apps", "v1", "deployments"),
    ("deployment.apps", "apps", "v1", "deployments"),
    ("deploy.apps", "apps", "v1", "deployments"),
    ("deployments.v1.apps", "apps", "v1", "deployments"),
    ("apps/v1/deployments", "apps", "v1", "deployments"),
    ("events", "", "v1", "events"),
    ("ev", "", "v1", "events"),
    ("events.events.k8s.io", "events.k8s.io", "v1", "events"),
    ("hpa", "autoscaling", "v2", "horizontalpodautoscalers"),
    ("horizontalpodautoscalers.v1.autoscaling", "autoscaling", "v1", "horizontalpodautoscalers"),
    ("autoscaling/v1/hpa", "autoscaling", "v1", "horizontalpodautoscalers"),
    ("widgets", "example.com", "v1", "widgets"),
    ("widget", "example.com", "v1", "widgets"),
    ("Widget", "example.com", "v1", "widgets"),
    ("wd", "example.com", "v1", "widgets"),
    ("widgets.example.com", "example.com", "v1", "widgets"),
    ("widgets.v1alpha1.example.com", "example.com", "v1alpha1", "widgets"),
    ("example.com/v1alpha1/widgets", "example.com", "v1alpha1", "widgets"),
    ("gadgets", "example.com", "v1alpha1", "gadgets"),
]


@pytest.mark.parametrize("legacy", [False, True], ids=["aggregated", "legacy"])
async def test_name_forms(server: FakeServer, client: Client, legacy: bool) -> None:
    DiscoveryServer(server, legacy=legacy)
    discovery = Discovery(client)
    for name, group, version, plural in NAMES:
        info = await discovery.resolve(name)
        assert (info.group, info.version, info.resource) == (group, version, plural), name
    if legacy:
        assert "/api/v1" in server.paths()
        assert "/apis/autoscaling/v1" in server.paths()
    else:
        assert server.paths() == ["/api", "/apis"]


@pytest.mark.parametrize("legacy", [False, True], ids=["aggregated", "legacy"])
async def test_resource_details(server: FakeServer, client: Client, legacy: bool) -> None:
    DiscoveryServer(server, legacy=legacy)
    pods = await client.discovery.resolve("po")
    assert pods == ResourceInfo(
        group="",
        version="v1",
        resource="pods",
        kind="Pod",
        namespaced=True,
        verbs=tuple(ALL_VERBS),
        short_names=("po",),
        singular="pod",
    )
    nodes = await client.discovery.resolve("nodes")
    assert not nodes.namespaced
    binding = await client.discovery.resolve("bindings")
    assert binding.supports("create")
    assert not binding.supports("watch")
    assert pods.supports("watch")
    names = [str(r) for r in await client.discovery.resources()]
    assert names[:2] == ["v1/pods", "v1/services"]
    assert "apps/v1/deployments" in names
    assert not any("status" in n for n in names)
    assert names.index("autoscaling/v2/horizontalpodautoscalers") < names.index(
        "autoscaling/v1/horizontalpodautoscalers"
    )


async def test_discovery_asks_for_aggregated_documents(server: FakeServer, client: Client) -> None:
    DiscoveryServer(server)
    await client.discovery.resolve("pods")
    assert [r.headers["Accept"] for r in server.requests] == [ACCEPT_AGGREGATED] * 2


async def test_resource_info_paths_and_names() -> None:
    pods = ResourceInfo("", "v1", "pods", "Pod", True)
    deploy = ResourceInfo("apps", "v1", "deployments", "Deployment", True)
    nodes = ResourceInfo("", "v1", "nodes", "Node", False)
    crd = ResourceInfo("example.com", "v1", "widgets", "Widget", False)
    assert pods.api_path() == "/api/v1/pods"
    assert pods.api_path("") == "/api/v1/pods"
    assert pods.api_path("kube-system") == "/api/v1/namespaces/kube-system/pods"
    assert deploy.api_path("ns") == "/apis/apps/v1/namespaces/ns/deployments"
    assert nodes.api_path("ns") == "/api/v1/nodes"
    assert crd.api_path() == "/apis/example.com/v1/widgets"
    assert (pods.group_version, deploy.group_version) == ("v1", "apps/v1")
    assert (pods.qualified_name, deploy.qualified_name) == ("pods", "deployments.apps")
    assert (str(pods), str(crd)) == ("v1/pods", "example.com/v1/widgets")
    assert pods.supports("anything")  # no verbs published: assume everything
    assert {pods, ResourceInfo("", "v1", "pods", "Pod", True)} == {pods}


async def test_cached_then_refreshed_once_when_a_name_is_missing(
    server: FakeServer, client: Client
) -> None:
    docs = DiscoveryServer(server)
    discovery = client.discovery
    assert discovery is client.discovery
    await discovery.resolve("pods")
    await discovery.resolve("deploy")
    assert docs.discovery_requests() == 2
    # a CRD appears after the cache was filled
    docs.catalog.append(("gizmo.io", ["v1"], [("v1", "gizmos", "Gizmo", True, ["gz"], ALL_VERBS)]))
    info = await discovery.resolve("gz")
    assert (info.group, info.resource) == ("gizmo.io", "gizmos")
    assert docs.discovery_requests() == 4
    await discovery.resolve("gizmos.gizmo.io")
    assert docs.discovery_requests() == 4
    with pytest.raises(UnknownResourceError) as info_err:
        await discovery.resolve("gizmoz")
    assert docs.discovery_requests() == 6
    err = info_err.value
    assert isinstance(err, LookupError)
    assert err.name == "gizmoz"
    assert "gizmos" in err.suggestions
    assert "'gizmoz'" in str(err)
    assert "did you mean" in str(err)


async def test_a_cold_miss_fetches_once(server: FakeServer, client: Client) -> None:
    docs = DiscoveryServer(server)
    with pytest.raises(UnknownResourceError) as info:
        await Discovery(client).resolve("deploymnets")
    assert docs.discovery_requests() == 2
    assert "deployments" in info.value.suggestions


async def test_concurrent_lookups_share_one_fetch(server: FakeServer, client: Client) -> None:
    docs = DiscoveryServer(server)
    discovery = Discovery(client)
    found = await asyncio.gather(*(discovery.resolve(n) for n in ("po", "svc", "deploy", "wd")))
    assert [f.resource for f in found] == ["pods", "services", "deployments", "widgets"]
    assert docs.discovery_requests() == 2


async def test_invalidate_fetches_again(server: FakeServer, client: Client) -> None:
    docs = DiscoveryServer(server)
    discovery = Discovery(client)
    await discovery.resolve("pods")
    discovery.invalidate()
    await discovery.resolve("pods")
    assert docs.discovery_requests() == 4


@pytest.mark.parametrize("name", ["pods/log", "", "a/b/c/d", "pods.nogroup", "v2/pods"])
async def test_names_that_resolve_to_nothing(server: FakeServer, client: Client, name: str) -> None:
    DiscoveryServer(server)
    with pytest.raises(UnknownResourceError):
        await client.discovery.resolve(name)


async def test_an_unavailable_group_version_is_skipped(server: FakeServer, client: Client) -> None:
    docs = DiscoveryServer(server, legacy=True)
    docs.failing.add("metrics.k8s.io/v1beta1")
    assert (await client.discovery.resolve("deploy")).resource == "deployments"
    with pytest.raises(UnknownResourceError):
        await client.discovery.resolve("podmetrics")


async def test_a_server_without_apis(server: FakeServer, client: Client) -> None:
    server.json("GET", "/api", {"kind": "APIVersions", "versions": ["v1"]})
    server.json("GET", "/api/v1", legacy_resource_list("", "v1", catalog()))
    assert (await client.discovery.resolve("po")).kind == "Pod"
    assert server.paths() == ["/api", "/api/v1", "/apis"]


# -- documents that would rewrite paths ----------------------------------------------


HOSTILE = [
    # Only the first group version is served with the right names.
    ("evil.io", ["v1"], [("v1", "..", "Dots", True, [], ALL_VERBS)]),
    ("evil.io", ["v1"], [("v1", "a%2Fb", "Slash", True, [], ALL_VERBS)]),
    ("..", ["v1"], [("v1", "things", "Thing", True, [], ALL_VERBS)]),
    ("up.io", [".."], [("..", "things", "Thing", True, [], ALL_VERBS)]),
]


@pytest.mark.parametrize("legacy", [False, True], ids=["aggregated", "legacy"])
async def test_names_from_the_server_that_are_no_path_segment_are_skipped_and_logged(
    server: FakeServer, client: Client, legacy: bool, caplog: pytest.LogCaptureFixture
) -> None:
    docs = DiscoveryServer(server, legacy=legacy)
    docs.catalog.extend(HOSTILE)
    for group, versions, _ in HOSTILE:  # serve legacy documents wherever they are asked for
        for v in versions:
            server.route("GET", f"/apis/{group}/{v}", docs.group_version)
    caplog.set_level("WARNING", logger="kubereflector.client.discovery")
    resources = await client.discovery.resources()
    names = {(r.group, r.version, r.resource) for r in resources}
    assert ("apps", "v1", "deployments") in names
    assert not {n for n in names if {"..", "a%2Fb"} & set(n)}
    assert not [p for p in server.paths() if ".." in p.split("/")]
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings
    assert all(f"{server.url}/api" in w and "skipped" in w for w in warnings)
    assert any("'..'" in w for w in warnings)
    with pytest.raises(UnknownResourceError):
        await client.discovery.resolve("things")


async def test_legacy_core_versions_that_are_no_path_segment_are_skipped(
    server: FakeServer, client: Client
) -> None:
    server.json("GET", "/api", {"kind": "APIVersions", "versions": ["../apis", 7, "v1"]})
    server.json("GET", "/api/v1", legacy_resource_list("", "v1", catalog()))
    assert (await client.discovery.resolve("po")).kind == "Pod"
    assert server.paths() == ["/api", "/api/v1", "/apis"]
