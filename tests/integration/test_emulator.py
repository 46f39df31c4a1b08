"""ApiServerEmulator over real HTTP, with plain aiohttp as the client.

Every wait is on a condition with a timeout (``asyncio.wait_for``); timed
behaviour (bookmarks, timeoutSeconds, retention, slowed streams) runs on a
FakeClock. The server binds 127.0.0.1 on an ephemeral port.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
import ssl
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from kubereflector import ApiError, NotFoundError
from kubereflector.testing import ApiServerEmulator, FakeClock
from kubereflector.testing.apiserver._seed import cluster_pods
from programs import PROGRAM_TEST_TIMEOUT, finish, read_line, start

pytestmark = pytest.mark.asyncio

WAIT = 5.0  # the most any single step may take
PODS = "/api/v1/namespaces/default/pods"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
META_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def pod(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


class Stream:
    """One watch response, read line by line."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    async def next(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.response.content.readline(), WAIT)
        assert line, "the watch ended"
        event: dict[str, Any] = json.loads(line)
        return event

    async def take(self, count: int) -> list[dict[str, Any]]:
        return [await self.next() for _ in range(count)]

    async def rest(self) -> bytes:
        """Everything until the server ends the stream."""
        return await asyncio.wait_for(self.response.content.read(), WAIT)

    def close(self) -> None:
        self.response.close()


class Api:
    """A thin aiohttp client for the emulator."""

    def __init__(self, server: ApiServerEmulator, session: aiohttp.ClientSession) -> None:
        self.server = server
        self.session = session
        self.streams: list[Stream] = []

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any, Mapping[str, str]]:
        data = None if body is None else json.dumps(body).encode()
        all_headers = {"Content-Type": content_type, **(headers or {})}
        async with self.session.request(
            method, self.server.url + path, data=data, params=params, headers=all_headers
        ) as response:
            raw = await response.read()
            try:
                decoded = json.loads(raw) if raw else None
            except ValueError:
                decoded = raw.decode()
            return response.status, decoded, response.headers

    async def get(self, path: str, **params: str) -> tuple[int, Any]:
        status, body, _ = await self.call("GET", path, params=params)
        return status, body

    async def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        status, decoded, _ = await self.call(method, path, body, **kw)
        assert status in (200, 201), (status, decoded)
        return decoded

    async def watch(
        self, path: str = PODS, *, headers: Mapping[str, str] | None = None, **params: str
    ) -> Stream:
        response = await self.session.get(
            self.server.url + path, params={"watch": "true", **params}, headers=headers
        )
        assert response.status == 200, await response.text()
        stream = Stream(response)
        self.streams.append(stream)
        return stream

    async def admin(self, **body: Any) -> Any:
        return await self.ok("POST", "/_emulator/faults", body)


def auth(server: ApiServerEmulator) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token}"} if server.token else {}


@asynccontextmanager
async def running(**kwargs: Any) -> AsyncIterator[tuple[ApiServerEmulator, Api]]:
    async with ApiServerEmulator(**kwargs) as server:
        connector = None
        if server.ca_pem is not None:
            context = ssl.create_default_context(cadata=server.ca_pem.decode())
            connector = aiohttp.TCPConnector(ssl=context)
        async with aiohttp.ClientSession(headers=auth(server), connector=connector) as session:
            api = Api(server, session)
            try:
                yield server, api
            finally:
                for stream in api.streams:
                    stream.close()


@pytest_asyncio.fixture
async def env() -> AsyncIterator[tuple[ApiServerEmulator, Api]]:
    async with running() as pair:
        yield pair


def rv(obj: Mapping[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def names(items: list[dict[str, Any]]) -> list[str]:
    return [i["metadata"]["name"] for i in items]


def event_names(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


# -- writes -----------------------------------------------------------------------------------


async def test_create_stamps_metadata_and_bumps_one_global_rv(
    env: tuple[ApiServerEmulator, Api],
) -> None:
    server, api = env
    before = int(server.resource_version)
    created = await api.ok("POST", PODS, pod("a", app="web"))
    assert rv(created) == before + 1 == int(server.resource_version)
    meta = created["metadata"]
    assert isinstance(meta["resourceVersion"], str)
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    assert meta["generation"] == 1
    assert meta["namespace"] == "default"
    assert created["kind"] == "Pod"
    assert created["apiVersion"] == "v1"
    assert created["status"] == {"phase": "Pending"}
    assert await api.ok("GET", f"{PODS}/a") == created
    cm = await api.ok("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}})
    assert rv(cm) == before + 2  # one counter for every resource
    generated = await api.ok("POST", PODS, {"metadata": {"generateName": "web-"}, "spec": {}})
    assert re.fullmatch(r"web-[a-z0-9]{5}", generated["metadata"]["name"])


async def test_create_errors_are_kube_statuses(env: tuple[ApiServerEmulator, Api]) -> None:
    _, api = env
    await api.ok("POST", PODS, pod("a"))
    status, body, _ = await api.call("POST", PODS, pod("a"))
    assert (status, body["reason"], body["message"]) == (
        409,
        "AlreadyExists",
        'pods "a" already exists',
    )
    assert body["kind"] == "Status"
    assert body["details"] == {"name": "a", "kind": "pods"}
    status, body, _ = await api.call("POST", "/api/v1/namespaces/nope/pods", pod("a"))
    assert (status, body["reason"], body["message"]) == (
        404,
        "NotFound",
        'namespaces "nope" not found',
    )
    status, body, _ = await api.call("POST", PODS, pod("Bad_Name"))
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    status, body, _ = await api.call("POST", PODS, {"metadata": {}})
    assert status == 422
    assert "name or generateName is required" in body["message"]
    status, body, _ = await api.call("POST", PODS, pod("b", **{"bad key!": "x"}))
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "metadata.labels"
    status, body, _ = await api.call("POST", PODS, pod("b", namespace="other"))
    assert status == 400
    assert "does not match the namespace" in body["message"]
    status, body, _ = await api.call("POST", PODS, {**pod("b"), "kind": "ConfigMap"})
    assert status == 400
    with_rv = pod("b")
    with_rv["metadata"]["resourceVersion"] = "3"
    status, body, _ = await api.call("POST", PODS, with_rv)
    assert status == 500
    assert "resourceVersion should not be set" in body["message"]
    status, body, _ = await api.call("POST", PODS, None, content_type="application/json")
    assert status == 400
    status, body, _ = await api.call("GET", f"{PODS}/missing")
    assert (status, body["reason"], body["message"]) == (
        404,
        "NotFound",
        'pods "missing" not found',
    )
    status, _, _ = await api.call("PATCH", PODS, {})
    assert status == 405
    status, _, _ = await api.call("POST", "/api/v1/pods", pod("z"))
    assert status == 405
    status, _, _ = await api.call("GET", "/api/v1/widgets")
    assert status == 404
    status, body, _ = await api.call("POST", PODS, pod("z"), params={"dryRun": "Some"})
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: "Some": '
        'supported values: "All"'
    )


async def test_update_conflicts_generation_and_noop(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    created = await api.ok("POST", PODS, pod("a"))
    stale = json.loads(json.dumps(created))
    changed = json.loads(json.dumps(created))
    changed["metadata"]["labels"] = {"x": "1"}
    updated = await api.ok("PUT", f"{PODS}/a", changed)
    assert rv(updated) == rv(created) + 1
    assert updated["metadata"]["generation"] == 1  # metadata changes keep the generation
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    stale["metadata"]["labels"] = {"y": "2"}
    status, body, _ = await api.call("PUT", f"{PODS}/a", stale)
    assert (status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on pods "a": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    spec_change = json.loads(json.dumps(updated))
    spec_change["spec"]["containers"][0]["image"] = "nginx"
    bumped = await api.ok("PUT", f"{PODS}/a", spec_change)
    assert bumped["metadata"]["generation"] == 2
    rv_before = server.resource_version
    same = await api.ok("PUT", f"{PODS}/a", bumped)
    assert same == bumped
    assert server.resource_version == rv_before
    unconditional = json.loads(json.dumps(bumped))
    del unconditional["metadata"]["resourceVersion"]
    unconditional["metadata"]["labels"] = {"z": "3"}
    assert (await api.ok("PUT", f"{PODS}/a", unconditional))["metadata"]["labels"] == {"z": "3"}
    renamed = {**bumped, "metadata": {**bumped["metadata"], "name": "b"}}
    status, body, _ = await api.call("PUT", f"{PODS}/a", renamed)
    assert status == 400
    assert "does not match the name on the URL" in body["message"]
    status, _, _ = await api.call("PUT", f"{PODS}/nope", pod("nope"))
    assert status == 404


async def test_status_is_a_subresource(env: tuple[ApiServerEmulator, Api]) -> None:
    _, api = env
    created = await api.ok("POST", PODS, pod("a"))
    main = {**created, "status": {"phase": "Running"}, "spec": {"containers": []}}
    updated = await api.ok("PUT", f"{PODS}/a", main)
    assert updated["status"] == {"phase": "Pending"}  # the main resource cannot write status
    assert updated["spec"] == {"containers": []}
    status_update = {**updated, "status": {"phase": "Running"}, "spec": {"other": 1}}
    via_status = await api.ok("PUT", f"{PODS}/a/status", status_update)
    assert via_status["status"] == {"phase": "Running"}
    assert via_status["spec"] == {"containers": []}  # the status subresource writes only status
    assert via_status["metadata"]["generation"] == updated["metadata"]["generation"]
    assert (await api.ok("GET", f"{PODS}/a/status"))["status"] == {"phase": "Running"}
    patched = await api.ok(
        "PATCH",
        f"{PODS}/a/status",
        {"status": {"phase": "Succeeded"}},
        content_type="application/merge-patch+json",
    )
    assert patched["status"]["phase"] == "Succeeded"
    status, _, _ = await api.call("GET", "/api/v1/namespaces/default/configmaps/x/status")
    assert status == 404


async def test_patches(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    await api.ok("POST", PODS, pod("a", app="web", tier="fe"))
    merged = await api.ok(
        "PATCH",
        f"{PODS}/a",
        {"metadata": {"labels": {"tier": None, "new": "1"}}},
        content_type="application/merge-patch+json",
    )
    assert merged["metadata"]["labels"] == {"app": "web", "new": "1"}
    jsonpatched = await api.ok(
        "PATCH",
        f"{PODS}/a",
        [
            {"op": "test", "path": "/metadata/labels/app", "value": "web"},
            {"op": "add", "path": "/metadata/annotations", "value": {"a/b": "c"}},
            {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx"},
            {"op": "copy", "from": "/metadata/labels/app", "path": "/metadata/labels/copy"},
            {"op": "move", "from": "/metadata/labels/new", "path": "/metadata/labels/moved"},
            {"op": "remove", "path": "/metadata/labels/copy"},
            {"op": "add", "path": "/spec/containers/-", "value": {"name": "d"}},
        ],
        content_type="application/json-patch+json",
    )
    assert jsonpatched["metadata"]["annotations"] == {"a/b": "c"}
    assert jsonpatched["metadata"]["labels"] == {"app": "web", "moved": "1"}
    assert [c.get("image") for c in jsonpatched["spec"]["containers"]] == ["nginx", None]
    assert jsonpatched["metadata"]["generation"] == 2
    strategic = await api.ok(
        "PATCH",
        f"{PODS}/a",
        {"metadata": {"labels": {"s": "1"}}, "$setElementOrder/containers": [{"name": "c"}]},
        content_type="application/strategic-merge-patch+json",
    )
    assert strategic["metadata"]["labels"]["s"] == "1"
    status, body, _ = await api.call(
        "PATCH",
        f"{PODS}/a",
        [{"op": "test", "path": "/metadata/name", "value": "other"}],
        content_type="application/json-patch+json",
    )
    assert status == 422
    status, body, _ = await api.call(
        "PATCH",
        f"{PODS}/a",
        {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}},
        content_type="application/merge-patch+json",
    )
    assert (status, body["reason"]) == (
        409,
        "Conflict",
    )  # a resourceVersion in a patch is a precondition
    status, body, _ = await api.call(
        "PATCH", f"{PODS}/a", {}, content_type="application/apply-patch+yaml"
    )
    assert (status, body["details"]["causes"][0]["field"]) == (422, "fieldManager")
    server.register_resource("example.com", "v1", "widgets", "Widget")
    await api.ok(
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
    )
    status, _, _ = await api.call(
        "PATCH",
        "/apis/example.com/v1/namespaces/default/widgets/w",
        {"spec": {}},
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 415  # as for custom resources in kube


async def test_delete(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    created = await api.ok("POST", PODS, pod("a"))
    status, body, _ = await api.call(
        "DELETE", f"{PODS}/a", {"preconditions": {"uid": "not-the-uid"}}
    )
    assert (status, body["reason"]) == (409, "Conflict")
    assert "the UID in the precondition (not-the-uid) does not match" in body["message"]
    deleted = await api.ok("DELETE", f"{PODS}/a")  # pods answer with the object
    assert deleted["metadata"]["uid"] == created["metadata"]["uid"]
    assert rv(deleted) == int(server.resource_version) == rv(created) + 1
    status, body, _ = await api.call("DELETE", f"{PODS}/a")
    assert (status, body["reason"]) == (404, "NotFound")
    cm = await api.ok("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}})
    deleted_cm = await api.ok("DELETE", "/api/v1/namespaces/default/configmaps/c")
    assert deleted_cm == {  # configmaps answer with a Status
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "c", "kind": "configmaps", "uid": cm["metadata"]["uid"]},
    }
    for name in ("x", "y", "z"):
        await api.ok("POST", PODS, pod(name, app="del" if name != "z" else "keep"))
    listed = await api.ok("DELETE", PODS, params={"labelSelector": "app=del"})
    assert listed["kind"] == "PodList"
    assert names(listed["items"]) == ["x", "y"]
    assert names(server.objects("pods")) == ["z"]


async def test_finalizers_defer_deletion(env: tuple[ApiServerEmulator, Api]) -> None:
    _, api = env
    created = await api.ok(
        "POST", PODS, {**pod("a"), "metadata": {"name": "a", "finalizers": ["x/y"]}}
    )
    stream = await api.watch(resourceVersion=created["metadata"]["resourceVersion"])
    pending = await api.ok("DELETE", f"{PODS}/a")
    assert pending["metadata"]["deletionTimestamp"]
    assert (await api.ok("GET", f"{PODS}/a"))["metadata"]["deletionTimestamp"]
    again = await api.ok("DELETE", f"{PODS}/a")
    assert rv(again) == rv(pending)  # already being deleted: nothing changes
    current = await api.ok("GET", f"{PODS}/a")
    current["metadata"]["finalizers"] = []
    gone = await api.ok("PUT", f"{PODS}/a", current)
    assert gone["metadata"]["name"] == "a"
    assert (await api.call("GET", f"{PODS}/a"))[0] == 404
    assert event_names(await stream.take(2)) == [("MODIFIED", "a"), ("DELETED", "a")]


async def test_namespaces(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    listed = await api.ok("GET", "/api/v1/namespaces")
    assert names(listed["items"]) == ["default", "kube-public", "kube-system"]
    assert listed["items"][0]["status"] == {"phase": "Active"}
    await api.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
    await api.ok("POST", "/api/v1/namespaces/team/pods", pod("a"))
    await api.ok("POST", "/api/v1/namespaces/team/configmaps", {"metadata": {"name": "c"}})
    await api.ok("POST", PODS, pod("b"))
    ns = await api.ok("GET", "/api/v1/namespaces/team")
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}
    assert (await api.ok("GET", "/api/v1/namespaces/team/status"))["metadata"]["name"] == "team"
    await api.ok("DELETE", "/api/v1/namespaces/team")
    assert names(server.objects("pods")) == ["b"]
    assert server.objects("configmaps") == []
    status, _body, _ = await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "a.b"}})
    assert status == 422  # namespace names are DNS labels


async def test_python_data_api(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    given = pod("a", app="x")
    created = server.create("pods", given)
    given["metadata"]["labels"]["app"] = "mutated"  # the emulator kept its own copy
    assert server.get("pods", "a")["metadata"]["labels"] == {"app": "x"}
    created["metadata"]["labels"]["app"] = "changed"  # and handed out a copy
    assert server.get("pods", "a")["metadata"]["labels"] == {"app": "x"}
    assert (await api.ok("GET", f"{PODS}/a"))["metadata"]["uid"] == created["metadata"]["uid"]
    with pytest.raises(ApiError) as info:
        server.create("pods", given)
    assert (info.value.status, info.value.reason) == (409, "AlreadyExists")
    stale = server.get("pods", "a")
    fresh = server.update("pods", {**stale, "status": {"phase": "Running"}})
    assert fresh["status"] == {"phase": "Running"}  # the Python API writes status too
    with pytest.raises(ApiError) as info:
        server.update("pods", {**stale, "spec": {}})
    assert info.value.status == 409
    patched = server.patch("pods", "a", {"metadata": {"labels": {"p": "1"}}})
    assert patched["metadata"]["labels"] == {"app": "x", "p": "1"}
    patched = server.patch(
        "pods", "a", [{"op": "remove", "path": "/metadata/labels/p"}], patch_type="json"
    )
    assert patched["metadata"]["labels"] == {"app": "x"}
    server.create("deployments.apps", {"metadata": {"name": "d", "namespace": "kube-system"}})
    assert names(server.objects("deployments")) == ["d"]
    assert server.objects("deployments", namespace="default") == []
    server.create("pods", pod("b"), namespace="kube-system")
    assert [
        (p["metadata"]["namespace"], p["metadata"]["name"]) for p in server.objects("pods")
    ] == [
        ("default", "a"),
        ("kube-system", "b"),
    ]
    deleted = server.delete("pods", "a")
    assert rv(deleted) == int(server.resource_version)
    with pytest.raises(NotFoundError):
        server.get("pods", "a")
    with pytest.raises(ValueError, match="unknown resource"):
        server.objects("widgets")
    with pytest.raises(ValueError, match=r"metadata\.name"):
        server.update("pods", {"metadata": {}})
    assert server.create("namespaces", {"metadata": {"name": "n1"}})["kind"] == "Namespace"


async def test_data_api_refuses_other_threads(env: tuple[ApiServerEmulator, Api]) -> None:
    server, _ = env
    with pytest.raises(RuntimeError, match="thread of the event loop"):
        await asyncio.to_thread(server.create, "pods", pod("a"))
    assert server.objects("pods") == []


# -- lists ------------------------------------------------------------------------------------


async def test_list_resource_version_semantics(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    a = server.create("pods", pod("a"))
    server.create("pods", pod("b"))
    current = int(server.resource_version)
    listed = await api.ok("GET", PODS)
    assert listed["kind"] == "PodList"
    assert listed["apiVersion"] == "v1"
    assert listed["metadata"] == {"resourceVersion": str(current)}
    assert names(listed["items"]) == ["a", "b"]
    assert "kind" not in listed["items"][0]  # kube-apiserver's built-in list items
    zero = await api.ok("GET", PODS, params={"resourceVersion": "0", "limit": "1"})
    assert names(zero["items"]) == ["a", "b"]  # "0" is served from the cache: no paging
    exact = await api.ok(
        "GET", PODS, params={"resourceVersion": str(rv(a)), "resourceVersionMatch": "Exact"}
    )
    assert names(exact["items"]) == ["a"]
    assert exact["metadata"]["resourceVersion"] == str(rv(a))
    legacy_exact = await api.ok("GET", PODS, params={"resourceVersion": str(rv(a)), "limit": "5"})
    assert names(legacy_exact["items"]) == ["a"]  # legacy: RV + limit means Exact
    newer = await api.ok(
        "GET", PODS, params={"resourceVersion": str(rv(a)), "resourceVersionMatch": "NotOlderThan"}
    )
    assert names(newer["items"]) == ["a", "b"]
    status, body, headers = await api.call(
        "GET", PODS, params={"resourceVersion": str(current + 5)}
    )
    assert (status, body["reason"]) == (504, "Timeout")
    assert (
        body["message"] == f"Timeout: Too large resource version: {current + 5}, current: {current}"
    )
    assert body["details"]["causes"] == [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]
    assert headers["Retry-After"] == "1"
    for params, fragment in [
        ({"resourceVersionMatch": "Exact"}, "forbidden unless resourceVersion is provided"),
        (
            {"resourceVersion": "0", "resourceVersionMatch": "Exact"},
            'forbidden for resourceVersion "0"',
        ),
        ({"resourceVersion": "1", "resourceVersionMatch": "Newest"}, 'Unsupported value: "Newest"'),
        ({"sendInitialEvents": "true"}, "sendInitialEvents is forbidden for list"),
    ]:
        status, body, _ = await api.call("GET", PODS, params=params)
        assert (status, body["reason"]) == (422, "Invalid"), params
        assert body["message"].startswith('ListOptions.meta.k8s.io "" is invalid: ')
        assert fragment in body["message"]
    # A resourceVersion that is not a number, answered as kube-apiserver 1.28 does:
    # a 500 without a reason from the watch cache, a 400 from etcd (with a limit).
    status, body, _ = await api.call("GET", PODS, params={"resourceVersion": "abc"})
    assert (status, "reason" in body) == (500, False)
    invalid = (
        'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax'
    )
    assert body["message"] == invalid
    status, body, _ = await api.call("GET", PODS, params={"resourceVersion": "abc", "limit": "5"})
    assert (status, body["reason"]) == (400, "BadRequest")
    assert body["message"] == f"invalid resource version: {invalid}"
    status, body, _ = await api.call("GET", PODS, params={"watch": "1", "resourceVersion": "abc"})
    assert (status, body["message"]) == (500, invalid)
    server.compact()
    status, body, _ = await api.call(
        "GET", PODS, params={"resourceVersion": str(rv(a)), "resourceVersionMatch": "Exact"}
    )
    assert (status, body["reason"]) == (410, "Expired")


async def test_list_paging_is_a_consistent_snapshot(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    for name in "abcde":
        server.create("pods", pod(name))
    server.create("pods", pod("other"), namespace="kube-system")
    first = await api.ok("GET", PODS, params={"limit": "2"})
    snapshot = first["metadata"]["resourceVersion"]
    assert names(first["items"]) == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 3
    server.create("pods", pod("bb"))  # written between pages: not in this list
    server.delete("pods", "c")
    second = await api.ok(
        "GET", PODS, params={"limit": "2", "continue": first["metadata"]["continue"]}
    )
    assert names(second["items"]) == ["c", "d"]
    assert second["metadata"]["resourceVersion"] == snapshot
    third = await api.ok(
        "GET", PODS, params={"limit": "2", "continue": second["metadata"]["continue"]}
    )
    assert names(third["items"]) == ["e"]
    assert "continue" not in third["metadata"]
    assert "remainingItemCount" not in third["metadata"]
    everywhere = await api.ok("GET", "/api/v1/pods", params={"limit": "10"})
    assert names(everywhere["items"]) == ["a", "b", "bb", "d", "e", "other"]
    status, body, _ = await api.call("GET", PODS, params={"continue": "garbage"})
    assert (status, body["reason"]) == (400, "BadRequest")
    status, body, _ = await api.call(
        "GET", PODS, params={"continue": first["metadata"]["continue"], "resourceVersion": "3"}
    )
    assert status == 400


async def test_continue_tokens_expire_with_history(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    for name in "abc":
        server.create("pods", pod(name))
    first = await api.ok("GET", PODS, params={"limit": "1"})
    server.create("pods", pod("d"))
    server.compact()
    status, body, _ = await api.call(
        "GET", PODS, params={"limit": "1", "continue": first["metadata"]["continue"]}
    )
    assert (status, body["reason"]) == (410, "Expired")
    assert body["message"].startswith("The provided continue parameter is too old")
    inconsistent = body["metadata"]["continue"]  # kube offers to go on at the latest state
    rest = await api.ok("GET", PODS, params={"continue": inconsistent})
    assert names(rest["items"]) == ["b", "c", "d"]
    assert rest["metadata"]["resourceVersion"] == server.resource_version


async def test_list_selectors(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    server.create("pods", pod("a", app="web", tier="fe"))
    server.create("pods", pod("b", app="web", tier="be"))
    server.create("pods", pod("c", app="db"))
    server.create("pods", pod("d"))
    server.create("pods", pod("e", app="web"), namespace="kube-system")
    server.update("pods", {**server.get("pods", "b"), "status": {"phase": "Running"}})
    cases = {
        "app=web": ["a", "b"],
        "app==web": ["a", "b"],
        "app!=web": ["c", "d"],
        "app in (web,db)": ["a", "b", "c"],
        "app notin (web)": ["c", "d"],
        "tier": ["a", "b"],
        "!tier": ["c", "d"],
        "app=web,tier!=fe": ["b"],
    }
    for selector, expected in cases.items():
        listed = await api.ok("GET", PODS, params={"labelSelector": selector})
        assert names(listed["items"]) == expected, selector
    fields = {
        "metadata.name=c": ["c"],
        "metadata.name!=c,metadata.namespace=default": ["a", "b", "d"],
        "status.phase=Running": ["b"],
        "spec.nodeName=": ["a", "b", "c", "d"],
    }
    for selector, expected in fields.items():
        listed = await api.ok("GET", PODS, params={"fieldSelector": selector})
        assert names(listed["items"]) == expected, selector
    everywhere = await api.ok(
        "GET", "/api/v1/pods", params={"fieldSelector": "metadata.namespace=kube-system"}
    )
    assert names(everywhere["items"]) == ["e"]
    paged = await api.ok("GET", PODS, params={"labelSelector": "app=web", "limit": "1"})
    assert names(paged["items"]) == ["a"]
    assert paged["metadata"]["continue"]
    assert "remainingItemCount" not in paged["metadata"]  # unknown with a selector, as in kube
    status, body, _ = await api.call("GET", PODS, params={"labelSelector": "app in (web"})
    assert status == 400
    assert "missing ')'" in body["message"]
    status, body, _ = await api.call("GET", PODS, params={"fieldSelector": "spec.foo=bar"})
    assert (status, body["message"]) == (400, "field label not supported: spec.foo")
    status, _, _ = await api.call(
        "GET", "/api/v1/namespaces/default/configmaps", params={"fieldSelector": "status.phase=x"}
    )
    assert status == 400  # the pod-only fields are pods' only


# -- watches ----------------------------------------------------------------------------------


async def test_watch_from_a_resource_version(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    a = server.create("pods", pod("a"))
    server.create("pods", pod("b"))
    server.delete("pods", "a")
    stream = await api.watch(resourceVersion=a["metadata"]["resourceVersion"])
    replay = await stream.take(2)
    assert event_names(replay) == [("ADDED", "b"), ("DELETED", "a")]
    assert replay[0]["object"]["kind"] == "Pod"  # watch objects carry their kind
    await server.wait_for_watches(1, "pods")
    server.create("pods", pod("c"))
    server.create("configmaps", {"metadata": {"name": "cm"}})  # another resource: not here
    server.create("pods", pod("x"), namespace="kube-system")  # another namespace: not here
    server.update("pods", {**server.get("pods", "c"), "spec": {"n": 1}})
    live = await stream.take(2)
    assert event_names(live) == [("ADDED", "c"), ("MODIFIED", "c")]
    assert rv(live[1]["object"]) == int(server.resource_version)
    assert stream.response.headers["Content-Type"] == "application/json"
    assert stream.response.headers["Transfer-Encoding"] == "chunked"


async def test_watch_from_a_compacted_rv_is_a_410_error_event(
    env: tuple[ApiServerEmulator, Api],
) -> None:
    server, api = env
    a = server.create("pods", pod("a"))
    server.create("pods", pod("b"))
    server.compact()
    stream = await api.watch(resourceVersion=str(rv(a) - 1))
    assert stream.response.status == 200
    error = await stream.next()
    assert error == {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {rv(a) - 1} ({server.resource_version})",
            "reason": "Expired",
            "code": 410,
        },
    }
    assert await stream.rest() == b""  # and the stream ends
    ok = await api.watch(resourceVersion=server.resource_version)  # the current RV is fine
    await server.wait_for_watches(1)
    server.create("pods", pod("c"))
    assert event_names([await ok.next()]) == [("ADDED", "c")]


async def test_watch_history_limit_and_seconds() -> None:
    clock = FakeClock()
    async with running(history_limit=2, history_seconds=30, clock=clock) as (server, api):
        first = server.create("pods", pod("a"))
        for name in "bcd":
            server.create("pods", pod(name))
        stream = await api.watch(resourceVersion=first["metadata"]["resourceVersion"])
        assert (await stream.next())["object"]["reason"] == "Expired"  # only 2 events kept
        kept = await api.watch(resourceVersion=str(int(server.resource_version) - 2))
        assert event_names(await kept.take(2)) == [("ADDED", "c"), ("ADDED", "d")]
        await clock.advance(31)  # now every event is older than 30 s
        late = await api.watch(resourceVersion=str(int(server.resource_version) - 1))
        assert (await late.next())["object"]["code"] == 410


async def test_watch_without_rv_sends_synthetic_added(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    server.create("pods", pod("b"))
    server.create("pods", pod("a"))
    for params in ({}, {"resourceVersion": "0"}):
        stream = await api.watch(**params)
        assert event_names(await stream.take(2)) == [("ADDED", "a"), ("ADDED", "b")]
    # With bookmarks allowed, kube's WatchList defaulting adds the initial-events-end bookmark.
    stream = await api.watch(resourceVersion="0", allowWatchBookmarks="true")
    events = await stream.take(3)
    assert events[2]["type"] == "BOOKMARK"
    assert events[2]["object"]["metadata"]["annotations"] == {INITIAL_EVENTS_END: "true"}
    await server.wait_for_watches(3)
    server.create("pods", pod("c"))
    assert event_names([await stream.next()]) == [("ADDED", "c")]


async def test_watch_list_send_initial_events(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    server.create("pods", pod("b"))
    server.create("pods", pod("a"))
    stream = await api.watch(
        sendInitialEvents="true", resourceVersionMatch="NotOlderThan", allowWatchBookmarks="true"
    )
    events = await stream.take(3)
    assert event_names(events[:2]) == [("ADDED", "a"), ("ADDED", "b")]
    assert events[2] == {
        "type": "BOOKMARK",
        "object": {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "resourceVersion": server.resource_version,
                "creationTimestamp": None,
                "annotations": {INITIAL_EVENTS_END: "true"},
            },
        },
    }
    await server.wait_for_watches(1)
    server.delete("pods", "a")
    assert event_names([await stream.next()]) == [("DELETED", "a")]
    status, body, _ = await api.call(
        "GET", PODS, params={"watch": "1", "sendInitialEvents": "true"}
    )
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    )
    assert body["details"]["causes"][0]["reason"] == "FieldValueForbidden"
    status, body, _ = await api.call(
        "GET", PODS, params={"watch": "1", "resourceVersionMatch": "NotOlderThan"}
    )
    assert status == 422
    assert "unless sendInitialEvents is provided" in body["message"]
    future = str(int(server.resource_version) + 10)
    too_new = await api.watch(
        sendInitialEvents="true", resourceVersionMatch="NotOlderThan", resourceVersion=future
    )
    error = await too_new.next()
    assert error["type"] == "ERROR"
    assert error["object"]["code"] == 504
    assert error["object"]["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    quiet = await api.watch(sendInitialEvents="false", resourceVersionMatch="NotOlderThan")
    await server.wait_for_watches(2)
    server.create("pods", pod("z"))
    assert event_names([await quiet.next()]) == [("ADDED", "z")]  # no initial events


async def test_periodic_bookmarks_and_timeout_on_the_clock() -> None:
    clock = FakeClock()
    async with running(clock=clock, bookmark_interval=10) as (server, api):
        server.create("pods", pod("a"))
        start = server.resource_version
        stream = await api.watch(
            resourceVersion=start, allowWatchBookmarks="true", timeoutSeconds="25"
        )
        plain = await api.watch(resourceVersion=start)  # no bookmarks asked for
        await server.wait_for_watches(2)
        await clock.wait_for_sleepers(1)
        await clock.advance(10)
        bookmark = await stream.next()
        assert bookmark == {
            "type": "BOOKMARK",
            "object": {
                "kind": "Pod",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": start, "creationTimestamp": None},
            },
        }
        server.create("pods", pod("b"))
        assert event_names([await stream.next()]) == [("ADDED", "b")]
        await clock.advance(10)
        assert (await stream.next())["object"]["metadata"][
            "resourceVersion"
        ] == server.resource_version
        await clock.advance(5)  # 25 s: timeoutSeconds ends the stream normally
        assert await stream.rest() == b""
        assert event_names([await plain.next()]) == [("ADDED", "b")]
        assert server.open_watches() == 1


async def test_watch_with_selectors_sees_objects_enter_and_leave(
    env: tuple[ApiServerEmulator, Api],
) -> None:
    server, api = env
    stream = await api.watch(resourceVersion=server.resource_version, labelSelector="app=web")
    await server.wait_for_watches(1)
    server.create("pods", pod("a", app="db"))
    obj = server.patch("pods", "a", {"metadata": {"labels": {"app": "web"}}})
    entered = await stream.next()
    assert event_names([entered]) == [("ADDED", "a")]
    assert rv(entered["object"]) == rv(obj)
    server.patch("pods", "a", {"metadata": {"annotations": {"x": "y"}}})
    assert event_names([await stream.next()]) == [("MODIFIED", "a")]
    left = server.patch("pods", "a", {"metadata": {"labels": {"app": "db"}}})
    gone = await stream.next()
    assert event_names([gone]) == [("DELETED", "a")]
    assert gone["object"]["metadata"]["labels"] == {"app": "web"}  # the last matching state
    assert rv(gone["object"]) == rv(left)  # at the event's resourceVersion
    named = await api.watch(
        "/api/v1/namespaces/default/pods/b", resourceVersion=server.resource_version
    )
    await server.wait_for_watches(2)
    server.create("pods", pod("c"))
    server.create("pods", pod("b"))
    assert event_names([await named.next()]) == [("ADDED", "b")]
    status, _body, _ = await api.call(
        "GET", PODS, params={"watch": "1", "fieldSelector": "bad.field=x"}
    )
    assert status == 400


# -- faults -----------------------------------------------------------------------------------

VIA = pytest.mark.parametrize("via", ["python", "admin"])


async def inject(via: str, server: ApiServerEmulator, api: Api, op: str, **args: Any) -> None:
    """Inject the fault ``op`` with ``args`` as ``via`` says: ``"python"`` calls the
    emulator's method of that name, ``"admin"`` posts it to the emulator's fault
    endpoint. A test run both ways shows the two act alike."""
    if via == "python":
        done = getattr(server, op)(**args)
        if asyncio.iscoroutine(done):
            await done
    else:
        await api.admin(op=op, **args)


@VIA
async def test_drop_watches(via: str) -> None:
    async with running() as (server, api):
        stream = await api.watch(resourceVersion=server.resource_version)
        await server.wait_for_watches(1)
        await inject(via, server, api, "drop_watches")
        assert await stream.rest() == b""  # a normal end of stream
        abrupt = await api.watch(resourceVersion=server.resource_version)
        await server.wait_for_watches(1)
        await inject(via, server, api, "drop_watches", abrupt=True)
        with pytest.raises(aiohttp.ClientPayloadError):
            await abrupt.rest()
        assert server.open_watches() == 0


@VIA
async def test_fail_next(via: str) -> None:
    async with running() as (server, api):

        async def fail(count: int, status: int, **kw: Any) -> None:
            await inject(via, server, api, "fail_next", count=count, status=status, **kw)

        await fail(2, 500)
        for _ in range(2):
            status, body, _ = await api.call("GET", PODS)
            assert (status, body["reason"], body["kind"]) == (500, "InternalError", "Status")
        assert (await api.call("GET", PODS))[0] == 200
        await fail(1, 429, retry_after=3)
        status, body, headers = await api.call("GET", "/healthz")  # every request counts
        assert (status, body["reason"], headers["Retry-After"]) == (429, "TooManyRequests", "3")
        assert body["details"] == {"retryAfterSeconds": 3}
        await fail(1, 410)
        status, body, _ = await api.call("GET", PODS)
        assert (status, body["reason"]) == (410, "Expired")
        await fail(1, 401)
        status, body, _ = await api.call("GET", PODS)
        assert (status, body["reason"]) == (401, "Unauthorized")
        await fail(3, 503, reason="Custom")
        status, body, _ = await api.call("GET", PODS)
        assert (status, body["reason"]) == (503, "Custom")
        await fail(0, 500)  # cancels
        assert (await api.call("GET", PODS))[0] == 200
        with pytest.raises(ValueError, match="HTTP error code"):
            server.fail_next(1, 200)


@VIA
async def test_stall_watches(via: str) -> None:
    async with running() as (server, api):
        stalled = await api.watch(resourceVersion=server.resource_version)
        await server.wait_for_watches(1)
        await inject(via, server, api, "stall_watches")
        server.create("pods", pod("a"))
        fresh = await api.watch(resourceVersion=server.resource_version)
        await server.wait_for_watches(2)
        assert server.open_watches() == 2  # the stalled one stays open
        server.create("pods", pod("b"))
        assert event_names([await fresh.next()]) == [("ADDED", "b")]  # new watches work
        server.drop_watches()
        assert await stalled.rest() == b""  # it never delivered a thing
        assert await fresh.rest() == b""


@VIA
async def test_slow_streams(via: str) -> None:
    clock = FakeClock()
    async with running(clock=clock) as (server, api):
        stream = await api.watch(resourceVersion=server.resource_version)
        await server.wait_for_watches(1)
        await inject(via, server, api, "slow_streams", delay_per_event=5)
        server.create("pods", pod("a"))
        server.create("pods", pod("b"))
        await clock.wait_for_sleepers(1)
        assert clock.pending == [5.0]  # the first event waits 5 s
        await clock.advance(5)
        assert event_names([await stream.next()]) == [("ADDED", "a")]
        await clock.wait_for_sleepers(1)
        assert clock.pending == [10.0]
        await inject(via, server, api, "slow_streams", delay_per_event=None)
        await clock.advance(5)
        server.create("pods", pod("c"))
        assert event_names(await stream.take(2)) == [("ADDED", "b"), ("ADDED", "c")]
        assert clock.pending == []


@VIA
async def test_corrupt_resource_versions(via: str) -> None:
    async with running() as (server, api):
        stream = await api.watch(resourceVersion=server.resource_version)
        await server.wait_for_watches(1)
        corrupt = {"not": "a string"}
        await inject(via, server, api, "corrupt_resource_versions", count=2, value=corrupt)
        for name in "abc":
            server.create("pods", pod(name))
        events = await stream.take(3)
        assert event_names(events) == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]
        rvs = [e["object"]["metadata"]["resourceVersion"] for e in events]
        assert rvs[:2] == [{"not": "a string"}] * 2
        assert rvs[2] == server.get("pods", "c", "default")["metadata"]["resourceVersion"]
        server.corrupt_resource_versions(5, 12)
        server.reset_faults()  # cancels it
        server.create("pods", pod("d"))
        assert isinstance((await stream.next())["object"]["metadata"]["resourceVersion"], str)
        with pytest.raises(ValueError, match="count"):
            server.corrupt_resource_versions(-1, 1)


@VIA
async def test_restart_keeps_data_and_cuts_streams(via: str) -> None:
    async with running() as (server, api):
        server.create("pods", pod("a"))
        url, version = server.url, server.resource_version
        stream = await api.watch(resourceVersion=version)
        await server.wait_for_watches(1)
        await inject(via, server, api, "restart")
        with pytest.raises(aiohttp.ClientPayloadError):
            await stream.rest()
        assert server.url == url
        assert server.resource_version == version
        assert names((await api.ok("GET", PODS))["items"]) == ["a"]
        resumed = await api.watch(resourceVersion=version)  # history survives too
        await server.wait_for_watches(1)
        server.create("pods", pod("b"))
        assert event_names([await resumed.next()]) == [("ADDED", "b")]


async def test_admin_endpoint_compacts_and_checks_its_input(
    env: tuple[ApiServerEmulator, Api],
) -> None:
    server, api = env
    old = server.resource_version
    server.create("pods", pod("a"))
    await api.admin(op="compact")
    stream = await api.watch(resourceVersion=old)
    assert (await stream.next())["object"]["code"] == 410
    status, body, _ = await api.call("POST", "/_emulator/faults", {"op": "explode"})
    assert status == 400
    assert "unknown op" in body["message"]
    status, _, _ = await api.call("GET", "/_emulator/faults")
    assert status == 405
    status, _, _ = await api.call("POST", "/_emulator/faults", {"op": "fail_next", "count": -1})
    assert status == 400
    server.fail_next(5, 500)
    await api.admin(op="reset")  # the admin endpoint is not counted, and resets
    assert (await api.call("GET", PODS))[0] == 200
    async with (
        aiohttp.ClientSession() as anonymous,
        anonymous.post(server.url + "/_emulator/faults", json={"op": "compact"}) as r,
    ):
        assert r.status == 401  # the admin endpoint needs the token too
    assert ("GET", "/api/v1/namespaces/default/pods") in server.requests


# -- auth, TLS, kubeconfig --------------------------------------------------------------------


async def test_token_auth() -> None:
    async with running(token="s3cret") as (server, _), aiohttp.ClientSession() as session:
        for headers, path, expected in [
            ({}, PODS, 401),
            ({"Authorization": "Bearer wrong"}, PODS, 401),
            ({"Authorization": "Basic czNjcmV0"}, PODS, 401),
            ({"Authorization": "Bearer s3cret"}, PODS, 200),
            ({}, "/healthz", 200),
            ({}, "/readyz", 200),
            ({}, "/version", 200),
            ({"Authorization": "Bearer wrong"}, "/livez", 401),
        ]:
            async with session.get(server.url + path, headers=headers) as response:
                assert response.status == expected, (headers, path)
                if expected == 401:
                    body = await response.json()
                    assert (body["kind"], body["reason"], body["code"]) == (
                        "Status",
                        "Unauthorized",
                        401,
                    )
    async with (
        running(token=None) as (server, _),
        aiohttp.ClientSession() as session,
        session.get(server.url + PODS) as response,
    ):
        assert response.status == 200
        assert server.token is None


async def test_tls_with_the_emulators_ca() -> None:
    async with running(tls=True) as (server, api):
        assert server.url.startswith("https://127.0.0.1:")
        assert server.ca_pem is not None
        assert server.ca_pem.startswith(b"-----BEGIN CERTIFICATE-----")
        server.create("pods", pod("a"))
        assert names((await api.ok("GET", PODS))["items"]) == ["a"]
        stream = await api.watch(resourceVersion="0")
        assert event_names([await stream.next()]) == [("ADDED", "a")]
        config = server.kubeconfig()
        cluster = config["clusters"][0]["cluster"]
        assert base64.b64decode(cluster["certificate-authority-data"]) == server.ca_pem
        async with aiohttp.ClientSession() as untrusting:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await untrusting.get(server.url + "/healthz")


async def test_kubeconfig_written_at_start_and_removed_at_stop(tmp_path: Path) -> None:
    server = ApiServerEmulator(token="t0k")
    with pytest.raises(RuntimeError):
        _ = server.kubeconfig_path
    await server.start()
    try:
        path = server.kubeconfig_path
        assert oct(os.stat(path).st_mode & 0o777) == "0o600"
        config = yaml.safe_load(Path(path).read_text())  # noqa: ASYNC240
        assert config["current-context"] == "emulator"
        assert config["clusters"][0]["cluster"] == {"server": server.url}
        assert config["users"][0]["user"] == {"token": "t0k"}
        assert config["contexts"][0]["context"]["namespace"] == "default"
        server.write_kubeconfig(tmp_path / "kc")
        assert yaml.safe_load((tmp_path / "kc").read_text()) == config
        assert "t0k" not in repr(server)
    finally:
        await server.stop()
    assert not os.path.exists(path)  # noqa: ASYNC240
    await server.stop()  # idempotent


# -- content negotiation ----------------------------------------------------------------------


async def test_metadata_only_answers(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    created = server.create("pods", pod("a", app="x"))
    status, listed, _ = await api.call("GET", PODS, headers={"Accept": META_LIST})
    assert status == 200
    assert listed["kind"] == "PartialObjectMetadataList"
    assert listed["apiVersion"] == "meta.k8s.io/v1"
    item = listed["items"][0]
    assert item == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": created["metadata"],
    }
    status, one, _ = await api.call("GET", f"{PODS}/a", headers={"Accept": META_ONE})
    assert one == item
    stream = await api.watch(headers={"Accept": META_ONE}, resourceVersion=server.resource_version)
    await server.wait_for_watches(1)
    server.patch("pods", "a", {"spec": {"x": 1}})
    event = await stream.next()
    assert event["type"] == "MODIFIED"
    assert set(event["object"]) == {
        "kind",
        "apiVersion",
        "metadata",
    }
    assert event["object"]["kind"] == "PartialObjectMetadata"
    # (Protobuf it answers for built-in kinds, as kube-apiserver: see test_protobuf.py.)
    status, body, _ = await api.call("GET", PODS, headers={"Accept": "application/cbor"})
    assert (status, body["reason"]) == (406, "NotAcceptable")
    status, _, _ = await api.call(
        "GET", PODS, headers={"Accept": META_ONE}
    )  # the list kind is needed
    assert status == 406


async def test_tables_for_kubectl(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    server.create("pods", pod("a"))
    status, table, _ = await api.call("GET", PODS, headers={"Accept": TABLE})
    assert status == 200
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "IP",
        "Node",
        "Nominated Node",
        "Readiness Gates",
    ]
    assert [c["priority"] for c in table["columnDefinitions"]] == [0] * 5 + [1] * 4
    row = table["rows"][0]
    assert row["cells"][:4] == ["a", "0/1", "Pending", 0]
    assert row["cells"][5:] == ["<none>"] * 4
    assert row["object"]["kind"] == "PartialObjectMetadata"
    status, table, _ = await api.call(
        "GET",
        "/api/v1/namespaces/default/configmaps",
        params={"includeObject": "Object"},
        headers={"Accept": TABLE},
    )
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]


# -- discovery and registered resources -------------------------------------------------------


async def test_discovery_legacy_and_aggregated(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    name = server.register_resource(
        "example.com", "v1alpha1", "widgets", "Widget", short_names=("wd",), status_subresource=True
    )
    server.register_resource("example.com", "v1alpha1", "gadgets", "Gadget", namespaced=False)
    assert name == "widgets.example.com"
    versions = await api.ok("GET", "/api")
    assert versions["kind"] == "APIVersions"
    assert versions["versions"] == ["v1"]
    core = await api.ok("GET", "/api/v1")
    pods = next(r for r in core["resources"] if r["name"] == "pods")
    assert pods["namespaced"]
    assert pods["kind"] == "Pod"
    assert "watch" in pods["verbs"]
    assert pods["shortNames"] == ["po"]
    assert any(r["name"] == "pods/status" for r in core["resources"])
    groups = await api.ok("GET", "/apis")
    assert {g["name"] for g in groups["groups"]} == {
        "apps",
        "events.k8s.io",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "admissionregistration.k8s.io",
        "rbac.authorization.k8s.io",
        "authorization.k8s.io",
        "policy",
        "example.com",
    }
    group = await api.ok("GET", "/apis/example.com")
    assert group["preferredVersion"] == {
        "groupVersion": "example.com/v1alpha1",
        "version": "v1alpha1",
    }
    resources = await api.ok("GET", "/apis/example.com/v1alpha1")
    by_name = {r["name"]: r for r in resources["resources"]}
    assert by_name["widgets"]["namespaced"]
    assert by_name["widgets"]["shortNames"] == ["wd"]
    assert not by_name["gadgets"]["namespaced"]
    assert "widgets/status" in by_name
    _, aggregated, headers = await api.call(
        "GET", "/apis", headers={"Accept": AGGREGATED + ",application/json"}
    )
    assert headers["Content-Type"] == AGGREGATED
    assert aggregated["kind"] == "APIGroupDiscoveryList"
    example = next(g for g in aggregated["items"] if g["metadata"].get("name") == "example.com")
    widget = example["versions"][0]["resources"][0]
    assert widget["resource"] == "widgets"
    assert widget["scope"] == "Namespaced"
    assert widget["responseKind"] == {
        "group": "example.com",
        "version": "v1alpha1",
        "kind": "Widget",
    }
    _status, core_aggregated, _ = await api.call("GET", "/api", headers={"Accept": AGGREGATED})
    assert core_aggregated["items"][0]["versions"][0]["version"] == "v1"
    assert (await api.call("GET", "/apis/nope.io/v1"))[0] == 404
    assert (await api.call("GET", "/apis/nope.io"))[0] == 404
    assert (await api.call("GET", "/api/v2"))[0] == 404
    assert (await api.ok("GET", "/version"))["major"] == "1"
    assert "/apis/example.com/v1alpha1" in (await api.ok("GET", "/"))["paths"]
    with pytest.raises(ValueError, match="already registered"):
        server.register_resource("example.com", "v1", "widgets", "Widget")


async def test_custom_resources_validate_their_kind_and_reset_status(
    env: tuple[ApiServerEmulator, Api],
) -> None:
    server, api = env
    server.register_resource("example.com", "v1", "widgets", "Widget", status_subresource=True)
    path = "/apis/example.com/v1/namespaces/default/widgets"
    typemeta = {"apiVersion": "example.com/v1", "kind": "Widget"}
    status, body, _ = await api.call(
        "POST", path, {**typemeta, "kind": "Gadget", "metadata": {"name": "w"}}
    )
    assert (status, body["reason"]) == (422, "Invalid")  # kube: 422 for custom resources
    assert (
        body["message"]
        == 'Gadget.example.com "w" is invalid: kind: Invalid value: "Gadget": must be Widget'
    )
    created = await api.ok(
        "POST", path, {**typemeta, "metadata": {"name": "w"}, "spec": {"a": 1}, "status": {"s": 1}}
    )
    assert "status" not in created  # a create cannot write status
    assert created["metadata"]["generation"] == 1
    spec = await api.ok(
        "PATCH", f"{path}/w", {"spec": {"a": 2}}, content_type="application/merge-patch+json"
    )
    assert spec["metadata"]["generation"] == 2
    cm = await api.ok("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}})
    assert "generation" not in cm["metadata"]  # ConfigMaps have none, as in kube


async def test_field_managers_come_from_the_request(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    path = "/api/v1/namespaces/default/configmaps"
    created = await api.ok(
        "POST",
        path,
        {"metadata": {"name": "c"}, "data": {"k": "v"}},
        headers={"User-Agent": "tool/1.2"},
    )
    (entry,) = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("tool", "Update", "v1")
    assert entry["fieldsV1"] == {"f:data": {".": {}, "f:k": {}}}
    named = await api.ok(
        "PATCH",
        f"{path}/c",
        {"data": {"k": "w"}},
        content_type="application/merge-patch+json",
        params={"fieldManager": "editor"},
    )
    assert {e["manager"]: e["fieldsV1"] for e in named["metadata"]["managedFields"]} == {
        "tool": {"f:data": {}},  # it still set the map, as kube keeps it
        "editor": {"f:data": {"f:k": {}}},
    }
    status, body, _ = await api.call(
        "POST", path, {"metadata": {"name": "d"}}, params={"fieldManager": "x" * 129}
    )
    assert (status, body["details"]["causes"][0]["field"]) == (422, "fieldManager")
    # The Python data API writes like the storage layer: no field manager of its own.
    assert (
        "managedFields" not in server.create("configmaps", {"metadata": {"name": "e"}})["metadata"]
    )
    status, body, _ = await api.call("DELETE", f"{path}/c", {"propagationPolicy": "Sideways"})
    assert (status, body["details"]["causes"][0]["field"]) == (422, "propagationPolicy")


async def test_registered_resources_are_served(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    server.register_resource("example.com", "v1", "widgets", "Widget")
    server.register_resource("example.com", "v1", "gadgets", "Gadget", namespaced=False)
    base = "/apis/example.com/v1"
    status, body, _ = await api.call(
        "POST", f"{base}/namespaces/default/widgets", {"metadata": {"name": "w"}}
    )
    assert (status, body["reason"]) == (400, "BadRequest")  # custom resources need their kind
    assert "Object 'Kind' is missing" in body["message"]
    typemeta = {"apiVersion": "example.com/v1"}
    widget = await api.ok(
        "POST",
        f"{base}/namespaces/default/widgets",
        {**typemeta, "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}},
    )
    assert widget["kind"] == "Widget"
    assert widget["apiVersion"] == "example.com/v1"
    gadget = await api.ok(
        "POST",
        f"{base}/gadgets",
        {**typemeta, "kind": "Gadget", "metadata": {"name": "g", "namespace": "ignored"}},
    )
    assert "namespace" not in gadget["metadata"]
    listed = await api.ok("GET", f"{base}/widgets")
    assert listed["kind"] == "WidgetList"
    assert listed["items"][0]["kind"] == "Widget"  # custom resources' list items carry their kind
    assert (await api.ok("GET", f"{base}/gadgets/g"))["metadata"]["name"] == "g"
    assert (await api.call("GET", f"{base}/namespaces/default/gadgets/g"))[0] == 404
    assert (await api.call("GET", f"{base}/widgets/w"))[0] == 404
    stream = await api.watch(f"{base}/gadgets", resourceVersion=server.resource_version)
    await server.wait_for_watches(1)
    server.delete("gadgets.example.com", "g")
    deleted = await stream.next()
    assert event_names([deleted]) == [("DELETED", "g")]
    assert deleted["object"]["kind"] == "Gadget"
    assert server.get("widgets", "w")["spec"] == {"size": 1}
    assert (await api.call("GET", f"{base}/namespaces/default/widgets/w/status"))[0] == 404


async def test_deleting_a_crd_deletes_its_objects_and_ends_its_watches(
    env: tuple[ApiServerEmulator, Api],
) -> None:
    server, api = env
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "gizmos", "kind": "Gizmo", "shortNames": ["gz"]},
            "versions": [{"name": "v1", "served": True, "storage": True}],
        },
    }
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    await api.ok("POST", crds, crd)
    discovery = await api.ok("GET", "/apis/example.com/v1")
    assert [(r["name"], r["namespaced"], r["shortNames"]) for r in discovery["resources"]] == [
        ("gizmos", False, ["gz"])
    ]
    gizmos = "/apis/example.com/v1/gizmos"
    await api.ok(
        "POST", gizmos, {"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}}
    )
    stream = await api.watch(gizmos, resourceVersion=server.resource_version)
    await server.wait_for_watches(1, "gizmos")
    await api.ok("DELETE", f"{crds}/gizmos.example.com")
    event = await stream.next()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("DELETED", "g")
    assert await stream.rest() == b""  # the watch ends
    assert (await api.get(gizmos))[0] == 404
    assert (await api.get("/apis/example.com/v1"))[0] == 404


# -- the command line -------------------------------------------------------------------------


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_command_line_serves_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    process = await start(
        sys.executable,
        "-m",
        "kubereflector.testing.apiserver",
        "--port",
        "0",
        "--write-kubeconfig",
        str(kubeconfig),
        "--seed-pods",
        "3",
    )
    try:
        url = await read_line(process)
        assert re.fullmatch(r"https://127\.0\.0\.1:\d+", url), url  # HTTPS by default
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        assert cluster["server"] == url
        trust = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        token = config["users"][0]["user"]["token"]
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            aiohttp.ClientSession(headers=headers) as session,
            session.get(url + PODS, ssl=trust) as response,
        ):
            body = await response.json()
        # The same pods as `kubereflector emulator --seed-pods 3`: labelled, on nodes.
        seeded = list(cluster_pods(3))
        assert sorted(names(body["items"])) == sorted(names(seeded))
        assert {p["metadata"]["labels"]["app"] for p in body["items"]} == {"web", "api", "worker"}
        assert all(p["spec"].get("nodeName", "").startswith("node-") for p in body["items"])
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        _, stderr = await finish(process)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "RuntimeWarning" not in stderr


# -- OpenAPI and server-side field validation (what kubectl validates with) ------------------


async def test_openapi_v3_index_and_group_version_documents(
    env: tuple[ApiServerEmulator, Api],
) -> None:
    server, api = env
    server.register_resource("example.com", "v1", "widgets", "Widget")
    index = await api.ok("GET", "/openapi/v3")
    assert {"api/v1", "apis/apps/v1", "apis/example.com/v1"} <= set(index["paths"])
    url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/apps/v1?hash=")
    status, document, _ = await api.call("GET", url.split("?")[0])
    assert status == 200
    assert document["openapi"].startswith("3.")
    item = document["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    patch = item["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "version": "v1",
        "kind": "Deployment",
    }
    assert {"name": "fieldValidation", "in": "query"}.items() <= patch["parameters"][0].items()
    # no strategic merge patch media type: kubectl apply uses its compiled-in patch metadata
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    schema = document["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]
    assert schema["x-kubernetes-group-version-kind"][0]["kind"] == "Deployment"
    assert (await api.get("/openapi/v3/apis/nothing.example/v1"))[0] == 404


async def test_openapi_v2_is_json_and_refuses_protobuf_only(
    env: tuple[ApiServerEmulator, Api],
) -> None:
    _, api = env
    protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    status, body, _ = await api.call("GET", "/openapi/v2", headers={"Accept": protobuf})
    assert (status, body["reason"]) == (406, "NotAcceptable")
    status, body, headers = await api.call(
        "GET", "/openapi/v2", headers={"Accept": f"{protobuf}, application/json"}
    )
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert body["swagger"] == "2.0"
    assert "/api/v1/namespaces/{namespace}/pods/{name}" in body["paths"]


async def test_field_validation_strict_warn_and_ignore(env: tuple[ApiServerEmulator, Api]) -> None:
    server, api = env
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "colour": "x"}}
    cm["datta"] = {}
    path = "/api/v1/namespaces/default/configmaps"
    status, body, _ = await api.call("POST", path, cm, params={"fieldValidation": "Strict"})
    assert status == 400
    assert body["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
        'unknown field "datta", unknown field "metadata.colour"'
    )
    status, body, _ = await api.call("POST", path, cm, params={"fieldValidation": "Bogus"})
    assert status == 400
    assert "Unsupported value" in body["message"]
    status, _, headers = await api.call("POST", path, cm, params={"fieldValidation": "Warn"})
    assert status == 201
    assert headers.getall("Warning") == [
        '299 - "unknown field \\"datta\\""',
        '299 - "unknown field \\"metadata.colour\\""',
    ]
    status, _, headers = await api.call(
        "PATCH",
        f"{path}/a",
        {"data": {"k": "v"}},
        params={"fieldValidation": "Strict"},
        content_type="application/merge-patch+json",
    )
    assert status == 200
    assert "Warning" not in headers
    cm["metadata"] = {"name": "b"}
    status, _, _ = await api.call("POST", path, cm, params={"fieldValidation": "Ignore"})
    assert status == 201
    assert [c["metadata"]["name"] for c in server.objects("configmaps")] == ["a", "b"]
