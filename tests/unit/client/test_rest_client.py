"""The REST client against small local HTTP(S) servers: requests, errors, auth, TLS."""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import ssl
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import trustme
from aiohttp import web

import kubereflector
from fake_http import FakeServer, serve, status, stream_lines
from kubereflector import (
    AlreadyExistsError,
    ApiError,
    BadRequestError,
    CompactObject,
    ConflictError,
    DecodeError,
    ExpiredError,
    ForbiddenError,
    InvalidError,
    ListOptions,
    ListResult,
    MethodNotAllowedError,
    NotFoundError,
    ObjectMode,
    TooLargeResourceVersionError,
    TooManyRequestsError,
    UnauthorizedError,
    WatchEvent,
)
from kubereflector.client import AuthInfo, Client, ClientConfig, ConfigError, StaticAuth
from kubereflector.client.rest import _parse_retry_after
from kubereflector.errors import failure_status

pytestmark = pytest.mark.asyncio

TOKEN = "sekret-token-abc123"


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with serve() as s:
        yield s


@pytest_asyncio.fixture
async def client(server: FakeServer) -> AsyncIterator[Client]:
    async with Client(ClientConfig(server=server.url, auth=StaticAuth(token=TOKEN))) as c:
        yield c


# -- requests ---------------------------------------------------------------------


async def test_user_agent_names_kubereflector_and_its_version(
    server: FakeServer, client: Client
) -> None:
    server.json("GET", "/version", {"gitVersion": "v1.31.0"})
    assert await client.get("/version") == {"gitVersion": "v1.31.0"}
    agent = server.requests[0].headers["User-Agent"]
    major, minor = sys.version_info[:2]
    assert agent == (
        f"kubereflector/{kubereflector.__version__} "
        f"(python {major}.{minor}; aiohttp {aiohttp.__version__})"
    )
    assert server.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert server.requests[0].headers["Accept"] == "application/json"


async def test_rest_helpers_send_methods_bodies_and_content_types(
    server: FakeServer, client: Client
) -> None:
    async def echo(request: web.Request) -> web.StreamResponse:
        return web.json_response({"method": request.method, "got": await request.json()})

    for method in ("POST", "PUT", "PATCH", "DELETE"):
        server.route(method, "/api/v1/namespaces/ns/configmaps/c", echo)
    path = "/api/v1/namespaces/ns/configmaps/c"
    body = {"metadata": {"name": "c"}, "data": {"k": "v"}}
    assert await client.create(path, body) == {"method": "POST", "got": body}
    assert await client.update(path, body, params={"dryRun": "All"}) == {
        "method": "PUT",
        "got": body,
    }
    assert await client.patch(path, {"data": None}) == {"method": "PATCH", "got": {"data": None}}
    assert await client.delete(path, body={"gracePeriodSeconds": 0}) == {
        "method": "DELETE",
        "got": {"gracePeriodSeconds": 0},
    }
    seen = server.requests
    assert [r.headers["Content-Type"] for r in seen] == [
        "application/json",
        "application/json",
        "application/merge-patch+json",
        "application/json",
    ]
    assert seen[1].query["dryRun"] == "All"


async def test_request_with_custom_content_type_accept_and_params(
    server: FakeServer, client: Client
) -> None:
    server.json("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d", {"ok": True})
    result = await client.request(
        "PATCH",
        "/apis/apps/v1/namespaces/ns/deployments/d",
        params={"fieldManager": "me", "force": True, "n": 3},
        json=[{"op": "replace", "path": "/spec/replicas", "value": 2}],
        content_type="application/json-patch+json",
        accept="application/json;as=Table;g=meta.k8s.io;v=v1",
    )
    assert result == {"ok": True}
    (seen,) = server.requests
    assert seen.headers["Content-Type"] == "application/json-patch+json"
    assert seen.headers["Accept"] == "application/json;as=Table;g=meta.k8s.io;v=v1"
    assert dict(seen.query) == {"fieldManager": "me", "force": "true", "n": "3"}


async def test_empty_body_is_none_and_non_json_success_is_a_decode_error(
    server: FakeServer, client: Client
) -> None:
    async def empty(_request: web.Request) -> web.StreamResponse:
        return web.Response(status=204)

    async def html(_request: web.Request) -> web.StreamResponse:
        return web.Response(text=f"<html>{TOKEN}</html>", content_type="text/html")

    server.route("DELETE", "/x", empty)
    server.route("GET", "/html", html)
    assert await client.request("DELETE", "/x") is None
    with pytest.raises(DecodeError) as info:
        await client.get("/html")
    assert f"{server.url}/html" in str(info.value)
    assert TOKEN not in str(info.value)


async def test_the_object_methods_want_a_json_object(server: FakeServer, client: Client) -> None:
    """get/create/update/patch/delete are typed to return a JSON object: any other
    answer (a 204, a JSON array) is a DecodeError naming the URL, not a lie."""

    async def empty(_request: web.Request) -> web.StreamResponse:
        return web.Response(status=204)

    async def array(_request: web.Request) -> web.StreamResponse:
        return web.json_response([1, 2])

    server.route("DELETE", "/x", empty)
    server.route("GET", "/list", array)
    with pytest.raises(
        DecodeError, match="expected a JSON object in answer to DELETE, got an empty body"
    ) as info:
        await client.delete("/x")
    assert f"{server.url}/x" in str(info.value)
    with pytest.raises(DecodeError, match="got a JSON list"):
        await client.get("/list", params={"limit": 1})
    assert await client.request("GET", "/list") == [1, 2]


async def test_path_must_be_absolute(client: Client) -> None:
    with pytest.raises(ValueError, match="must start with '/'"):
        await client.get("api/v1/pods")


async def test_server_path_prefix_is_kept() -> None:
    async with serve() as server:
        server.json("GET", "/prefix/api", {"versions": ["v1"]})
        async with Client(ClientConfig(server=server.url + "/prefix/")) as client:
            assert await client.get("/api") == {"versions": ["v1"]}
        assert server.paths() == ["/prefix/api"]


async def test_redirects_are_not_followed(server: FakeServer, client: Client) -> None:
    async def redirect(_request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("https://elsewhere.invalid/steal")

    server.route("GET", "/api", redirect)
    with pytest.raises(ApiError) as info:
        await client.get("/api")
    assert info.value.status == 302
    assert server.paths() == ["/api"]


async def test_proxy_url_routes_requests_through_the_proxy(server: FakeServer) -> None:
    server.json("GET", "/api/v1/pods", {"items": []})
    config = ClientConfig(server="http://kube.invalid:6443", proxy_url=server.url)
    async with Client(config) as client:
        assert await client.get("/api/v1/pods") == {"items": []}
    (seen,) = server.requests
    assert seen.headers["Host"] == "kube.invalid:6443"


# -- list and watch ----------------------------------------------------------------

FULL = ListOptions(
    resource_version="5",
    resource_version_match="NotOlderThan",
    limit=10,
    continue_="tok/en=",
    label_selector="app in (a,b),tier!=db",
    field_selector="metadata.name=p+1",
    timeout_seconds=30,
    allow_watch_bookmarks=True,
    send_initial_events=True,
)
FULL_QUERY = {
    "resourceVersion": "5",
    "resourceVersionMatch": "NotOlderThan",
    "limit": "10",
    "continue": "tok/en=",
    "labelSelector": "app in (a,b),tier!=db",
    "fieldSelector": "metadata.name=p+1",
    "timeoutSeconds": "30",
    "allowWatchBookmarks": "true",
    "sendInitialEvents": "true",
}


async def test_every_list_option_reaches_the_query(server: FakeServer, client: Client) -> None:
    server.json("GET", "/api/v1/pods", {"kind": "PodList", "metadata": {}, "items": []})
    await client.list("/api/v1/pods", FULL)
    await client.list("/api/v1/pods", ListOptions())
    await client.list("/api/v1/pods", ListOptions(limit=0, send_initial_events=False))
    full, empty, falsy = (dict(r.query) for r in server.requests)
    assert full == FULL_QUERY
    assert empty == {}
    assert falsy == {"limit": "0", "sendInitialEvents": "false"}


async def test_every_watch_option_reaches_the_query(server: FakeServer, client: Client) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request)

    server.route("GET", "/api/v1/pods", handler)
    async with client.watch("/api/v1/pods", FULL) as events:
        assert [e async for e in events] == []
    async with client.watch("/api/v1/pods", ListOptions()) as events:
        assert [e async for e in events] == []
    full, bare = (dict(r.query) for r in server.requests)
    assert full == {"watch": "1", **FULL_QUERY}
    assert bare == {"watch": "1"}


@pytest.mark.parametrize("mode", ["dict", "compact"])
async def test_list_result_and_item_kinds(server: FakeServer, client: Client, mode: str) -> None:
    server.json(
        "GET",
        "/apis/apps/v1/deployments",
        {
            "kind": "DeploymentList",
            "apiVersion": "apps/v1",
            "metadata": {"resourceVersion": "12", "continue": "next", "remainingItemCount": 3},
            "items": [
                {"metadata": {"name": "a"}},
                {"kind": "Other", "apiVersion": "x/v1", "metadata": {"name": "b"}},
            ],
        },
    )
    result = await client.list(
        "/apis/apps/v1/deployments",
        ListOptions(limit=2),
        object_mode=mode,  # type: ignore[arg-type]
    )
    assert all(type(item) is (dict if mode == "dict" else CompactObject) for item in result.items)
    assert result == ListResult(
        items=[
            {"metadata": {"name": "a"}, "kind": "Deployment", "apiVersion": "apps/v1"},
            {"kind": "Other", "apiVersion": "x/v1", "metadata": {"name": "b"}},
        ],
        resource_version="12",
        continue_="next",
        remaining_item_count=3,
    )


@pytest.mark.parametrize("mode", ["dict", "compact"])
async def test_list_with_null_items_and_no_metadata(
    server: FakeServer, client: Client, mode: str
) -> None:
    server.json("GET", "/api/v1/pods", {"kind": "PodList", "items": None})
    options = ListOptions()
    assert await client.list("/api/v1/pods", options, object_mode=mode) == ListResult()  # type: ignore[arg-type]


async def test_a_compact_list_of_objects_with_other_fields(
    server: FakeServer, client: Client
) -> None:
    items = [
        {"metadata": {"name": "a", "namespace": "n"}, "data": {"k": "v"}},
        {"metadata": {"name": "b", "namespace": "n"}, "binaryData": {"b": "AA=="}},
    ]
    server.json(
        "GET",
        "/api/v1/configmaps",
        {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": items},
    )
    result = await client.list("/api/v1/configmaps", ListOptions(), object_mode="compact")
    assert [type(item) for item in result.items] == [CompactObject, CompactObject]
    assert result.items == [{"kind": "ConfigMap", "apiVersion": "v1", **item} for item in items]
    assert result.items[0]["data"]["k"] == "v"


@pytest.mark.parametrize("mode", ["dict", "compact"])
@pytest.mark.parametrize(
    "body",
    [
        b"<html>oops</html>",
        b'{"items": "no"}',
        b'{"metadata": {"resourceVersion": 5}}',
    ],
)
async def test_undecodable_list_is_a_decode_error(
    server: FakeServer, client: Client, body: bytes, mode: str
) -> None:
    async def handler(_request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type="application/json")

    server.route("GET", "/api/v1/pods", handler)
    with pytest.raises(DecodeError, match="could not decode the list response"):
        await client.list("/api/v1/pods", ListOptions(), object_mode=mode)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["dict", "compact"])
@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        # A Failure Status answered with 200: its own error, never an empty list.
        (failure_status(410, "Expired", "too old"), ExpiredError, "410 Expired: too old"),
        (failure_status(500, "InternalError", "etcd down"), ApiError, "500 InternalError"),
        ({"kind": "Status", "status": "Failure", "message": "no code"}, ApiError, "500: no code"),
        ({"kind": "Status", "status": "Success", "code": 200}, ApiError, "500"),
        # Anything else that is not a list.
        ({"kind": "Pod", "metadata": {"name": "p"}}, DecodeError, "is a 'Pod', not a list"),
        ({"kind": "PodList", "metadata": {}}, DecodeError, "has no items array"),
        ({"metadata": {"resourceVersion": "5"}}, DecodeError, "has no items array"),
        ({"items": None}, DecodeError, "has no items array"),
        ({"kind": "PodList", "items": [{"metadata": {}}, "x"]}, DecodeError, "item 1 .* is str"),
        ({"kind": "PodList", "items": [7]}, DecodeError, "item 0 .* is int, not an object"),
        ({"kind": "PodList", "items": [{}, None]}, DecodeError, "item 1 .* is NoneType"),
        ([{"metadata": {"name": "p"}}], DecodeError, "could not decode the list response"),
    ],
)
async def test_a_2xx_list_answer_that_is_not_a_list_raises(
    server: FakeServer,
    client: Client,
    body: Any,
    error: type[ApiError],
    message: str,
    mode: ObjectMode,
) -> None:
    server.json("GET", "/api/v1/pods", body)
    with pytest.raises(error, match=message) as info:
        await client.list("/api/v1/pods", ListOptions(), object_mode=mode)
    assert type(info.value) is error
    assert info.value.url == f"{server.url}/api/v1/pods"


@pytest.mark.parametrize("mode", ["dict", "compact"])
async def test_a_deeply_nested_list_body_is_a_decode_error(
    server: FakeServer, client: Client, mode: ObjectMode
) -> None:
    nested = b'{"kind": "PodList", "items": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"

    async def handler(_request: web.Request) -> web.StreamResponse:
        return web.Response(body=nested, content_type="application/json")

    server.route("GET", "/api/v1/pods", handler)
    server.route("GET", "/api/v1/nodes", handler)
    with pytest.raises(DecodeError, match=r"could not decode the list response .*recursion"):
        await client.list("/api/v1/pods", ListOptions(), object_mode=mode)
    with pytest.raises(DecodeError, match=r"could not decode the response .*recursion"):
        await client.get("/api/v1/nodes")


@pytest.mark.parametrize("content_length", [True, False])
async def test_a_body_over_max_body_bytes_is_a_decode_error(
    server: FakeServer, content_length: bool
) -> None:
    page = {"kind": "PodList", "items": [{"metadata": {"name": f"p{i}"}} for i in range(400)]}
    body = json.dumps(page).encode()

    async def handler(request: web.Request) -> web.StreamResponse:
        if content_length:
            return web.Response(body=body, content_type="application/json")
        return await stream_lines(request, *(body[i : i + 1000] for i in range(0, len(body), 1000)))

    server.route("GET", "/api/v1/pods", handler)
    async with Client(ClientConfig(server=server.url), max_body_bytes=len(body)) as client:
        assert len((await client.list("/api/v1/pods", ListOptions())).items) == 400
    async with Client(ClientConfig(server=server.url), max_body_bytes=len(body) - 1) as client:
        with pytest.raises(DecodeError) as info:
            await client.list("/api/v1/pods", ListOptions())
        assert str(info.value) == (
            f"0 DecodeError: response body longer than the limit of {len(body) - 1} bytes "
            f"(max_body_bytes): treating the response as broken ({server.url}/api/v1/pods)"
        )
        # The connection was dropped, not reused half-read: the next request works.
        server.json("GET", "/api", {"kind": "APIVersions"})
        assert await client.get("/api") == {"kind": "APIVersions"}


async def test_a_watch_event_over_max_event_bytes_breaks_the_stream(server: FakeServer) -> None:
    line = json.dumps({"type": "ADDED", "object": {"data": "x" * 10_000}}).encode() + b"\n"

    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, b'{"type": "BOOKMARK", "object": {}}\n', line)

    server.route("GET", "/api/v1/pods", handler)
    async with (
        Client(ClientConfig(server=server.url), max_event_bytes=8192) as client,
        client.watch("/api/v1/pods", ListOptions()) as events,
    ):
        assert (await anext(events)).type == "BOOKMARK"
        with pytest.raises(DecodeError, match="longer than the limit of 8192 bytes"):
            await anext(events)


async def test_size_limits_are_checked() -> None:
    config = ClientConfig(server="https://kube.example")
    with pytest.raises(ValueError, match="max_event_bytes must be at least 4096"):
        Client(config, max_event_bytes=100)
    with pytest.raises(ValueError, match="max_body_bytes positive"):
        Client(config, max_body_bytes=0)


async def test_a_list_body_cut_short_is_a_decode_error(server: FakeServer, client: Client) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        await response.write(b'{"kind": "PodList", "items": [{"metadata": ')
        assert request.transport is not None
        request.transport.close()
        return response

    server.route("GET", "/api/v1/pods", handler)
    with pytest.raises(DecodeError, match="truncated response body"):
        await client.list("/api/v1/pods", ListOptions())


async def test_metadata_only_accept_headers(server: FakeServer, client: Client) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "1":
            return await stream_lines(request)
        return web.json_response({"kind": "PartialObjectMetadataList", "items": []})

    server.route("GET", "/api/v1/pods", handler)
    await client.list("/api/v1/pods", ListOptions(), metadata_only=True)
    async with client.watch("/api/v1/pods", ListOptions(), metadata_only=True) as events:
        assert [e async for e in events] == []
    await client.list("/api/v1/pods", ListOptions())
    assert [r.headers["Accept"] for r in server.requests] == [
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
        "application/json",
    ]


async def test_watch_stream_events_and_bookmarks(server: FakeServer, client: Client) -> None:
    lines = (
        b'{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"2"}}}\n'
        b'{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"3",'
        b'"annotations":{"k8s.io/initial-events-end":"true"}}}}\n'
    )

    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, lines)

    server.route("GET", "/api/v1/pods", handler)
    async with client.watch("/api/v1/pods", ListOptions(allow_watch_bookmarks=True)) as events:
        got = [e async for e in events]
    assert [e.type for e in got] == ["ADDED", "BOOKMARK"]
    assert got[1] == WatchEvent(
        "BOOKMARK",
        {
            "kind": "Pod",
            "metadata": {
                "resourceVersion": "3",
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        },
    )


# -- errors -------------------------------------------------------------------------

TOO_LARGE = status(
    504,
    "Timeout",
    "Too large resource version: 99, current: 5",
    details={"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large"}]},
)


@pytest.mark.parametrize(
    ("code", "body", "headers", "cls", "reason"),
    [
        (
            410,
            status(410, "Expired", "too old resource version: 1 (9)"),
            {},
            ExpiredError,
            "Expired",
        ),
        (410, status(410, "Gone", "gone"), {}, ExpiredError, "Gone"),
        (504, TOO_LARGE, {}, TooLargeResourceVersionError, "Timeout"),
        (
            429,
            status(429, "TooManyRequests", "slow"),
            {"Retry-After": "7"},
            TooManyRequestsError,
            "TooManyRequests",
        ),
        (401, status(401, "Unauthorized", "Unauthorized"), {}, UnauthorizedError, "Unauthorized"),
        (
            403,
            status(403, "Forbidden", 'pods is forbidden: User "x"'),
            {},
            ForbiddenError,
            "Forbidden",
        ),
        (404, status(404, "NotFound", 'pods "p" not found'), {}, NotFoundError, "NotFound"),
        (409, status(409, "AlreadyExists", "exists"), {}, AlreadyExistsError, "AlreadyExists"),
        (409, status(409, "Conflict", "stale"), {}, ConflictError, "Conflict"),
        (500, status(500, "InternalError", "etcd"), {}, ApiError, "InternalError"),
        (422, status(422, "Invalid", "bad"), {}, InvalidError, "Invalid"),
        (400, status(400, "BadRequest", "no"), {}, BadRequestError, "BadRequest"),
        (405, "", {}, MethodNotAllowedError, "Method Not Allowed"),
        (502, "<html>Bad gateway</html>", {}, ApiError, "Bad Gateway"),
        (429, "slow down", {"Retry-After": "3"}, TooManyRequestsError, "Too Many Requests"),
        (404, "404 page not found", {}, NotFoundError, "Not Found"),
        (503, "", {}, ApiError, "Service Unavailable"),
        (500, {"error": "not a Status"}, {}, ApiError, "Internal Server Error"),
    ],
)
async def test_error_mapping(
    server: FakeServer,
    client: Client,
    code: int,
    body: Any,
    headers: dict[str, str],
    cls: type[ApiError],
    reason: str,
) -> None:
    async def handler(_request: web.Request) -> web.StreamResponse:
        if isinstance(body, dict):
            return web.json_response(body, status=code, headers=headers)
        return web.Response(text=body, status=code, headers=headers, content_type="text/plain")

    path = "/api/v1/namespaces/default/pods"
    server.route("GET", path, handler)

    async def open_watch() -> None:
        async with client.watch(path, ListOptions()):
            pytest.fail("the watch opened")

    for attempt in (client.get(path), client.list(path, ListOptions(limit=5)), open_watch()):
        with pytest.raises(ApiError) as info:
            await attempt
        err = info.value
        assert type(err) is cls
        assert err.status == code
        assert err.reason == reason
        assert err.url is not None
        assert err.url.startswith(f"{server.url}{path}")
        assert err.url in str(err)
        assert TOKEN not in str(err)
        assert TOKEN not in repr(err)
        if isinstance(body, dict) and "message" in body:
            assert err.message == body["message"]
        elif isinstance(body, str):
            assert err.message == body
        if cls is TooManyRequestsError:
            assert isinstance(err, TooManyRequestsError)
            assert err.retry_after == float(headers["Retry-After"])


async def test_error_details_survive(server: FakeServer, client: Client) -> None:
    server.json("GET", "/api/v1/pods", TOO_LARGE, status=504)
    with pytest.raises(TooLargeResourceVersionError) as info:
        await client.get("/api/v1/pods")
    assert info.value.details == TOO_LARGE["details"]


async def test_long_non_json_error_body_is_cut(server: FakeServer, client: Client) -> None:
    async def handler(_request: web.Request) -> web.StreamResponse:
        return web.Response(text="x" * 5000, status=500)

    server.route("GET", "/api", handler)
    with pytest.raises(ApiError) as info:
        await client.get("/api")
    assert info.value.message == "x" * 200


async def test_credentials_in_the_server_url_are_refused_without_showing_them(
    server: FakeServer,
) -> None:
    # aiohttp would refuse to send them beside the Authorization header on every request.
    for url in (server.url.replace("://", "://alice:hunter2@"), "alice:hunter2@kube:6443"):
        with pytest.raises(ValueError, match="must not hold credentials") as info:
            ClientConfig(server=url)
        assert "hunter2" not in str(info.value)
        assert "alice" not in str(info.value)


async def test_retry_after_header_forms() -> None:
    assert _parse_retry_after("12") == 12.0
    assert _parse_retry_after("1.5") == 1.5
    assert _parse_retry_after("-3") == 0.0
    assert _parse_retry_after("soon") is None
    assert _parse_retry_after("nan") is None
    assert _parse_retry_after(None) is None
    later = email.utils.formatdate(time.time() + 120, usegmt=True)
    parsed = _parse_retry_after(later)
    assert parsed is not None
    assert 100 <= parsed <= 121


# -- auth --------------------------------------------------------------------------


class CountingAuth:
    """Hands out tokens in order; ``invalidate`` moves to the next one."""

    def __init__(self, *tokens: str) -> None:
        self.tokens = tokens
        self.index = 0
        self.authorized = 0
        self.invalidated = 0

    async def authorize(self) -> AuthInfo:
        self.authorized += 1
        return AuthInfo({"Authorization": f"Bearer {self.tokens[self.index]}"})

    def invalidate(self) -> None:
        self.invalidated += 1
        self.index = min(self.index + 1, len(self.tokens) - 1)


def only_good_token(server: FakeServer, path: str, ok: Any) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != "Bearer good":
            return web.json_response(status(401, "Unauthorized", "Unauthorized"), status=401)
        if callable(ok):
            result: web.StreamResponse = await ok(request)
            return result
        return web.json_response(ok)

    server.route("GET", path, handler)


async def test_401_invalidates_and_retries_once(server: FakeServer) -> None:
    only_good_token(server, "/api", {"versions": ["v1"]})
    auth = CountingAuth("stale", "good")
    async with Client(ClientConfig(server=server.url, auth=auth)) as client:
        assert await client.get("/api") == {"versions": ["v1"]}
        assert (auth.authorized, auth.invalidated, len(server.requests)) == (2, 1, 2)
        assert await client.get("/api") == {"versions": ["v1"]}
        assert (auth.authorized, auth.invalidated, len(server.requests)) == (3, 1, 3)


async def test_401_twice_raises_unauthorized(server: FakeServer) -> None:
    only_good_token(server, "/api", {})
    auth = CountingAuth("bad", "worse", "good")
    async with Client(ClientConfig(server=server.url, auth=auth)) as client:
        with pytest.raises(UnauthorizedError):
            await client.get("/api")
    assert (auth.authorized, auth.invalidated, len(server.requests)) == (2, 1, 2)


async def test_401_when_opening_a_watch_is_retried_once(server: FakeServer) -> None:
    async def stream(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, b'{"type":"ADDED","object":{"metadata":{}}}\n')

    only_good_token(server, "/api/v1/pods", stream)
    auth = CountingAuth("stale", "good")
    async with (
        Client(ClientConfig(server=server.url, auth=auth)) as client,
        client.watch("/api/v1/pods", ListOptions()) as events,
    ):
        assert [e.type async for e in events] == ["ADDED"]
    assert (auth.authorized, auth.invalidated) == (2, 1)


# -- lifecycle ----------------------------------------------------------------------


async def test_closed_client_refuses_requests(server: FakeServer) -> None:
    server.json("GET", "/api", {})
    client = Client(ClientConfig(server=server.url))
    async with client:
        await client.get("/api")
    assert client.closed
    await client.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        await client.get("/api")


async def test_a_client_belongs_to_one_event_loop(server: FakeServer, client: Client) -> None:
    server.json("GET", "/api", {})
    await client.get("/api")
    with pytest.raises(RuntimeError, match="event loop"):
        await asyncio.to_thread(asyncio.run, client.get("/api"))


async def test_invalid_server_urls() -> None:
    for bad, problem in [
        ("kube.example:6443", "is not an http or https URL"),
        ("ftp://kube", "is not an http or https URL"),
        ("https://", "has no host"),
        ("https://h/?x=1", "must not have a query or fragment"),
        ("https://not a url", "is not a URL: its host .* is no host name or IP address"),
        ("https://6443", "has a number for its host"),
        ("https://h:99999", "is not a URL"),
    ]:
        with pytest.raises(ValueError, match=f"^server {re.escape(repr(bad))} {problem}"):
            ClientConfig(server=bad)
    with pytest.raises(ValueError, match=r"must be a string .* not int"):
        ClientConfig(server=6443)  # type: ignore[arg-type]


# -- TLS ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def server_context(cert: trustme.LeafCert) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    return context


async def test_tls_verified_with_the_configured_ca(ca: trustme.CA) -> None:
    async with serve(server_context(ca.issue_cert("127.0.0.1"))) as server:
        server.json("GET", "/api", {"versions": ["v1"]})
        config = ClientConfig(server=server.url, ca_data=ca.cert_pem.bytes())
        async with Client(config) as client:
            assert await client.get("/api") == {"versions": ["v1"]}


@pytest.mark.parametrize("trust", ["other-ca", "system-store"])
async def test_tls_fails_without_trust(ca: trustme.CA, trust: str) -> None:
    ca_data = trustme.CA().cert_pem.bytes() if trust == "other-ca" else None
    async with serve(server_context(ca.issue_cert("127.0.0.1"))) as server:
        async with Client(ClientConfig(server=server.url, ca_data=ca_data)) as client:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await client.get("/api")
        assert server.requests == []


async def test_insecure_skip_tls_verify(ca: trustme.CA) -> None:
    async with serve(server_context(ca.issue_cert("elsewhere.example"))) as server:
        server.json("GET", "/api", {})
        config = ClientConfig(server=server.url, insecure_skip_tls_verify=True)
        async with Client(config) as client:
            assert await client.get("/api") == {}


async def test_tls_server_name_is_sent_and_checked(ca: trustme.CA) -> None:
    context = server_context(ca.issue_cert("kube.internal"))
    seen_names: list[str | None] = []

    def on_sni(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        seen_names.append(name)

    context.sni_callback = on_sni  # type: ignore[assignment]
    async with serve(context) as server:
        server.json("GET", "/api", {})
        config = ClientConfig(server=server.url, ca_data=ca.cert_pem.bytes())
        async with Client(config) as client:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await client.get("/api")  # the cert is not for 127.0.0.1
        named = ClientConfig(
            server=server.url, ca_data=ca.cert_pem.bytes(), tls_server_name="kube.internal"
        )
        async with Client(named) as client:
            assert await client.get("/api") == {}
    assert seen_names[-1] == "kube.internal"


def client_identity(ca: trustme.CA, name: str) -> tuple[bytes, bytes]:
    leaf = ca.issue_cert(f"{name}.users.example", common_name=name)
    return leaf.cert_chain_pems[0].bytes(), leaf.private_key_pem.bytes()


async def test_client_certificate_when_the_server_requires_one(ca: trustme.CA) -> None:
    users = trustme.CA()
    context = server_context(ca.issue_cert("127.0.0.1"))
    context.verify_mode = ssl.CERT_REQUIRED
    users.configure_trust(context)
    async with serve(context) as server:
        server.json("GET", "/api", {})
        with_cert = ClientConfig(
            server=server.url,
            ca_data=ca.cert_pem.bytes(),
            auth=StaticAuth(client_cert=client_identity(users, "alice")),
        )
        async with Client(with_cert) as client:
            assert await client.get("/api") == {}
        (seen,) = server.requests
        assert seen.peer_cert is not None
        assert (("commonName", "alice"),) in seen.peer_cert["subject"]
        without = ClientConfig(server=server.url, ca_data=ca.cert_pem.bytes())
        async with Client(without) as client:
            with pytest.raises(aiohttp.ClientError):
                await client.get("/api")
        assert len(server.requests) == 1


async def test_a_changed_client_certificate_gets_a_new_connection(ca: trustme.CA) -> None:
    users = trustme.CA()
    context = server_context(ca.issue_cert("127.0.0.1"))
    context.verify_mode = ssl.CERT_REQUIRED
    users.configure_trust(context)
    identities = [client_identity(users, "alice"), client_identity(users, "bob")]

    class RotatingAuth:
        current = 0

        async def authorize(self) -> AuthInfo:
            return AuthInfo(client_cert=identities[self.current])

        def invalidate(self) -> None:
            pass

    auth = RotatingAuth()
    release = asyncio.Event()

    async def slow_stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type":"ADDED","object":{"metadata":{"name":"x"}}}\n')
        await release.wait()
        await response.write(b'{"type":"DELETED","object":{"metadata":{"name":"x"}}}\n')
        return response

    async with serve(context) as server:
        server.json("GET", "/api", {})
        server.route("GET", "/api/v1/pods", slow_stream)
        config = ClientConfig(server=server.url, ca_data=ca.cert_pem.bytes(), auth=auth)
        async with Client(config) as client:
            await client.get("/api")
            async with client.watch("/api/v1/pods", ListOptions()) as events:
                iterator = aiter(events)
                assert (await asyncio.wait_for(anext(iterator), 5)).type == "ADDED"
                auth.current = 1
                await client.get("/api")  # a new pool for bob; alice's stream runs on
                release.set()
                assert (await asyncio.wait_for(anext(iterator), 5)).type == "DELETED"
            await client.get("/api")
    names = [
        dict(x[0] for x in r.peer_cert["subject"])["commonName"]
        for r in server.requests
        if r.peer_cert
    ]
    assert names == ["alice", "alice", "bob", "bob"]


async def test_bad_ca_data_is_a_clear_error() -> None:
    config = ClientConfig(
        server="https://127.0.0.1:1", ca_data=b"-----BEGIN CERTIFICATE-----\nnope"
    )
    async with Client(config) as client:
        with pytest.raises(ConfigError, match="certificate-authority data"):
            await client.get("/api")


async def test_a_client_certificate_tls_cannot_load_is_a_config_error() -> None:
    # PEM-shaped, but no certificate: a plugin or a hand-made Auth may hand such data over.
    cert = b"-----BEGIN CERTIFICATE-----\nbm9wZQ==\n-----END CERTIFICATE-----\n"
    key = b"-----BEGIN PRIVATE KEY-----\nbm9wZQ==\n-----END PRIVATE KEY-----\n"
    config = ClientConfig(server="https://127.0.0.1:1", auth=StaticAuth(client_cert=(cert, key)))
    async with Client(config) as client:
        with pytest.raises(ConfigError, match="client certificate and key cannot be loaded"):
            await client.get("/api")
