"""Bad protobuf gets a clear error naming what was wrong, never a crash or a wrong value."""

from __future__ import annotations

import pytest

from kubereflector.protobuf import ProtobufError, decode, encode, has_kind
from kubereflector.protobuf._envelope import wrap

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "n", "labels": {"a": "b"}},
    "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]},
}


def test_has_kind_knows_built_in_kinds_only() -> None:
    assert has_kind("v1", "Pod")
    assert has_kind("apps/v1", "DeploymentList")
    assert not has_kind("example.com/v1", "Foo")
    assert not has_kind("v1", "Nope")


def test_a_body_without_the_prefix_is_refused() -> None:
    with pytest.raises(
        ProtobufError, match=r"does not start with kube-apiserver.s protobuf prefix"
    ):
        decode(b'{"kind": "Pod"}')


def test_a_kind_without_a_schema_is_named() -> None:
    with pytest.raises(ProtobufError, match=r"no protobuf schema for Foo in example\.com/v1"):
        decode(wrap("example.com/v1", "Foo", b""))
    with pytest.raises(ProtobufError, match=r"no protobuf schema for Foo in example\.com/v1"):
        encode({"apiVersion": "example.com/v1", "kind": "Foo"})


@pytest.mark.parametrize("cut", [1, 5, 7, 20, 41])
def test_a_truncated_body_is_an_error_not_a_shorter_object(cut: int) -> None:
    body = encode(POD)
    with pytest.raises(ProtobufError):
        decode(body[:-cut])


def test_a_field_of_the_wrong_wire_type_names_its_message() -> None:
    # Pod field 1 (metadata) as a varint instead of a message.
    with pytest.raises(ProtobufError, match=r"core/v1\.Pod\.metadata"):
        decode(wrap("v1", "Pod", b"\x08\x01"))


def test_a_string_that_is_not_utf8_names_its_field() -> None:
    # ObjectMeta field 1 (name): 0xff is not UTF-8.
    meta = b"\x0a\x01\xff"
    with pytest.raises(
        ProtobufError, match=r"meta/v1\.ObjectMeta\.name: a string that is not UTF-8"
    ):
        decode(wrap("v1", "Pod", b"\x0a" + bytes([len(meta)]) + meta))


def test_encoding_a_value_of_the_wrong_type_names_the_field() -> None:
    bad = {**POD, "spec": {"containers": [{"name": "c", "ports": [{"containerPort": "x"}]}]}}
    with pytest.raises(ValueError, match=r"core/v1\.ContainerPort\.containerPort: 'x'"):
        encode(bad)
