"""kubereflector.protobuf against kube-apiserver's own answers: the same lists and
error recorded in JSON and in protobuf (tests/data/protobuf, recorded from v1.28.7
by tools/record_protobuf_fixtures.py) decode to the same values."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from fake_http import FakeServer, serve
from kubereflector import (
    CompactObject,
    DecodeError,
    ListOptions,
    NotFoundError,
    strip_managed_fields,
)
from kubereflector.client import Client, ClientConfig, StaticAuth
from kubereflector.protobuf import CONTENT_TYPE, decode, encode, kubernetes_release

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "protobuf"
INDEX = json.loads((FIXTURES / "index.json").read_text(encoding="utf-8"))
LISTS = [f for f in INDEX["fixtures"] if f["type"] == "list"]
ERROR = next(f for f in INDEX["fixtures"] if f["type"] == "error")


def _bodies(fixture: dict[str, Any]) -> tuple[bytes, bytes]:
    return (
        (FIXTURES / fixture["protobuf"]["file"]).read_bytes(),
        (FIXTURES / fixture["json"]["file"]).read_bytes(),
    )


def test_the_fixtures_cover_the_kinds_and_come_from_the_tables_release() -> None:
    assert len(LISTS) >= 25
    assert all(f["protobuf"]["contentType"] == CONTENT_TYPE for f in LISTS)
    assert INDEX["server"]["gitVersion"] == kubernetes_release()


@pytest.mark.parametrize("fixture", LISTS, ids=lambda f: f["name"])
def test_a_protobuf_list_decodes_to_what_the_servers_json_decodes_to(
    fixture: dict[str, Any],
) -> None:
    protobuf_body, json_body = _bodies(fixture)
    expected = json.loads(json_body)
    assert expected["items"], "a fixture with no items proves little"
    assert decode(protobuf_body) == expected


@pytest.mark.parametrize("fixture", LISTS, ids=lambda f: f["name"])
def test_encoding_the_json_gives_back_the_same_values(fixture: dict[str, Any]) -> None:
    protobuf_body, json_body = _bodies(fixture)
    expected = json.loads(json_body)
    encoded = encode(expected)
    assert decode(encoded) == expected
    if fixture["kind"] != "ControllerRevisionList":
        # The very bytes kube-apiserver wrote (a ControllerRevision's data is JSON
        # inside protobuf, which the server keeps as it was written).
        assert encoded == protobuf_body


def test_an_error_answer_decodes_to_the_same_status() -> None:
    protobuf_body, json_body = _bodies(ERROR)
    status = decode(protobuf_body)
    assert status == json.loads(json_body)
    assert status["kind"] == "Status"
    assert status["code"] == 404


def test_go_zero_values_as_the_servers_json_has_them() -> None:
    # A BOOKMARK's Pod is empty; kube-apiserver's JSON for it shows Go's zero
    # values: a zero Time as null, a nil slice as null, an empty struct as {}.
    empty_pod = encode({"apiVersion": "v1", "kind": "Pod"})
    assert decode(empty_pod) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"creationTimestamp": None},
        "spec": {"containers": None},
        "status": {},
    }


def test_nested_objects_get_the_kind_the_servers_conversion_gives_them() -> None:
    fixture = next(f for f in LISTS if f["kind"] == "StatefulSetList")
    protobuf_body, _json_body = _bodies(fixture)
    templates = decode(protobuf_body)["items"][0]["spec"]["volumeClaimTemplates"]
    assert templates
    assert all((t["apiVersion"], t["kind"]) == ("v1", "PersistentVolumeClaim") for t in templates)


# -- compact objects listed in protobuf, through the client ------------------------------


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with serve() as s:
        yield s


@pytest_asyncio.fixture
async def client(server: FakeServer) -> AsyncIterator[Client]:
    async with Client(ClientConfig(server=server.url, auth=StaticAuth(token="t0ken"))) as c:
        yield c


def _serve_both(server: FakeServer, fixture: dict[str, Any]) -> None:
    """Answer the fixture's path as kube-apiserver did: protobuf when asked first."""
    protobuf_body, json_body = _bodies(fixture)

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Accept", "").startswith(CONTENT_TYPE):
            return web.Response(body=protobuf_body, content_type=CONTENT_TYPE)
        return web.Response(body=json_body, content_type="application/json")

    server.route("GET", fixture["path"], handler)


@pytest.mark.asyncio
@pytest.mark.parametrize("fixture", LISTS, ids=lambda f: f["name"])
async def test_compact_objects_listed_in_protobuf_read_as_dict_mode_does(
    server: FakeServer, client: Client, fixture: dict[str, Any]
) -> None:
    _serve_both(server, fixture)
    compact = await client.list(fixture["path"], ListOptions(), object_mode="compact-protobuf")
    plain = await client.list(fixture["path"], ListOptions())
    compact_accept, plain_accept = (r.headers["Accept"] for r in server.requests)
    assert compact_accept.startswith(CONTENT_TYPE)
    assert plain_accept == "application/json"
    assert compact.resource_version == plain.resource_version
    assert len(compact.items) == len(plain.items) == fixture["items"]
    for obj, expected in zip(compact.items, plain.items, strict=True):
        assert type(obj) is CompactObject
        assert obj == expected
        assert obj.to_dict() == expected
        assert json.loads(obj.to_json()) == expected
        assert sorted(obj) == sorted(expected)
        assert len(obj) == len(expected)
        for key, value in expected.items():
            assert key in obj
            assert obj[key] == value
        assert "nope" not in obj
        assert obj.get("nope") is None
        meta = obj["metadata"]
        assert meta == expected["metadata"]
        assert meta.to_dict() == expected["metadata"]
        assert sorted(meta) == sorted(expected["metadata"])
        stripped = copy.deepcopy(expected)
        stripped["metadata"].pop("managedFields", None)
        assert strip_managed_fields(obj) == stripped
        assert "managedFields" not in strip_managed_fields(obj)["metadata"]
        assert copy.deepcopy(obj) == expected
        assert pickle.loads(pickle.dumps(obj)) == expected


@pytest.mark.asyncio
async def test_only_compact_protobuf_asks_for_protobuf_and_only_for_built_in_kinds(
    server: FakeServer, client: Client
) -> None:
    pods = next(f for f in LISTS if f["kind"] == "PodList")
    _serve_both(server, pods)
    server.json("GET", "/apis/example.com/v1/foos", {"kind": "FooList", "items": []})
    await client.list(pods["path"], ListOptions(), object_mode="compact")
    await client.list(pods["path"], ListOptions(shard_selector="x"), object_mode="compact-protobuf")
    await client.list("/apis/example.com/v1/foos", ListOptions(), object_mode="compact-protobuf")
    assert [r.headers["Accept"] for r in server.requests] == ["application/json"] * 3


@pytest.mark.asyncio
async def test_a_truncated_protobuf_list_is_a_decode_error_naming_the_url(
    server: FakeServer, client: Client
) -> None:
    pods = next(f for f in LISTS if f["kind"] == "PodList")
    body, _json_body = _bodies(pods)

    async def truncated(_request: web.Request) -> web.StreamResponse:
        return web.Response(body=body[:-40], content_type=CONTENT_TYPE)

    server.route("GET", pods["path"], truncated)
    with pytest.raises(DecodeError, match="could not decode the protobuf list response") as raised:
        await client.list(pods["path"], ListOptions(), object_mode="compact-protobuf")
    assert raised.value.url is not None
    assert pods["path"] in raised.value.url


@pytest.mark.asyncio
async def test_an_error_answer_in_protobuf_raises_its_status(
    server: FakeServer, client: Client
) -> None:
    body, json_body = _bodies(ERROR)
    pods = next(f for f in LISTS if f["kind"] == "PodList")

    async def not_found(_request: web.Request) -> web.StreamResponse:
        return web.Response(status=404, body=body, content_type=CONTENT_TYPE)

    server.route("GET", pods["path"], not_found)
    with pytest.raises(NotFoundError) as raised:
        await client.list(pods["path"], ListOptions(), object_mode="compact-protobuf")
    assert raised.value.message == json.loads(json_body)["message"]
