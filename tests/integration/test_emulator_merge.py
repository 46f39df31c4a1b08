"""Strategic merge patch and server-side apply follow each kind's own merge rules, as
kube-apiserver 1.28 does: the patch strategies, merge keys and list types of the
built-in kinds (from the OpenAPI spec), and a CRD schema's list types, map keys and
map types. Each test runs against the emulator, or a real kube-apiserver with
KUBEREFLECTOR_TEST_KUBECONFIG; the expected objects are what v1.28.7 answered.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Target
from test_emulator_validation import custom_resource

from kubereflector import ConflictError
from kubereflector.client import ResourceClient

pytestmark = pytest.mark.asyncio

IMAGE = "registry.k8s.io/pause:3.9"


def deployment(name: str, containers: list[dict[str, Any]]) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": containers}},
        },
    }


def container(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, **extra}


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["name"] for item in items]


def deployments(target: Target) -> ResourceClient:
    return target.client.resource("deployments.apps", namespace=target.namespace)


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def template(spec: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": spec}}}


# -- strategic merge patch --------------------------------------------------------------------


async def test_strategic_patch_merges_lists_by_their_merge_keys(target: Target) -> None:
    client = deployments(target)
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    await client.create(
        deployment("web", [container("a", env=env, args=["x", "y"]), container("b")])
    )
    patch = template(
        {
            "containers": [
                {"name": "b", "image": "b:2"},
                {"name": "c", "image": IMAGE},
                {"name": "a", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
            ]
        }
    )
    merged = pod_spec(await client.patch("web", patch, type="strategic"))
    # Patch items in the patch's order, the server's others where they were.
    assert names(merged["containers"]) == ["b", "c", "a"]
    a = merged["containers"][2]
    assert a["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "3"},
        {"name": "C", "value": "4"},
    ]
    assert a["args"] == ["x", "y"]
    assert merged["containers"][0]["image"] == "b:2"
    # A list without a patch strategy (args) is replaced.
    replaced = await client.patch(
        "web", template({"containers": [{"name": "a", "args": ["z"]}]}), type="strategic"
    )
    assert pod_spec(replaced)["containers"][2]["args"] == ["z"]
    assert pod_spec(replaced)["containers"][2]["env"] == a["env"]


async def test_strategic_patch_directives(target: Target) -> None:
    client = deployments(target)
    await client.create(deployment("dir", [container("a"), container("b"), container("c")]))
    deleted = pod_spec(
        await client.patch(
            "dir", template({"containers": [{"name": "b", "$patch": "delete"}]}), type="strategic"
        )
    )
    assert names(deleted["containers"]) == ["a", "c"]
    ordered = pod_spec(
        await client.patch(
            "dir",
            template(
                {
                    "$setElementOrder/containers": [{"name": "c"}, {"name": "d"}, {"name": "a"}],
                    "containers": [{"name": "d", "image": IMAGE}],
                }
            ),
            type="strategic",
        )
    )
    assert names(ordered["containers"]) == ["c", "d", "a"]
    replaced = pod_spec(
        await client.patch(
            "dir",
            template({"containers": [{"$patch": "replace"}, {"name": "z", "image": IMAGE}]}),
            type="strategic",
        )
    )
    assert names(replaced["containers"]) == ["z"]
    strategy = await client.patch(
        "dir",
        {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}}},
        type="strategic",
    )
    assert strategy["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 2
    retained = await client.patch(
        "dir",
        {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}},
        type="strategic",
    )
    assert retained["spec"]["strategy"] == {"type": "Recreate"}
    annotated = await client.patch(
        "dir",
        {"spec": {"template": {"metadata": {"annotations": {"a": "1"}}}}},
        type="strategic",
    )
    assert annotated["spec"]["template"]["metadata"]["annotations"] == {"a": "1"}
    whole = await client.patch(
        "dir",
        {"spec": {"template": {"metadata": {"$patch": "replace", "labels": {"app": "dir"}}}}},
        type="strategic",
    )
    assert "annotations" not in whole["spec"]["template"]["metadata"]
    assert whole["spec"]["template"]["metadata"]["labels"] == {"app": "dir"}


async def test_strategic_patch_of_primitive_lists_and_metadata(target: Target) -> None:
    cms = target.client.resource("configmaps", namespace=target.namespace)
    await cms.create(
        {"metadata": {"name": "fin", "finalizers": ["a.kr.dev/x", "b.kr.dev/y"]}, "data": {}}
    )
    added = await cms.patch(
        "fin",
        {"metadata": {"finalizers": ["c.kr.dev/z", "a.kr.dev/x"]}},
        type="strategic",
    )
    # kube's order: the patch's items in the patch's order, the server's others after
    # them unless the server's order puts them before.
    assert added["metadata"]["finalizers"] == ["c.kr.dev/z", "a.kr.dev/x", "b.kr.dev/y"]
    removed = await cms.patch(
        "fin",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b.kr.dev/y", "c.kr.dev/z"]}},
        type="strategic",
    )
    assert removed["metadata"]["finalizers"] == ["a.kr.dev/x"]
    emptied = await cms.patch("fin", {"metadata": {"finalizers": None}}, type="strategic")
    assert "finalizers" not in emptied["metadata"]
    services = target.client.resource("services", namespace=target.namespace)
    await services.create(
        {
            "metadata": {"name": "svc"},
            "spec": {
                "selector": {"app": "x"},
                "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}],
            },
        }
    )
    ports = await services.patch(
        "svc",
        {"spec": {"ports": [{"port": 443, "targetPort": 8443}, {"name": "m", "port": 9090}]}},
        type="strategic",
    )
    assert [(p["port"], p.get("name")) for p in ports["spec"]["ports"]] == [
        (80, "http"),
        (443, "https"),
        (9090, "m"),
    ]
    assert ports["spec"]["ports"][1]["targetPort"] == 8443


# -- server-side apply ------------------------------------------------------------------------


async def test_apply_merges_keyed_lists_of_built_in_kinds_between_managers(target: Target) -> None:
    client = deployments(target)
    first = deployment("ssa", [container("a", env=[{"name": "A", "value": "1"}])])
    await client.apply(first, field_manager="one")
    second = deployment("ssa", [container("a", env=[{"name": "B", "value": "2"}])])
    merged = await client.apply(second, field_manager="two")
    [a] = pod_spec(merged)["containers"]
    assert a["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    third = deployment("ssa", [container("b")])
    both = await client.apply(third, field_manager="three")
    assert names(pod_spec(both)["containers"]) == ["a", "b"]
    # The first manager stops applying its env var: it goes; the others' stay.
    again = deployment("ssa", [container("a")])
    kept = await client.apply(again, field_manager="one")
    assert pod_spec(kept)["containers"][0]["env"] == [{"name": "B", "value": "2"}]
    # An atomic list (args) belongs whole to its applier: another's is a conflict.
    await client.apply(deployment("ssa", [container("a", args=["x"])]), field_manager="one")
    with pytest.raises(ConflictError) as info:
        await client.apply(deployment("ssa", [container("a", args=["y"])]), field_manager="two")
    assert [c.field for c in info.value.causes] == ['.spec.template.spec.containers[name="a"].args']


LISTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "keyed": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string"}, "v": {"type": "integer"}},
                    },
                },
                "set": {
                    "type": "array",
                    "x-kubernetes-list-type": "set",
                    "items": {"type": "string"},
                },
                "atomic": {"type": "array", "items": {"type": "string"}},
                "whole": {
                    "type": "object",
                    "x-kubernetes-map-type": "atomic",
                    "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                },
                "parts": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                },
            },
        }
    },
}


async def test_apply_follows_a_crds_list_and_map_types(target: Target) -> None:
    async with custom_resource(target, LISTS_SCHEMA, kind="Lists") as crd:

        def config(spec: dict[str, Any]) -> dict[str, Any]:
            return crd.obj("l", spec)

        async def apply(spec: dict[str, Any], manager: str, **params: str) -> Any:
            return await crd.patch("l", config(spec), "apply", fieldManager=manager, **params)

        one = await apply(
            {
                "keyed": [{"name": "a", "v": 1}],
                "set": ["x"],
                "atomic": ["p"],
                "whole": {"a": "1"},
                "parts": {"a": "1"},
            },
            "one",
        )
        assert one.status == 201, one.body
        two = await apply(
            {"keyed": [{"name": "b", "v": 2}], "set": ["y"], "parts": {"b": "2"}}, "two"
        )
        assert two.status == 200, two.body
        assert two.body["spec"] == {
            "keyed": [{"name": "a", "v": 1}, {"name": "b", "v": 2}],
            "set": ["x", "y"],
            "atomic": ["p"],
            "whole": {"a": "1"},
            "parts": {"a": "1", "b": "2"},
        }
        conflict = await apply(
            {
                "keyed": [{"name": "b", "v": 2}],
                "set": ["y"],
                "parts": {"b": "2"},
                "atomic": ["q"],
                "whole": {"b": "2"},
            },
            "two",
        )
        assert conflict.status == 409
        assert sorted(c["field"] for c in conflict.body["details"]["causes"]) == [
            ".spec.atomic",
            ".spec.whole",
        ]
        everything = {
            "keyed": [{"name": "b", "v": 2}],
            "set": ["y"],
            "parts": {"b": "2"},
            "atomic": ["q"],
            "whole": {"b": "2"},
        }
        forced = await apply(everything, "two", force="true")
        assert forced.body["spec"]["atomic"] == ["q"]
        assert forced.body["spec"]["whole"] == {"b": "2"}
        managers = {
            e["manager"]: e["fieldsV1"]["f:spec"] for e in forced.body["metadata"]["managedFields"]
        }
        assert managers["two"] == {
            "f:atomic": {},
            "f:keyed": {'k:{"name":"b"}': {".": {}, "f:name": {}, "f:v": {}}},
            "f:parts": {"f:b": {}},
            "f:set": {'v:"y"': {}},
            "f:whole": {},
        }
        assert managers["one"] == {
            "f:keyed": {'k:{"name":"a"}': {".": {}, "f:name": {}, "f:v": {}}},
            "f:parts": {"f:a": {}},
            "f:set": {'v:"x"': {}},
        }
        # Fields a manager stops applying go, unless another applier has them.
        dropped = await apply({"atomic": ["q"], "whole": {"b": "2"}}, "two")
        assert dropped.body["spec"] == {
            "keyed": [{"name": "a", "v": 1}],
            "set": ["x"],
            "atomic": ["q"],
            "whole": {"b": "2"},
            "parts": {"a": "1"},
        }
