"""Compact objects (kubereflector.cache.compact): reads like dicts, writes refused, exact JSON."""

from __future__ import annotations

import copy
import gc
import pickle
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import pytest

from kubereflector import (
    CompactMetadata,
    CompactObject,
    DeletedFinalStateUnknown,
    ReadOnlyDict,
    ReadOnlyList,
    ReadOnlyObjectError,
    decode_compact,
    get_labels,
    get_name,
    get_namespace,
    get_resource_version,
    get_uid,
    meta_namespace_key_func,
    strip_managed_fields,
    to_compact,
)


def pod(name: str = "web-1", *, rv: str = "7", managed: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "shop",
        "uid": "u-1",
        "resourceVersion": rv,
        "generation": 3,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"note": "x"},
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u-0"}
        ],
        "finalizers": ["example.com/keep"],
    }
    if managed:
        meta["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [{"port": 80}]}]},
        "status": {"phase": "Running"},
    }


def secret() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "token", "namespace": "shop", "resourceVersion": "3"},
        "type": "Opaque",
        "data": {"password": "aHVudGVyMg=="},
    }


# -- reading ---------------------------------------------------------------------------


def test_reads_behave_like_the_dict() -> None:
    plain = pod()
    obj = to_compact(plain)
    assert isinstance(obj, CompactObject)
    assert isinstance(obj, Mapping)
    assert obj["spec"]["nodeName"] == "n1"
    assert obj["spec"]["containers"][0]["ports"][0]["port"] == 80
    assert obj["metadata"]["labels"]["app"] == "web"
    assert obj["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert obj["metadata"]["finalizers"] == ["example.com/keep"]
    assert obj["metadata"]["managedFields"][0]["manager"] == "kubectl"
    assert obj.get("status", {}).get("phase") == "Running"
    assert obj.get("missing") is None
    assert obj.get("missing", 5) == 5
    with pytest.raises(KeyError):
        obj["missing"]
    assert list(obj) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert len(obj) == 5
    assert "spec" in obj
    assert "data" not in obj
    assert list(obj.keys()) == list(plain.keys())
    assert dict(obj.items()) == plain
    assert list(obj.values())[1] == "Pod"
    assert list(obj["metadata"]) == list(plain["metadata"])
    assert dict(obj["metadata"]) == plain["metadata"]
    assert obj.kind == "Pod"
    assert obj.api_version == "v1"
    assert obj.metadata is not None
    assert obj.metadata["name"] == "web-1"


def test_equality_with_dicts_and_compact_objects() -> None:
    plain = pod()
    obj = to_compact(plain)
    assert obj == plain
    assert plain == obj
    assert obj == to_compact(pod())
    assert obj != to_compact(pod(rv="8"))
    assert obj != pod(rv="8")
    assert obj["metadata"] == plain["metadata"]
    assert obj["spec"] == plain["spec"]
    assert plain["spec"]["containers"] == obj["spec"]["containers"]
    assert obj["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert obj != "a string"
    # Same content, different key order in the raw JSON: still equal.
    reordered = decode_compact(
        b'{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"},"spec":{"b":1,"a":2}}'
    )
    assert reordered == decode_compact(
        b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"a":2,"b":1}}'
    )


def test_nested_values_are_read_only_views() -> None:
    obj = to_compact(pod())
    spec = obj["spec"]
    containers = spec["containers"]
    assert isinstance(spec, ReadOnlyDict)
    assert isinstance(containers, ReadOnlyList)
    assert isinstance(containers, Sequence)
    assert isinstance(containers[0], ReadOnlyDict)
    assert isinstance(containers[0:1], ReadOnlyList)
    assert [c["name"] for c in containers] == ["c"]
    assert {"name": "c", "ports": [{"port": 80}]} in containers
    assert containers.index(containers[0]) == 0
    assert repr(spec) == repr(pod()["spec"])


@pytest.mark.parametrize(
    "write",
    [
        lambda o: o.__setitem__("kind", "X"),
        lambda o: o.__delitem__("spec"),
        lambda o: o.pop("spec"),
        lambda o: o.update({"a": 1}),
        lambda o: o.setdefault("a", 1),
        lambda o: o.clear(),
        lambda o: o["metadata"].__setitem__("name", "x"),
        lambda o: o["metadata"].pop("labels"),
        lambda o: o["metadata"]["labels"].__setitem__("app", "x"),
        lambda o: o["spec"].__setitem__("nodeName", "x"),
        lambda o: o["spec"]["containers"].append({}),
        lambda o: o["spec"]["containers"].__setitem__(0, {}),
        lambda o: o["spec"]["containers"][0]["ports"].pop(),
        lambda o: o["metadata"]["finalizers"].remove("example.com/keep"),
    ],
)
def test_every_write_raises_a_clear_error(write: Any) -> None:
    obj = to_compact(pod())
    with pytest.raises(ReadOnlyObjectError, match=r"read-only.*compact mode.*to_(dict|list)\(\)"):
        write(obj)
    assert obj == pod()
    assert issubclass(ReadOnlyObjectError, TypeError)


def test_writing_to_the_object_names_it_and_attributes_are_frozen() -> None:
    obj = to_compact(pod())
    with pytest.raises(ReadOnlyObjectError, match="Pod shop/web-1 is read-only"):
        obj["spec"] = {}
    with pytest.raises(AttributeError):
        obj._kind = "Node"  # type: ignore[misc]


def test_to_dict_and_to_list_are_mutable_deep_copies() -> None:
    obj = to_compact(pod())
    copy_ = obj.to_dict()
    assert type(copy_) is dict
    assert copy_ == pod()
    copy_["spec"]["nodeName"] = "other"
    copy_["metadata"]["labels"]["app"] = "x"
    assert obj["spec"]["nodeName"] == "n1"
    assert obj["metadata"]["labels"]["app"] == "web"
    spec = obj["spec"].to_dict()
    spec["containers"].append({})
    assert len(obj["spec"]["containers"]) == 1
    containers = obj["spec"]["containers"].to_list()
    containers[0]["name"] = "d"
    assert obj["spec"]["containers"][0]["name"] == "c"
    assert obj["metadata"].to_dict() == pod()["metadata"]


def test_lazy_fields_are_decoded_on_each_read_and_not_kept() -> None:
    obj = to_compact(pod())
    first, second = obj["spec"], obj["spec"]
    assert first == second
    assert first._data is not second._data


def test_to_json_is_the_object() -> None:
    obj = to_compact(pod())
    assert msgspec.json.decode(obj.to_json()) == pod()
    generic = to_compact(secret())
    assert msgspec.json.decode(generic.to_json()) == secret()


def test_repr_shows_identity_only() -> None:
    obj = to_compact(secret())
    text = repr(obj) + repr(obj["metadata"])
    assert "aHVudGVyMg" not in text
    assert "kind='Secret'" in text
    assert "name='token'" in text
    with pytest.raises(ReadOnlyObjectError) as info:
        obj["data"] = {}
    assert "aHVudGVyMg" not in str(info.value)


# -- what is stored -------------------------------------------------------------------------


def test_objects_with_other_fields_keep_them_raw() -> None:
    obj = to_compact(secret())
    assert obj["data"]["password"] == "aHVudGVyMg=="
    assert obj["type"] == "Opaque"
    assert list(obj) == ["apiVersion", "kind", "metadata", "type", "data"]
    assert "data" in obj
    assert obj == secret()


def test_metadata_with_unknown_fields_is_kept_whole() -> None:
    plain = {"kind": "X", "metadata": {"name": "a", "namespace": "n", "futureField": {"x": 1}}}
    obj = to_compact(plain)
    assert obj["metadata"]["futureField"] == {"x": 1}
    assert meta_namespace_key_func(obj) == "n/a"
    assert obj == plain
    with pytest.raises(ReadOnlyObjectError):
        obj["metadata"]["name"] = "b"


def test_managed_fields_stay_raw_and_can_be_dropped() -> None:
    obj = to_compact(pod())
    meta = obj["metadata"]
    assert isinstance(meta, CompactMetadata)
    assert "managedFields" in meta
    stripped = strip_managed_fields(obj)
    assert isinstance(stripped, CompactObject)
    assert "managedFields" not in stripped["metadata"]
    assert stripped == pod(managed=False)
    assert strip_managed_fields(stripped) is stripped
    assert obj["metadata"]["managedFields"][0]["manager"] == "kubectl"  # unchanged


def test_compact_objects_are_not_tracked_by_the_collector() -> None:
    obj = to_compact(pod())
    assert not gc.is_tracked(obj)
    assert not gc.is_tracked(obj["metadata"])


def test_decoding_copies_out_of_the_buffer() -> None:
    # The raw parts must not keep the decoded buffer (a whole list, a watch chunk) alive.
    data = bytes(msgspec.json.encode(pod())) + b" "  # a buffer of its own
    before = sys.getrefcount(data)
    obj = decode_compact(data)
    assert sys.getrefcount(data) == before
    generic = decode_compact(bytes(msgspec.json.encode(secret())) + b" ")
    assert generic["data"]["password"] == "aHVudGVyMg=="
    assert obj == pod()


def test_kind_and_api_version_strings_are_shared() -> None:
    first = to_compact(pod("a"))
    second = to_compact(pod("b"))
    assert first.kind is second.kind


def test_to_compact_takes_dicts_bytes_and_passes_the_rest() -> None:
    obj = to_compact(pod())
    assert to_compact(obj) is obj
    assert to_compact(msgspec.json.encode(pod())) == obj
    assert to_compact(obj["metadata"]) == pod()["metadata"]  # any JSON-shaped mapping
    tombstone = DeletedFinalStateUnknown("shop/web-1", obj)
    assert to_compact(tombstone) is tombstone
    with pytest.raises(TypeError, match="cannot store this object compactly"):
        to_compact({"metadata": {"name": object()}})
    with pytest.raises(msgspec.DecodeError):
        decode_compact(b"[1, 2]")


def test_not_equal_is_the_opposite_of_equal() -> None:
    obj = to_compact(pod())
    assert obj == pod()
    assert not (obj != pod())  # noqa: SIM202 (the operator itself is under test)
    assert obj != {**pod(), "spec": {}}
    assert not (obj["metadata"] != pod()["metadata"])  # noqa: SIM202
    assert obj["metadata"] != {"name": "other"}
    assert not (obj != to_compact(pod()))  # noqa: SIM202


def test_copies_and_pickling() -> None:
    obj = to_compact(pod())
    assert copy.copy(obj) is obj  # immutable: a shallow copy is the object
    deep = copy.deepcopy({"a": obj})["a"]  # a deep copy is for changing
    assert type(deep) is dict
    assert deep == pod()
    deep["spec"]["nodeName"] = "other"
    assert obj["spec"]["nodeName"] == "n1"
    assert copy.deepcopy(obj["spec"]["containers"]) == pod()["spec"]["containers"]
    assert type(copy.deepcopy(obj["metadata"])) is dict
    assert pickle.loads(pickle.dumps(obj)) == obj
    # Absent parts (no status, no managedFields) survive a round trip too.
    bare = to_compact({"kind": "Pod", "metadata": {"name": "a"}, "spec": {}})
    assert pickle.loads(pickle.dumps(bare)).to_dict() == bare.to_dict()
    assert pickle.loads(pickle.dumps(bare["metadata"])).to_dict() == {"name": "a"}
    with pytest.raises(TypeError):
        hash(obj)


# -- keys and accessors --------------------------------------------------------------------


def test_key_and_meta_accessors() -> None:
    obj = to_compact(pod())
    assert meta_namespace_key_func(obj) == "shop/web-1"
    assert get_name(obj) == "web-1"
    assert get_namespace(obj) == "shop"
    assert get_uid(obj) == "u-1"
    assert get_resource_version(obj) == "7"
    assert get_labels(obj) == {"app": "web", "tier": "front"}
    cluster_scoped = to_compact({"kind": "Node", "metadata": {"name": "n1"}})
    assert meta_namespace_key_func(cluster_scoped) == "n1"
    assert get_labels(cluster_scoped) == {}


def test_a_key_error_names_the_kind_not_the_content() -> None:
    obj = to_compact({"kind": "Secret", "metadata": {"namespace": "n"}, "data": {"k": "s3cr3t"}})
    with pytest.raises(Exception, match="Secret") as info:
        meta_namespace_key_func(obj)
    assert "s3cr3t" not in str(info.value)
