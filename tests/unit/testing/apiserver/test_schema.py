"""The emulator's structural-schema checks, pruning and defaulting of custom resources
(pure functions). The messages are kube-apiserver 1.28's, as the integration tests
check against a real server; these cover the corners those do not reach."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubereflector.testing.apiserver._coercion import coerce
from kubereflector.testing.apiserver._gofmt import go_float, go_quote, go_sharp_v
from kubereflector.testing.apiserver._schema import (
    embedded_errors,
    list_errors,
    schema_errors,
)
from kubereflector.testing.apiserver._statuses import FieldError, invalid


def texts(errors: list[FieldError]) -> list[str]:
    return [f"{e.field}: {e.text()}" for e in errors]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (1.5, "1.5"),
        (-0.0, "-0"),
        (123456.0, "123456"),
        (1234567.0, "1.234567e+06"),
        (1e6, "1e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1e21, "1e+21"),
    ],
)
def test_floats_print_as_gos_percent_v(value: float, text: str) -> None:
    assert go_float(value) == text


def test_values_print_as_go_prints_them() -> None:
    assert go_quote('a"b\n\x00é') == '"a\\"b\\n\\x00é"'
    assert go_sharp_v({"b": [1, 2.5, None, True], "a": "x"}) == (
        'map[string]interface {}{"a":"x", "b":[]interface {}{1, 2.5, interface {}(nil), true}}'
    )


def test_an_error_message_names_each_distinct_error_once() -> None:
    same = FieldError("spec.a", "Required", "")
    status = invalid("Foo", "x", [same, same], "kr.dev").status
    assert status["message"] == 'Foo.kr.dev "x" is invalid: spec.a: Required value'
    assert len(status["details"]["causes"]) == 2
    assert FieldError("", "Invalid", "why", None).text() == 'Invalid value: "null": why'


def test_composite_schemas() -> None:
    schema = {
        "type": "object",
        "properties": {
            "any": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "one": {"oneOf": [{"minimum": 1}, {"maximum": 5}]},
            "all": {"allOf": [{"minimum": 1}, {"maximum": 5}]},
            "not": {"not": {"enum": ["x"]}},
        },
    }
    # kube-openapi adds an anyOf's failure before the best alternative's errors, and
    # an allOf's after its alternatives'; the composite errors name no field.
    assert schema_errors(schema, {"any": True, "one": 3, "all": 7, "not": "x"}) == [
        FieldError("<nil>", "Invalid", '"any" must validate at least one schema (anyOf)', ""),
        FieldError(
            "any", "TypeInvalid", 'any in body must be of type integer: "boolean"', "boolean"
        ),
        FieldError(
            "<nil>",
            "Invalid",
            '"one" must validate one and only one schema (oneOf). Found 2 valid alternatives',
            "",
        ),
        FieldError("all", "Invalid", "all in body should be less than or equal to 5", 7),
        FieldError("<nil>", "Invalid", '"all" must validate all the schemas (allOf)', ""),
        FieldError("<nil>", "Invalid", '"not" must not validate the schema (not)', ""),
    ]


def test_numbers_unique_items_and_formats() -> None:
    schema = {
        "type": "object",
        "properties": {
            "half": {"type": "integer", "multipleOf": 0.5},
            "items": {"type": "array", "uniqueItems": True},
            "ip": {"type": "string", "format": "ipv4"},
            "odd": {"type": "string", "format": "not-a-kube-format"},
            "n": {"type": "number", "minimum": 1.5},
            "i": {"type": "integer", "minimum": 1.5},
        },
    }
    errors = schema_errors(
        schema,
        {"half": 3, "items": [{"a": 1}, {"a": 1}], "ip": "1.2.3", "odd": "?", "n": 1.0, "i": 1},
    )
    assert texts(errors) == [
        # kube-openapi truncates the factor for an integer: 0.5 becomes 0.
        "half: Invalid value: 0: factor MultipleOf declared for half must be positive: 0",
        'items: Invalid value: "": items in body shouldn\'t contain duplicates',
        'ip: Invalid value: "1.2.3": ip in body must be of type ipv4: "1.2.3"',
        "n: Invalid value: 1: n in body should be greater than or equal to 1.5",
        # An integer meets bounds truncated to integers (kube-openapi's int64(min)): i=1
        # passes minimum 1.5.
    ]


def test_list_types_and_embedded_resources() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "keyed": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["a", "b"],
                "items": {"type": "object"},
            },
            "m": {
                "type": "object",
                "additionalProperties": {
                    "type": "array",
                    "x-kubernetes-list-type": "set",
                    "items": {"type": "integer"},
                },
            },
            "emb": {"type": "object", "x-kubernetes-embedded-resource": True},
        },
    }
    obj = {
        "keyed": [{"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, 7],
        "m": {"k": [1, 2, 1, 1]},
        "emb": {"apiVersion": "a/b/c", "kind": "Not A Kind", "metadata": {"name": "a/b"}},
    }
    assert texts(list_errors(schema, obj)) == [
        "keyed[2]: Invalid value: 7: must be an object for an array of list-type map",
        "m[k][2]: Duplicate value: 1",
    ]
    obj["keyed"] = obj["keyed"][:2]
    assert texts(list_errors(schema, obj))[0] == (
        'keyed[1]: Duplicate value: map[string]interface {}{"a":1, "b":2}'
    )
    assert [e.field for e in embedded_errors(schema, obj)] == [
        "emb.apiVersion",
        "emb.kind",
        "emb.metadata.name",
    ]


def test_coercion_prunes_defaults_and_reports_paths_as_kube() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "list": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"a": {"type": "integer", "default": 1}},
                        },
                    },
                    "map": {"type": "object", "additionalProperties": {"type": "string"}},
                    "keep": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"known": {"type": "object", "properties": {}}},
                    },
                    "d": {
                        "type": "object",
                        "default": {"x": 1, "unknown": 2},
                        "properties": {"x": {"type": "integer"}},
                    },
                    "n": {"type": "integer", "nullable": True},
                    "gone": {"type": "integer"},
                },
            }
        },
    }
    obj: dict[str, Any] = {
        "apiVersion": "kr.dev/v1",
        "kind": "K",
        "metadata": {"name": "a", "zzz": 1},
        "spec": {
            "list": [{"b": 1}, {"a": 2.0}],
            "map": {"k": "v"},
            "keep": {"free": 1, "known": {"drop": 1}},
            "n": None,
            "gone": None,
        },
    }
    unknown = coerce(obj, schema)
    assert unknown == ["metadata.zzz", "spec.keep.known.drop", "spec.list[0].b"]
    assert obj["spec"] == {
        "list": [{"a": 1}, {"a": 2}],
        "map": {"k": "v"},
        "keep": {"free": 1, "known": {}},
        "d": {"x": 1},
        "n": None,
    }
    assert obj["metadata"] == {"name": "a"}
    again = copy.deepcopy(obj)
    assert coerce(again, schema) == []
    assert again == obj


def test_coercion_without_a_schema_keeps_everything_but_unknown_metadata() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "a", "x": 1}, "spec": {"anything": [1]}}
    assert coerce(obj, None) == ["metadata.x"]
    assert obj == {"metadata": {"name": "a"}, "spec": {"anything": [1]}}
