"""Keys and metadata accessors (``kubereflector.cache.keys``), through the public API."""

from __future__ import annotations

import dataclasses
import re
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubereflector import (
    DeletedFinalStateUnknown,
    ExplicitKey,
    KeyFuncError,
    deletion_handling_meta_namespace_key_func,
    get_labels,
    get_metadata,
    get_name,
    get_namespace,
    get_resource_version,
    get_uid,
    meta_namespace_key_func,
    split_meta_namespace_key,
)

# -- stand-ins for the official ``kubernetes`` client's models -----------------


@dataclass
class V1ObjectMeta:
    name: str | None = None
    namespace: str | None = None
    resource_version: str | None = None
    uid: str | None = None
    labels: dict[str, str] | None = None


@dataclass
class V1Secret:
    metadata: V1ObjectMeta | None = None
    kind: str = "Secret"
    data: dict[str, str] = field(default_factory=dict)


class Bare:
    """An object with no ``metadata`` attribute at all."""


@dataclass
class ModelWithDictMeta:
    metadata: dict[str, Any]


def obj(name: Any = "web", namespace: str | None = "default", **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = dict(meta)
    if name is not None:
        metadata["name"] = name
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}


# -- meta_namespace_key_func -----------------------------------------------------


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        pytest.param(obj("web", "default"), "default/web", id="dict-namespaced"),
        pytest.param(obj("node-1", None), "node-1", id="dict-cluster-scoped"),
        pytest.param(obj("node-1", ""), "node-1", id="dict-empty-namespace"),
        pytest.param(
            types.MappingProxyType({"metadata": {"name": "a", "namespace": "ns"}}),
            "ns/a",
            id="non-dict-mapping",
        ),
        pytest.param(
            V1Secret(V1ObjectMeta(name="tls", namespace="kube-system")),
            "kube-system/tls",
            id="model-namespaced",
        ),
        pytest.param(V1Secret(V1ObjectMeta(name="tls")), "tls", id="model-cluster-scoped"),
        pytest.param(
            ModelWithDictMeta({"name": "x", "namespace": "ns"}), "ns/x", id="model-dict-meta"
        ),
    ],
)
def test_meta_namespace_key_func(item: Any, expected: str) -> None:
    assert meta_namespace_key_func(item) == expected
    assert deletion_handling_meta_namespace_key_func(item) == expected


def test_explicit_key_is_returned_as_is() -> None:
    key = ExplicitKey("ns/some-name")
    assert isinstance(key, str)
    assert meta_namespace_key_func(key) is key
    assert deletion_handling_meta_namespace_key_func(key) is key


def test_plain_string_is_not_a_key() -> None:
    with pytest.raises(KeyFuncError, match="metadata"):
        meta_namespace_key_func("ns/name")


@pytest.mark.parametrize(
    ("item", "missing"),
    [
        pytest.param({"kind": "Pod"}, "metadata", id="dict-no-metadata"),
        pytest.param({"kind": "Pod", "metadata": None}, "metadata", id="dict-metadata-none"),
        pytest.param(obj(None, "default"), "metadata.name", id="dict-no-name"),
        pytest.param(obj("", "default"), "metadata.name", id="dict-empty-name"),
        pytest.param(obj(None, None), "metadata.name", id="dict-empty-metadata"),
        pytest.param(obj(123, "default"), "metadata.name", id="dict-non-str-name"),
        pytest.param(Bare(), "metadata", id="object-without-metadata"),
        pytest.param(V1Secret(None), "metadata", id="model-metadata-none"),
        pytest.param(V1Secret(V1ObjectMeta(namespace="ns")), "metadata.name", id="model-no-name"),
        pytest.param(None, "metadata", id="none"),
    ],
)
def test_key_func_error_names_what_is_missing(item: Any, missing: str) -> None:
    with pytest.raises(KeyFuncError) as info:
        meta_namespace_key_func(item)
    message = str(info.value)
    assert missing in message
    if missing == "metadata":
        assert "metadata.name" not in message
    # The deletion-handling variant fails the same way for a non-tombstone.
    with pytest.raises(KeyFuncError):
        deletion_handling_meta_namespace_key_func(item)


def test_key_func_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="metadata"):
        meta_namespace_key_func({})


def test_key_func_error_names_kind_and_namespace() -> None:
    with pytest.raises(KeyFuncError) as info:
        meta_namespace_key_func(obj(None, "team-a"))
    assert "'Pod'" in str(info.value)
    assert "team-a" in str(info.value)


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param(
            {
                "kind": "Secret",
                "metadata": {"namespace": "prod", "annotations": {"note": "s3cr3t-annotation"}},
                "data": {"password": "aHVudGVyMg-s3cr3t"},
                "stringData": {"token": "s3cr3t-token"},
            },
            id="dict",
        ),
        pytest.param(
            {"kind": "Secret", "data": {"password": "aHVudGVyMg-s3cr3t"}}, id="dict-no-metadata"
        ),
        pytest.param(
            V1Secret(V1ObjectMeta(namespace="prod"), data={"password": "aHVudGVyMg-s3cr3t"}),
            id="model",
        ),
        pytest.param(V1Secret(None, data={"password": "aHVudGVyMg-s3cr3t"}), id="model-no-meta"),
    ],
)
def test_key_func_error_never_echoes_object_content(secret: Any) -> None:
    with pytest.raises(KeyFuncError) as info:
        meta_namespace_key_func(secret)
    message = str(info.value) + repr(info.value)
    assert "s3cr3t" not in message
    assert "password" not in message
    assert "Secret" in message


# -- tombstones ------------------------------------------------------------------


def test_deletion_handling_key_func_uses_the_tombstone_key() -> None:
    live = obj("web", "default")
    # The tombstone's key wins even if its (stale) object would key differently.
    tombstone = DeletedFinalStateUnknown("other/name", live)
    assert deletion_handling_meta_namespace_key_func(tombstone) == "other/name"
    assert deletion_handling_meta_namespace_key_func(DeletedFinalStateUnknown("k", None)) == "k"


def test_plain_key_func_does_not_unwrap_tombstones() -> None:
    with pytest.raises(KeyFuncError):
        meta_namespace_key_func(DeletedFinalStateUnknown("ns/name", obj("name", "ns")))


def test_tombstone_is_a_frozen_dataclass() -> None:
    live = obj("web", "default")
    tombstone = DeletedFinalStateUnknown("default/web", live)
    assert dataclasses.is_dataclass(tombstone)
    assert tombstone.key == "default/web"
    assert tombstone.obj is live
    assert tombstone == DeletedFinalStateUnknown(key="default/web", obj=obj("web", "default"))
    assert tombstone != DeletedFinalStateUnknown("default/other", live)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tombstone.key = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        tombstone.obj = None  # type: ignore[misc]
    assert [f.name for f in dataclasses.fields(tombstone)] == ["key", "obj"]


# -- split_meta_namespace_key ----------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("ns/name", ("ns", "name")),
        ("name", ("", "name")),
        ("kube-system/coredns-abc", ("kube-system", "coredns-abc")),
    ],
)
def test_split_meta_namespace_key(key: str, expected: tuple[str, str]) -> None:
    assert split_meta_namespace_key(key) == expected


@pytest.mark.parametrize("key", ["a/b/c", "a//b", "///"])
def test_split_rejects_more_than_one_slash(key: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(key))):
        split_meta_namespace_key(key)


@pytest.mark.parametrize(
    "item",
    [obj("web", "default"), obj("node", None), V1Secret(V1ObjectMeta(name="s", namespace="n"))],
)
def test_split_inverts_the_key_func(item: Any) -> None:
    namespace, name = split_meta_namespace_key(meta_namespace_key_func(item))
    assert namespace == (get_namespace(item) or "")
    assert name == get_name(item)


# -- meta accessors --------------------------------------------------------------


def test_accessors_on_a_dict() -> None:
    item = obj(
        "web",
        "default",
        resourceVersion="42",
        uid="0b1c-uid",
        labels={"app": "web", "tier": "front"},
    )
    assert get_metadata(item) is item["metadata"]
    assert get_name(item) == "web"
    assert get_namespace(item) == "default"
    assert get_resource_version(item) == "42"
    assert get_uid(item) == "0b1c-uid"
    assert get_labels(item) == {"app": "web", "tier": "front"}


def test_accessors_on_a_model() -> None:
    meta = V1ObjectMeta(
        name="tls", namespace="kube-system", resource_version="7", uid="u-1", labels={"a": "b"}
    )
    item = V1Secret(meta)
    assert get_metadata(item) is meta
    assert get_name(item) == "tls"
    assert get_namespace(item) == "kube-system"
    assert get_resource_version(item) == "7"
    assert get_uid(item) == "u-1"
    assert get_labels(item) == {"a": "b"}


def test_accessors_on_a_model_with_dict_metadata() -> None:
    item = ModelWithDictMeta({"name": "x", "resourceVersion": "9", "labels": {"k": "v"}})
    assert get_name(item) == "x"
    assert get_namespace(item) is None
    assert get_resource_version(item) == "9"
    assert get_labels(item) == {"k": "v"}


@pytest.mark.parametrize(
    "item",
    [
        pytest.param({}, id="dict-no-metadata"),
        pytest.param({"metadata": {}}, id="dict-empty-metadata"),
        pytest.param({"metadata": {"labels": None}}, id="dict-null-labels"),
        pytest.param(V1Secret(None), id="model-no-metadata"),
        pytest.param(V1Secret(V1ObjectMeta()), id="model-empty-metadata"),
        pytest.param(Bare(), id="bare-object"),
    ],
)
def test_accessors_when_absent(item: Any) -> None:
    assert get_name(item) is None
    assert get_namespace(item) is None
    assert get_resource_version(item) is None
    assert get_uid(item) is None
    assert get_labels(item) == {}
