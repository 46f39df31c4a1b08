"""kube-apiserver's protobuf: the same lists and objects in protobuf and in JSON,
on the emulator and (with KUBEREFLECTOR_TEST_KUBECONFIG) on a real server.

On a real server this checks the decoder against kube-apiserver's own protobuf:
the answer in protobuf decodes to what the answer in JSON decodes to. The
emulator keeps objects as they were written, where kube-apiserver keeps the Go
struct (``"resources": {}`` in every container, say), so there the JSON is
compared as Go shapes it (through protobuf and back); a real server's JSON is
checked to be that shape already.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Target
from test_emulator_validation import PROBE_SCHEMA, custom_resource

from kubereflector import ApiError, ListOptions, SharedInformerFactory
from kubereflector.protobuf import CONTENT_TYPE, decode, encode

pytestmark = pytest.mark.asyncio


async def _objects(target: Target) -> None:
    namespace, client = target.namespace, target.client
    await target.create_pod("p1", {"app": "a"})
    await target.create_pod("p2")
    await client.create(
        f"/api/v1/namespaces/{namespace}/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {"empty": ""}},
            "data": {"k": "v"},
            "binaryData": {"b": "AAEC/w=="},
        },
    )
    await client.create(
        f"/api/v1/namespaces/{namespace}/services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s"},
            "spec": {
                "ports": [
                    {"name": "http", "port": 80, "targetPort": "http"},
                    {"name": "admin", "port": 81, "targetPort": 8081},
                ]
            },
        },
    )


async def test_built_in_lists_and_objects_in_protobuf_decode_to_their_json(
    target: Target,
) -> None:
    await _objects(target)
    client, namespace = target.client, target.namespace
    for resource, count in (("pods", 2), ("configmaps", 1), ("services", 1)):
        path = f"/api/v1/namespaces/{namespace}/{resource}"
        in_json = await client.request("GET", path)
        in_protobuf = await client.request("GET", path, accept=CONTENT_TYPE)
        assert isinstance(in_json, dict)
        assert isinstance(in_protobuf, dict)
        # (kube-apiserver makes a few of its own ConfigMaps in a new namespace.)
        assert len(in_json["items"]) >= count
        assert in_protobuf["kind"] == in_json["kind"]
        assert in_protobuf["items"] == _go_shaped(target, in_json)["items"]
    pod = f"/api/v1/namespaces/{namespace}/pods/p1"
    in_protobuf = await client.request("GET", pod, accept=CONTENT_TYPE)
    assert in_protobuf == _go_shaped(target, await client.get(pod))


async def test_compact_mode_lists_in_protobuf_what_dict_mode_lists_in_json(
    target: Target,
) -> None:
    await _objects(target)
    client, namespace = target.client, target.namespace
    for resource in ("pods", "configmaps", "services"):
        path = f"/api/v1/namespaces/{namespace}/{resource}"
        plain = await client.list(path, ListOptions())
        options = ListOptions(resource_version=plain.resource_version)
        compact = await client.list(path, options, object_mode="compact-protobuf")
        assert sorted(compact.items, key=_name) == sorted(
            (_go_shaped(target, item) for item in plain.items), key=_name
        )
    async with SharedInformerFactory(
        client, namespace=namespace, object_mode="compact-protobuf"
    ) as factory:
        factory.informer_for("pods")
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=30) == {"pods": True}
        cached = sorted(factory.lister_for("pods").list(), key=_name)
    listed = await client.list(target.pods_path(), ListOptions())
    assert cached == sorted((_go_shaped(target, item) for item in listed.items), key=_name)


def _name(obj: object) -> str:
    return str(obj["metadata"]["name"])  # type: ignore[index]


def _go_shaped(target: Target, obj: Any) -> Any:
    """``obj`` (with kind and apiVersion) as kube-apiserver keeps it: through
    protobuf and back. A real server's JSON is that already (checked here)."""
    shaped = decode(encode(obj))
    if target.emulator is None:
        assert shaped == obj
    return shaped


async def test_a_custom_resource_has_no_protobuf(target: Target) -> None:
    async with custom_resource(target, PROBE_SCHEMA) as crd:
        with pytest.raises(ApiError) as raised:
            await target.client.request("GET", crd.path, accept=CONTENT_TYPE)
        assert raised.value.status == 406
        # With JSON as the fallback it answers JSON, which compact mode reads.
        listed = await target.client.list(crd.path, ListOptions(), object_mode="compact-protobuf")
        assert listed.items == []
