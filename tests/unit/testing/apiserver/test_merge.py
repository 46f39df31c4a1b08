"""The emulator's strategic merge patch, by the built-in kinds' patch metadata (pure
functions). The integration tests check the common cases against a real server; these
pin kube's ordering and directive corners."""

from __future__ import annotations

from typing import Any

import pytest

from kubereflector.testing.apiserver._merge import strategic_merge_patch
from kubereflector.testing.apiserver._patch import PatchFailed
from kubereflector.testing.apiserver._typetree import kind_root, schema_root

POD = kind_root("", "v1", "Pod")


def pod(containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": containers, **spec}}


def test_inputs_are_left_alone() -> None:
    target = pod([{"name": "a"}])
    patch = {"spec": {"containers": [{"name": "b"}]}}
    result = strategic_merge_patch(target, patch, POD)
    assert target == pod([{"name": "a"}])
    assert patch == {"spec": {"containers": [{"name": "b"}]}}
    assert [c["name"] for c in result["spec"]["containers"]] == ["b", "a"]


def test_merged_lists_keep_kubes_order() -> None:
    target = pod([{"name": n} for n in "abcd"])
    result = strategic_merge_patch(
        target, {"spec": {"containers": [{"name": "c"}, {"name": "x"}, {"name": "a"}]}}, POD
    )
    # patch items c, x, a in the patch's order; b and d where the server had them
    # relative to the patch items it also has.
    assert [c["name"] for c in result["spec"]["containers"]] == ["b", "c", "x", "a", "d"]


def test_scalar_sets_and_deletions() -> None:
    target = {"metadata": {"finalizers": ["a", "b", "c"]}}
    merged = strategic_merge_patch(target, {"metadata": {"finalizers": ["d", "b"]}}, POD)
    # kube: the patch's items in its order, each server-only item placed before the
    # first patch item the server had after it (d is new: it goes first).
    assert merged["metadata"]["finalizers"] == ["d", "a", "b", "c"]
    deleted = strategic_merge_patch(
        target, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}, POD
    )
    assert deleted["metadata"]["finalizers"] == ["a", "c"]


def test_directives_inside_values() -> None:
    target = pod([{"name": "a", "env": [{"name": "X", "value": "1"}]}], nodeSelector={"o": "1"})
    patch = {
        "spec": {
            "containers": [{"name": "a", "env": [{"name": "X", "$patch": "delete"}]}],
            "nodeSelector": {"$patch": "replace", "k": "v"},
        }
    }
    result = strategic_merge_patch(target, patch, POD)
    assert result["spec"]["containers"] == [{"name": "a", "env": []}]
    assert result["spec"]["nodeSelector"] == {"k": "v"}
    # A new value carrying a directive is dropped, as kube drops it.
    dropped = strategic_merge_patch(pod([]), {"spec": {"tolerations": {"$patch": "x"}}}, POD)
    assert "tolerations" not in dropped["spec"]
    # A new value's directives and nulls are dropped.
    added = strategic_merge_patch({"metadata": {}}, {"spec": {"a": {"b": None, "c": 1}}}, POD)
    assert added["spec"] == {"a": {"c": 1}}
    gone = strategic_merge_patch(target, {"spec": {"$patch": "delete"}}, POD)
    assert gone["spec"] == {}


def test_patches_kube_refuses() -> None:
    target = pod([{"name": "a"}])
    with pytest.raises(PatchFailed, match="merge key"):
        strategic_merge_patch(target, {"spec": {"containers": [{"image": "x"}]}}, POD)
    with pytest.raises(PatchFailed, match="Unknown patch type"):
        strategic_merge_patch(target, {"spec": {"$patch": "explode"}}, POD)
    with pytest.raises(PatchFailed, match="retainKeys"):
        strategic_merge_patch(target, {"spec": {"$retainKeys": ["a"], "b": 1}}, POD)


def test_type_tree_of_a_crd() -> None:
    root = schema_root(
        {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "ports": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["port", "protocol"],
                            "items": {
                                "type": "object",
                                "properties": {"protocol": {"type": "string", "default": "TCP"}},
                            },
                        },
                        "sel": {"type": "object", "x-kubernetes-map-type": "atomic"},
                    },
                }
            },
        }
    )
    ports = root.field("spec").field("ports")
    assert (ports.list_type, ports.keys, dict(ports.key_defaults)) == (
        "map",
        ("port", "protocol"),
        {"protocol": "TCP"},
    )
    assert root.field("spec").field("sel").atomic_map
    assert root.field("metadata").field("finalizers").list_type == "set"
    assert root.field("spec").field("nothing").list_type == ""
    containers = POD.field("spec").field("containers")
    assert (containers.patch_strategy, containers.merge_key) == ("merge", "name")
    assert containers.item().field("ports").keys == ("containerPort", "protocol")
