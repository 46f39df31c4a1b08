"""The emulator's field management, against what kube-apiserver 1.28 answered.

Each expected ``fieldsV1`` and message below was recorded from a real
kube-apiserver given the same writes (curl against v1.28.7).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubereflector.testing.apiserver._fields import (
    DEFAULT_SCHEMA,
    ApplyConflict,
    FieldManagers,
    builtin_schema,
    compare,
    decode_fields,
    encode_fields,
    merge,
    path_text,
    to_field_set,
)

EMPTY: dict[str, Any] = {"metadata": {}}
POD_SCHEMA = builtin_schema("", "v1", "Pod")


def cm(data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "s1"}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def apply(
    managers: FieldManagers, live: Any, config: Any, manager: str, *, force: bool = False
) -> dict[str, Any]:
    return managers.apply(
        live,
        config,
        manager=manager,
        api_version="v1",
        subresource="",
        now=f"t-{manager}",
        force=force,
        schema=DEFAULT_SCHEMA,
    )


def fields(managers: FieldManagers) -> dict[str, Any]:
    return {(e["manager"]): e["fieldsV1"] for e in managers.encode()}


def test_apply_records_the_applied_fields_without_server_metadata() -> None:
    managers = FieldManagers()
    obj = apply(managers, EMPTY, cm({"x": "1", "y": "2"}, {"l": "1"}), "mgr-a")
    assert obj["data"] == {"x": "1", "y": "2"}
    (entry,) = managers.encode()
    assert entry == {
        "manager": "mgr-a",
        "operation": "Apply",
        "apiVersion": "v1",
        "time": "t-mgr-a",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {"f:x": {}, "f:y": {}}, "f:metadata": {"f:labels": {"f:l": {}}}},
    }


def test_conflicts_force_and_shared_values() -> None:
    managers = FieldManagers()
    live = apply(managers, EMPTY, cm({"x": "1", "y": "2"}, {"l": "1"}), "mgr-a")
    with pytest.raises(ApplyConflict) as info:
        apply(managers, live, cm({"x": "9", "z": "3"}), "mgr-b")
    assert info.value.message() == 'Apply failed with 1 conflict: conflict with "mgr-a": .data.x'
    assert info.value.causes() == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "mgr-a"', "field": ".data.x"}
    ]
    assert fields(managers) == {
        "mgr-a": {"f:data": {"f:x": {}, "f:y": {}}, "f:metadata": {"f:labels": {"f:l": {}}}}
    }  # a refused apply changes no manager
    shared = FieldManagers.decode(managers.encode())
    apply(shared, live, cm({"x": "1", "z": "3"}), "mgr-b")  # same value: co-owned
    assert fields(shared)["mgr-b"] == {"f:data": {"f:x": {}, "f:z": {}}}
    assert fields(shared)["mgr-a"]["f:data"] == {"f:x": {}, "f:y": {}}
    forced = apply(managers, live, cm({"x": "9", "z": "3"}), "mgr-b", force=True)
    assert forced["data"] == {"x": "9", "y": "2", "z": "3"}
    assert fields(managers) == {
        "mgr-a": {"f:data": {"f:y": {}}, "f:metadata": {"f:labels": {"f:l": {}}}},
        "mgr-b": {"f:data": {"f:x": {}, "f:z": {}}},
    }


def test_prune_then_update_strips_changed_and_removed_fields() -> None:
    managers = FieldManagers()
    live = apply(managers, EMPTY, cm({"x": "1", "y": "2"}, {"l": "1"}), "mgr-a")
    live = apply(managers, live, cm({"x": "9", "z": "3"}), "mgr-b", force=True)
    live = apply(managers, live, cm({}, {"l": "1"}), "mgr-a")
    assert live["data"] == {"x": "9", "z": "3"}  # y: applied before by mgr-a only
    assert fields(managers)["mgr-a"] == {"f:data": {}, "f:metadata": {"f:labels": {"f:l": {}}}}
    edited = copy.deepcopy(live)
    edited["data"].update(w="4", x="10")
    managers.update(
        live,
        edited,
        manager="editor",
        api_version="v1",
        subresource="",
        now="t",
        schema=DEFAULT_SCHEMA,
    )
    assert fields(managers)["editor"] == {"f:data": {"f:w": {}, "f:x": {}}}
    assert fields(managers)["mgr-b"] == {"f:data": {"f:z": {}}}
    removed = copy.deepcopy(edited)
    del removed["data"]["z"]
    managers.update(
        edited,
        removed,
        manager="editor2",
        api_version="v1",
        subresource="",
        now="t",
        schema=DEFAULT_SCHEMA,
    )
    assert "mgr-b" not in fields(managers)  # its last field was removed
    assert "editor2" not in fields(managers)  # removing owns nothing


def test_conflict_messages_group_by_manager() -> None:
    managers = FieldManagers.decode(
        [
            {
                "manager": "editor",
                "operation": "Update",
                "apiVersion": "v1",
                "fieldsV1": {"f:data": {"f:w": {}, "f:x": {}}},
            },
            {
                "manager": "mgr-a",
                "operation": "Apply",
                "apiVersion": "v1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:l": {}}}},
            },
        ]
    )
    live = cm({"w": "4", "x": "10"}, {"l": "1"})
    with pytest.raises(ApplyConflict) as info:
        apply(managers, live, cm({"x": "11", "w": "5"}, {"l": "2"}), "mgr-c")
    assert info.value.message() == (
        'Apply failed with 3 conflicts: conflicts with "editor" using v1:\n'
        "- .data.w\n- .data.x\n"
        'conflicts with "mgr-a":\n- .metadata.labels.l'
    )


def test_keyed_lists_sets_and_defaulted_keys() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "finalizers": ["a/b"]},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "args": ["1", "2"],
                    "ports": [{"containerPort": 80}],
                    "env": [{"name": "E", "value": "v"}],
                }
            ]
        },
    }
    assert encode_fields(to_field_set(pod, POD_SCHEMA)) == {
        "f:metadata": {"f:finalizers": {'v:"a/b"': {}}},
        "f:spec": {
            "f:containers": {
                'k:{"name":"c"}': {
                    ".": {},
                    "f:args": {},
                    "f:env": {'k:{"name":"E"}': {".": {}, "f:name": {}, "f:value": {}}},
                    "f:image": {},
                    "f:name": {},
                    "f:ports": {
                        'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}
                    },
                }
            }
        },
    }
    assert (
        path_text(("f:spec", "f:containers", 'k:{"name":"c"}', "f:image"))
        == '.spec.containers[name="c"].image'
    )
    assert path_text(("f:metadata", "f:finalizers", 'v:"a/b"')) == '.metadata.finalizers[="a/b"]'


def test_an_update_on_create_marks_new_maps() -> None:
    managers = FieldManagers()
    created = {"metadata": {"name": "a", "namespace": "ns"}, "data": {"x": "1"}}
    managers.update(
        EMPTY,
        created,
        manager="curl",
        api_version="v1",
        subresource="",
        now="t",
        schema=DEFAULT_SCHEMA,
    )
    assert fields(managers) == {"curl": {"f:data": {".": {}, "f:x": {}}}}


def test_merge_keeps_live_items_and_takes_the_configurations_order() -> None:
    live = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}}
    config = {"spec": {"containers": [{"name": "c", "image": "2"}, {"name": "a", "image": "2"}]}}
    merged = merge(live, config, POD_SCHEMA)
    assert [(c["name"], c["image"]) for c in merged["spec"]["containers"]] == [
        ("c", "2"),
        ("a", "2"),
        ("b", "1"),
    ]
    atomic = merge({"spec": {"args": ["1", "2"]}}, {"spec": {"args": ["3"]}}, POD_SCHEMA)
    assert atomic == {"spec": {"args": ["3"]}}
    assert merge({"a": {"b": 1}}, {"a": None}, DEFAULT_SCHEMA) == {}
    assert live["spec"]["containers"][0]["image"] == "1"  # inputs untouched


def test_compare_names_what_changed() -> None:
    old = {"metadata": {"name": "n", "labels": {"a": "1"}}, "spec": {"x": 1, "gone": 2}}
    new = {"metadata": {"name": "n", "labels": {"a": "2"}}, "spec": {"x": 1, "new": {"y": 3}}}
    result = compare(old, new, DEFAULT_SCHEMA)
    assert result.modified == {("f:metadata", "f:labels", "f:a")}
    assert result.added == {("f:spec", "f:new"), ("f:spec", "f:new", "f:y")}
    assert result.removed == {("f:spec", "f:gone")}


def test_fields_v1_round_trip_and_bad_input() -> None:
    encoded = {"f:data": {".": {}, "f:x": {}}, "f:spec": {"f:a": {"f:b": {}}}}
    assert encode_fields(decode_fields(encoded)) == encoded
    assert decode_fields({"nonsense": {}, "f:ok": {}, "f:bad": 3}) == {("f:ok",)}
    assert (
        FieldManagers.decode([{"manager": 3}, "x", {"manager": "m", "operation": "Bad"}]).encode()
        == []
    )
