"""The generated table: complete (every type it names is in it) and usable (every
message decodes and encodes at its zero value)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from kubereflector.protobuf import decode, encode, has_kind
from kubereflector.protobuf._decode import decode_message
from kubereflector.protobuf._schema import kind_type, list_kind, message

TABLE = json.loads(
    resources.files("kubereflector.protobuf").joinpath("_schema.json").read_text(encoding="utf-8")
)


def test_every_kind_and_resource_names_a_type_the_table_has() -> None:
    assert TABLE["left_out"] == {}
    for key, type_name in TABLE["kinds"].items():
        assert type_name in TABLE["types"], key
    for key, list_kind_name in TABLE["resources"].items():
        api_version, _, resource = key.rpartition("/")
        assert list_kind(api_version, resource) == list_kind_name, key
    assert list_kind("apps/v1", "deployments") == "DeploymentList"
    assert list_kind("v1", "pods") == "PodList"
    assert list_kind("example.com/v1", "foos") is None


@pytest.mark.parametrize("type_name", sorted(TABLE["types"]))
def test_every_message_decodes_its_zero_value(type_name: str) -> None:
    msg = message(type_name)
    for field in msg.fields:
        shape = field.shape
        element = shape[1] if isinstance(shape, tuple) and shape[0] in ("list", "map") else shape
        if isinstance(element, tuple):
            assert element[1] in TABLE["types"], f"{type_name}.{field.name}"
    zero = decode_message(b"", 0, 0, type_name)
    assert isinstance(zero, list if msg.items is not None else dict)


def test_every_built_in_kind_round_trips_its_zero_object() -> None:
    for key in TABLE["kinds"]:
        api_version, _, kind = key.rpartition("/")
        assert has_kind(api_version, kind)
        assert kind_type(api_version, kind) == TABLE["kinds"][key]
        obj = decode(encode({"apiVersion": api_version, "kind": kind}))
        assert decode(encode(obj)) == obj, key
