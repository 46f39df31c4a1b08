"""ResourceClient: the requests each verb sends, and what it refuses before sending any;
typed by a model, the same requests without asking discovery."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from typing_extensions import NotRequired, TypedDict

from fake_http import FakeServer, serve, status
from kubereflector import MethodNotAllowedError
from kubereflector.client import Client, ClientConfig, ResourceClient, ResourceInfo
from kubereflector.models import ApiResource, ConfigMap, Namespace, register
from kubereflector.models.meta_v1 import ObjectMeta

pytestmark = pytest.mark.asyncio

CONFIGMAPS = ResourceInfo("", "v1", "configmaps", "ConfigMap", True, verbs=())
WIDGETS = ResourceInfo("example.com", "v1", "widgets", "Widget", False, verbs=("get", "list"))
CM_PATH = "/api/v1/namespaces/ns/configmaps"


async def echo(request: web.Request) -> web.StreamResponse:
    """Answer with the request's body (or a fixed object) as the stored object."""
    body = await request.read()
    obj = json.loads(body) if body else {"metadata": {"name": "x"}}
    return web.json_response(obj)


@pytest_asyncio.fixture
async def setup() -> AsyncIterator[tuple[FakeServer, Client]]:
    async with serve() as server, Client(ClientConfig(server=server.url)) as client:
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            server.route(method, CM_PATH, echo)
            server.route(method, f"{CM_PATH}/a", echo)
            server.route(method, f"{CM_PATH}/a/status", echo)
        yield server, client


def last(server: FakeServer) -> tuple[str, str, dict[str, str], str, Any]:
    seen = server.requests[-1]
    body = json.loads(seen.body) if seen.body else None
    return seen.method, seen.path, dict(seen.query), seen.headers.get("Content-Type", ""), body


async def test_create_fills_in_the_type_and_leaves_the_caller_s_object_alone(
    setup: tuple[FakeServer, Client],
) -> None:
    server, client = setup
    cms = ResourceClient(client, CONFIGMAPS, "ns")
    obj = {"metadata": {"name": "a"}, "data": {"k": "v"}}
    await cms.create(obj, dry_run=True, field_manager="me")
    method, path, query, content_type, body = last(server)
    assert (method, path, query) == ("POST", CM_PATH, {"dryRun": "All", "fieldManager": "me"})
    assert content_type == "application/json"
    assert body == {"apiVersion": "v1", "kind": "ConfigMap", **obj}
    assert obj == {"metadata": {"name": "a"}, "data": {"k": "v"}}


async def test_update_and_update_status_put_the_object(setup: tuple[FakeServer, Client]) -> None:
    server, client = setup
    cms = ResourceClient(client, CONFIGMAPS, "ns")
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "resourceVersion": "7"},
    }
    await cms.update(obj)
    assert last(server)[:3] == ("PUT", f"{CM_PATH}/a", {})
    assert last(server)[4] == obj
    await cms.update_status(obj, field_manager="st")
    assert last(server)[:3] == ("PUT", f"{CM_PATH}/a/status", {"fieldManager": "st"})


@pytest.mark.parametrize(
    ("patch_type", "content_type"),
    [
        ("merge", "application/merge-patch+json"),
        ("json", "application/json-patch+json"),
        ("strategic", "application/strategic-merge-patch+json"),
    ],
)
async def test_patch_types(
    setup: tuple[FakeServer, Client], patch_type: Any, content_type: str
) -> None:
    server, client = setup
    cms = ResourceClient(client, CONFIGMAPS, "ns")
    await cms.patch("a", {"data": {"k": "v"}}, type=patch_type, subresource="status")
    method, path, _, sent_type, body = last(server)
    assert (method, path, sent_type, body) == (
        "PATCH",
        f"{CM_PATH}/a/status",
        content_type,
        {"data": {"k": "v"}},
    )


async def test_apply_is_an_apply_patch_with_its_manager(setup: tuple[FakeServer, Client]) -> None:
    server, client = setup
    cms = ResourceClient(client, CONFIGMAPS, "ns")
    await cms.apply({"metadata": {"name": "a"}, "data": {"k": "v"}}, field_manager="me", force=True)
    method, path, query, content_type, body = last(server)
    assert (method, path, content_type) == ("PATCH", f"{CM_PATH}/a", "application/apply-patch+yaml")
    assert query == {"fieldManager": "me", "force": "true"}
    assert body["apiVersion"] == "v1"
    assert body["kind"] == "ConfigMap"


async def test_delete_sends_delete_options(setup: tuple[FakeServer, Client]) -> None:
    server, client = setup
    cms = ResourceClient(client, CONFIGMAPS, "ns")
    await cms.delete(
        "a",
        propagation_policy="Foreground",
        grace_period_seconds=0,
        preconditions={"uid": "u-1"},
        dry_run=True,
    )
    method, path, _, _, body = last(server)
    assert (method, path) == ("DELETE", f"{CM_PATH}/a")
    assert body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "u-1"},
        "dryRun": ["All"],
    }


async def test_bad_input_is_refused_before_any_request(setup: tuple[FakeServer, Client]) -> None:
    server, client = setup
    anywhere = ResourceClient(client, CONFIGMAPS)
    cms = ResourceClient(client, CONFIGMAPS, "ns")
    with pytest.raises(ValueError, match="configmaps is namespaced"):
        await anywhere.get("a")
    with pytest.raises(ValueError, match="give the ResourceClient a namespace"):
        await anywhere.create({"metadata": {"name": "a"}})
    with pytest.raises(ValueError, match="may not contain '/'"):
        await cms.get("a/../../secrets")
    with pytest.raises(ValueError, match=r"no metadata\.name"):
        await cms.update({"metadata": {}})
    with pytest.raises(ValueError, match="no metadata mapping"):
        await cms.create({"data": {}})
    with pytest.raises(TypeError, match="mapping"):
        await cms.create([])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="type must be one of"):
        await cms.patch("a", {}, type="yaml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="field_manager"):
        await cms.apply({"metadata": {"name": "a"}}, field_manager="")
    with pytest.raises(ValueError, match="DNS-1123"):
        ResourceClient(client, CONFIGMAPS, "Bad/Namespace")
    with pytest.raises(MethodNotAllowedError, match="does not support 'create' on widgets"):
        await ResourceClient(client, WIDGETS).create({"metadata": {"name": "w"}})
    assert server.requests == []


async def test_list_fetches_every_page_and_starts_over_when_the_token_expires(
    setup: tuple[FakeServer, Client],
) -> None:
    server, client = setup
    pages = {
        "": (["a", "b"], "t1"),
        "t1": (["c", "d"], "t2"),
        "t2": (["e"], ""),
    }
    expire_at = {"token": ""}

    async def collection(request: web.Request) -> web.StreamResponse:
        token = request.query.get("continue", "")
        if token and token == expire_at["token"]:
            return web.json_response(status(410, "Expired", "too old"), status=410)
        if "limit" not in request.query:
            names, following = ["a", "b", "c", "d", "e", "f"], ""
        else:
            names, following = pages[token]
        meta = {"resourceVersion": "42", "continue": following}
        items = [{"metadata": {"name": n}} for n in names]
        return web.json_response(
            {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta, "items": items}
        )

    server.route("GET", CM_PATH, collection)
    cms = ResourceClient(client, CONFIGMAPS, "ns")
    result = await cms.list(limit=2, label_selector="a=b")
    assert [i["metadata"]["name"] for i in result.items] == ["a", "b", "c", "d", "e"]
    assert result.resource_version == "42"
    assert all(i["kind"] == "ConfigMap" for i in result.items)
    queries = [dict(r.query) for r in server.requests]
    assert queries[0] == {"limit": "2", "labelSelector": "a=b"}
    assert queries[1] == {"limit": "2", "labelSelector": "a=b", "continue": "t1"}
    server.requests.clear()
    expire_at["token"] = "t2"
    again = await cms.list(limit=2)
    assert [i["metadata"]["name"] for i in again.items] == ["a", "b", "c", "d", "e", "f"]
    assert dict(server.requests[-1].query) == {}  # the fallback lists everything at once


async def test_client_resource_resolves_lazily_through_discovery(
    setup: tuple[FakeServer, Client],
) -> None:
    server, client = setup
    server.json(
        "GET",
        "/api",
        {
            "kind": "APIGroupDiscoveryList",
            "items": [
                {
                    "metadata": {},
                    "versions": [
                        {
                            "version": "v1",
                            "resources": [
                                {
                                    "resource": "configmaps",
                                    "responseKind": {"kind": "ConfigMap"},
                                    "scope": "Namespaced",
                                    "shortNames": ["cm"],
                                    "verbs": ["get", "create"],
                                }
                            ],
                        }
                    ],
                }
            ],
        },
    )
    server.json("GET", "/apis", {"kind": "APIGroupDiscoveryList", "items": []})
    cms = client.resource("cm", namespace="ns")
    assert server.requests == []
    assert repr(cms) == "ResourceClient(cm, namespace='ns')"
    await cms.get("a")
    await cms.create({"metadata": {"name": "a"}})
    paths = [r.path for r in server.requests]
    assert paths == ["/api", "/apis", f"{CM_PATH}/a", CM_PATH]
    with pytest.raises(MethodNotAllowedError, match="its verbs: get, create"):
        await cms.delete("a")


# -- models: typed clients, resolved without discovery -----------------------------------


class Widget(TypedDict):
    """A custom resource's model of the tests' own, cluster-scoped."""

    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    size: NotRequired[int]


register(Widget, ApiResource("example.com", "v1", "Widget", "widgets", namespaced=False))


async def test_a_model_is_resolved_without_discovery(setup: tuple[FakeServer, Client]) -> None:
    server, client = setup
    cms = client.resource(ConfigMap, namespace="ns")
    assert await cms.resource_info() == ResourceInfo("", "v1", "configmaps", "ConfigMap", True)
    assert (cms.resource_name, cms.url) == ("v1/configmaps", f"{server.url}{CM_PATH}")
    assert repr(cms) == "ResourceClient(v1/configmaps, namespace='ns')"
    await cms.get("a")
    await cms.create({"metadata": {"name": "a"}, "data": {"k": "v"}})
    await cms.update({"metadata": {"name": "a"}})
    await cms.update_status({"metadata": {"name": "a"}})
    await cms.patch("a", {"data": {"k": "w"}})
    await cms.apply({"metadata": {"name": "a"}}, field_manager="me")
    await cms.delete("a")
    assert [(r.method, r.path) for r in server.requests] == [
        ("GET", f"{CM_PATH}/a"),
        ("POST", CM_PATH),
        ("PUT", f"{CM_PATH}/a"),
        ("PUT", f"{CM_PATH}/a/status"),
        ("PATCH", f"{CM_PATH}/a"),
        ("PATCH", f"{CM_PATH}/a"),
        ("DELETE", f"{CM_PATH}/a"),
    ]
    created = json.loads(server.requests[1].body)
    assert (created["apiVersion"], created["kind"]) == ("v1", "ConfigMap")  # from the model


async def test_a_custom_resource_s_model_gives_its_group_and_scope(
    setup: tuple[FakeServer, Client],
) -> None:
    server, client = setup
    server.route("POST", "/apis/example.com/v1/widgets", echo)
    widgets = client.resource(Widget)
    created = await widgets.create({"metadata": {"name": "w"}, "size": 3})
    assert created == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "size": 3,
    }
    assert server.paths() == ["/apis/example.com/v1/widgets"]


async def test_a_model_s_scope_is_checked_before_any_request(
    setup: tuple[FakeServer, Client],
) -> None:
    server, client = setup
    # A cluster-scoped model asked for in a namespace: the namespace is a mistake.
    with pytest.raises(ValueError, match=r"Widget \(widgets\.example\.com\) is cluster-scoped"):
        client.resource(Widget, namespace="ns")
    with pytest.raises(ValueError, match=r"Namespace \(namespaces\) is cluster-scoped"):
        ResourceClient(client, Namespace, "ns")
    # A namespaced model asked for without one: every verb on one object says so.
    anywhere = client.resource(ConfigMap)
    with pytest.raises(ValueError, match="configmaps is namespaced: a namespace is needed"):
        await anywhere.get("a")
    with pytest.raises(ValueError, match="configmaps is namespaced: to create 'a'"):
        await anywhere.create({"metadata": {"name": "a"}})
    with pytest.raises(ValueError, match="configmaps is namespaced"):
        await anywhere.delete("a")
    assert server.requests == []


async def test_a_class_that_is_not_a_registered_model_is_named(
    setup: tuple[FakeServer, Client],
) -> None:
    server, client = setup

    class Gadget(TypedDict):
        size: int

    with pytest.raises(LookupError, match=r"test_resource_client\..*Gadget is not a registered"):
        client.resource(Gadget)
    with pytest.raises(TypeError, match=r"a name, a ResourceInfo or a model class .*, not dict"):
        client.resource({"kind": "Pod"})  # type: ignore[call-overload]
    assert server.requests == []
