"""Owner references: set, replace, refuse what the API server or its garbage collector
would not honour, remove, and tell who controls an object."""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any

import pytest

from kubereflector.runtime import (
    AlreadyOwnedError,
    OwnerReferenceError,
    get_controller_of,
    get_owner_references,
    is_controlled_by,
    remove_owner_reference,
    set_controller_reference,
    set_owner_reference,
)


def obj(
    kind: str = "Deployment",
    name: str = "web",
    namespace: str | None = "shop",
    api_version: str = "apps/v1",
    uid: str | None = "uid-web",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if uid is not None:
        meta["uid"] = uid
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def foo(name: str = "foo", namespace: str | None = "shop", uid: str = "uid-foo") -> dict[str, Any]:
    return obj("Foo", name, namespace, "example.com/v1", uid)


def test_set_controller_reference_adds_a_blocking_controller_reference() -> None:
    owner, dependent = foo(), obj(uid=None)
    assert set_controller_reference(owner, dependent) is dependent
    assert dependent["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "example.com/v1",
            "kind": "Foo",
            "name": "foo",
            "uid": "uid-foo",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert get_controller_of(dependent) == dependent["metadata"]["ownerReferences"][0]
    assert is_controlled_by(dependent, owner)


def test_setting_it_again_replaces_the_reference_to_the_same_owner() -> None:
    owner, dependent = foo(), obj()
    set_controller_reference(owner, dependent)
    newer = copy.deepcopy(owner)
    newer["apiVersion"] = "example.com/v2"  # another version of the same group: the same owner
    set_controller_reference(newer, dependent, block_owner_deletion=False)
    refs = get_owner_references(dependent)
    assert len(refs) == 1
    assert refs[0]["apiVersion"] == "example.com/v2"
    assert refs[0]["blockOwnerDeletion"] is False


def test_a_second_controller_is_refused_and_names_the_first() -> None:
    dependent = obj()
    set_controller_reference(foo("first"), dependent)
    with pytest.raises(AlreadyOwnedError, match="already controlled by Foo first") as info:
        set_controller_reference(foo("second", uid="uid-2"), dependent)
    assert info.value.owner["name"] == "first"
    # A plain owner reference beside the controller is fine.
    set_owner_reference(foo("second", uid="uid-2"), dependent)
    assert [r["name"] for r in get_owner_references(dependent)] == ["first", "second"]
    assert "controller" not in get_owner_references(dependent)[1]


@pytest.mark.parametrize(
    ("owner", "dependent", "message"),
    [
        (foo(namespace="other"), obj(), "cross-namespace owner references are disallowed"),
        (foo(), obj("ClusterRole", namespace=None), "cluster-scoped and cannot have"),
    ],
)
def test_owners_the_garbage_collector_cannot_find_are_refused(
    owner: dict[str, Any], dependent: dict[str, Any], message: str
) -> None:
    for setter in (set_controller_reference, set_owner_reference):
        with pytest.raises(OwnerReferenceError, match=message):
            setter(owner, dependent)
    assert "ownerReferences" not in dependent["metadata"]


def test_a_cluster_scoped_owner_may_own_anything() -> None:
    node = obj("Node", "n1", None, "v1", "uid-n1")
    set_controller_reference(node, obj())
    set_controller_reference(node, obj("ClusterRole", namespace=None))


def test_an_owner_without_its_identity_is_refused_naming_what_it_lacks() -> None:
    owner = foo()
    del owner["metadata"]["uid"]
    del owner["apiVersion"]
    with pytest.raises(OwnerReferenceError, match=r"no apiVersion, metadata\.uid"):
        set_controller_reference(owner, obj())


def test_a_read_only_object_is_refused() -> None:
    frozen = MappingProxyType({"metadata": MappingProxyType({"name": "x", "namespace": "shop"})})
    with pytest.raises(TypeError, match="read-only"):
        set_controller_reference(foo(), frozen)


def test_is_controlled_by_checks_group_kind_name_and_uid() -> None:
    dependent = set_controller_reference(foo(), obj())
    assert is_controlled_by(dependent, foo())
    assert not is_controlled_by(dependent, foo(uid="uid-recreated"))  # same name, new object
    assert not is_controlled_by(dependent, foo("other"))
    other_group = foo()
    other_group["apiVersion"] = "other.example.com/v1"
    assert not is_controlled_by(dependent, other_group)
    plain = set_owner_reference(foo(), obj())
    assert not is_controlled_by(plain, foo())  # an owner, not the controller
    assert get_controller_of(obj()) is None


def test_remove_owner_reference() -> None:
    dependent = set_owner_reference(foo("b", uid="b"), set_controller_reference(foo(), obj()))
    remove_owner_reference(foo(), dependent)
    assert [r["name"] for r in get_owner_references(dependent)] == ["b"]
    with pytest.raises(OwnerReferenceError, match="has no owner reference to Foo shop/foo"):
        remove_owner_reference(foo(), dependent)
    bare = obj()
    with pytest.raises(OwnerReferenceError):
        remove_owner_reference(foo(), bare)
    assert "ownerReferences" not in bare["metadata"]
