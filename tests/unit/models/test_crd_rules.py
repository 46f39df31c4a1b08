"""kube-apiserver's rules for a CRD's schema, enforced before the server sees it: each rule
the converter enforces, broken through the types or through ``Meta(extra_json_schema=...)``
(the escape hatch), is refused in kube's words, naming the class and field; its correct
counterpart is accepted."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from msgspec import Meta
from typing_extensions import NotRequired, TypedDict

from crd_models import field_error, field_schema
from kubereflector.models import JSONValue
from kubereflector.models.crd import Default, EmbeddedResource, ListType, MapType
from kubereflector.models.meta_v1 import IntOrString, ObjectMeta


def extra(hint: object, schema: dict[str, Any]) -> object:
    return Annotated[hint, Meta(extra_json_schema=schema)]


class Item(TypedDict):
    name: str
    port: int
    tags: NotRequired[list[str]]
    nested: NotRequired[dict[str, str]]


class Keyed(TypedDict):
    name: NotRequired[Annotated[str, Default("main")]]
    maybe: NotRequired[Annotated[str | None, Default("x")]]
    optional: NotRequired[str]


class Empty(TypedDict):
    pass


class BadKind(TypedDict):
    kind: int
    metadata: NotRequired[ObjectMeta]


class AtomicItem(TypedDict):
    a: int


# -- unsupported and structural -------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "$ref",
        "$schema",
        "id",
        "definitions",
        "dependencies",
        "patternProperties",
        "additionalItems",
    ],
)
def test_what_a_crd_schema_does_not_support_is_refused(key: str) -> None:
    message = field_error(extra(str, {key: {}}))
    assert f"{key} is not supported in a CRD schema" in message
    assert message.startswith("Root.spec (at .spec of Root): ")


@pytest.mark.parametrize(
    ("hint", "message"),
    [
        (extra(str, {"type": "null"}), "type cannot be null: use X | None (nullable)"),
        (extra(str, {"type": "text"}), "type 'text' is not one of string, number"),
        (
            extra(list[str], {"items": {"description": "no type"}}),
            "type must not be empty for list items",
        ),
        (extra(str, {"type": "array"}), "a list needs items"),
        (extra(list[str], {"items": [{"type": "string"}]}), "items must be one schema, not a list"),
        (
            extra(Item, {"additionalProperties": {"type": "string"}}),
            "additionalProperties and properties are mutually exclusive",
        ),
        (
            extra(list[str], {"uniqueItems": True}),
            'uniqueItems cannot be true (quadratic); use ListType("set")',
        ),
        (
            extra(dict[str, JSONValue], {"x-kubernetes-preserve-unknown-fields": False}),
            "must be true or absent",
        ),
        (
            extra(IntOrString, {"x-kubernetes-preserve-unknown-fields": True}),
            "x-kubernetes-preserve-unknown-fields must be false if x-kubernetes-int-or-string",
        ),
        (
            extra(IntOrString, {"x-kubernetes-embedded-resource": True}),
            "x-kubernetes-embedded-resource must be on an object",
        ),
        (
            extra(str, {"x-kubernetes-embedded-resource": True}),
            "x-kubernetes-embedded-resource must be on an object",
        ),
        (
            Annotated[dict[str, str], EmbeddedResource()],
            "an embedded resource cannot have additionalProperties",
        ),
        (
            Annotated[Empty, EmbeddedResource()],
            "an embedded resource needs properties or x-kubernetes-preserve-unknown-fields",
        ),
        (Annotated[BadKind, EmbeddedResource()], "kind must be of type string"),
    ],
)
def test_structural_invariants(hint: object, message: str) -> None:
    assert message in field_error(hint)


def test_the_int_or_string_exceptions_stay_allowed() -> None:
    schema = field_schema(extra(IntOrString, {"allOf": [{"maxLength": 5}]}))
    assert schema["allOf"] == [{"maxLength": 5}]


# -- value validations under anyOf, allOf, oneOf, not ---------------------------------------------


def test_value_validations_of_specified_fields_are_allowed() -> None:
    one_of = {"oneOf": [{"required": ["name"]}, {"required": ["port"]}]}
    assert field_schema(extra(Item, one_of))["oneOf"] == one_of["oneOf"]
    nested = {
        "anyOf": [{"properties": {"tags": {"minItems": 1}}}, {"not": {"required": ["nested"]}}]
    }
    assert field_schema(extra(Item, nested))["anyOf"] == nested["anyOf"]
    items = {"allOf": [{"items": {"maxLength": 3}}]}
    assert field_schema(extra(list[str], items))["allOf"] == items["allOf"]


@pytest.mark.parametrize(
    ("junctor", "message"),
    [
        ({"anyOf": [{"type": "string"}]}, "anyOf[0] may hold value validations only, not type"),
        (
            {"allOf": [{"description": "x"}]},
            "allOf[0] may hold value validations only, not description",
        ),
        ({"oneOf": [{"nullable": True}]}, "oneOf[0] may hold value validations only, not nullable"),
        ({"not": {"default": 1}}, "not may hold value validations only, not default"),
        ({"anyOf": [{"x-kubernetes-list-type": "set"}]}, "not x-kubernetes-list-type"),
        (
            {"anyOf": [{"properties": {"other": {}}}]},
            "property 'other' must also be specified outside",
        ),
        (
            {"anyOf": [{"properties": {"metadata": {}}}]},
            "metadata must not be specified in a nested context",
        ),
        ({"anyOf": [{"properties": {"name": {"type": "string"}}}]}, "not type"),
        ({"anyOf": [{"items": {"minLength": 1}}]}, "items must also be specified outside"),
        (
            {"anyOf": [{"anyOf": [{"type": "string"}]}]},
            "anyOf[0].anyOf[0] may hold value validations only",
        ),
        ({"anyOf": {"required": ["name"]}}, "anyOf is a list of schemas"),
        ({"anyOf": ["name"]}, "anyOf[0] must be a schema"),
    ],
)
def test_value_validations_are_structural(junctor: dict[str, Any], message: str) -> None:
    assert message in field_error(extra(Item, junctor))


# -- list and map types ---------------------------------------------------------------------------


def test_correct_list_and_map_types_are_accepted() -> None:
    assert field_schema(Annotated[list[Item], ListType("map", keys=("name", "port"))])
    assert field_schema(Annotated[list[Keyed], ListType("map", keys=("name",))])
    assert field_schema(Annotated[list[Annotated[AtomicItem, MapType("atomic")]], ListType("set")])
    assert field_schema(Annotated[list[list[str]], ListType("set")])


@pytest.mark.parametrize(
    ("hint", "message"),
    [
        (extra(str, {"x-kubernetes-map-type": "atomic"}), "x-kubernetes-map-type is for objects"),
        (
            extra(Item, {"x-kubernetes-map-type": "partial"}),
            'x-kubernetes-map-type is "atomic" or "granular"',
        ),
        (extra(str, {"x-kubernetes-list-type": "set"}), "x-kubernetes-list-type is for lists"),
        (
            extra(list[str], {"x-kubernetes-list-type": "bag"}),
            'x-kubernetes-list-type is "atomic", "set" or "map"',
        ),
        (
            Annotated[
                list[str],
                ListType("set"),
                Meta(extra_json_schema={"x-kubernetes-list-map-keys": ["a"]}),
            ],
            "x-kubernetes-list-map-keys needs x-kubernetes-list-type map",
        ),
        (
            extra(list[Item], {"x-kubernetes-list-type": "map"}),
            "a map list needs x-kubernetes-list-map-keys",
        ),
        (
            Annotated[list[int | None], ListType("set")],
            "the items of a set list cannot be nullable",
        ),
        (
            Annotated[list[Item | None], ListType("map", keys=("name",))],
            "the items of a map list cannot be nullable",
        ),
        (
            Annotated[list[Annotated[list[str], ListType("set")]], ListType("set")],
            "the lists in a set list must be atomic lists",
        ),
        (
            Annotated[list[AtomicItem], ListType("set")],
            'the objects in a set list must be atomic: MapType("atomic")',
        ),
        (
            Annotated[list[str], ListType("map", keys=("name",))],
            "the items of a map list must be objects",
        ),
        (
            Annotated[list[Item], ListType("map", keys=("id",))],
            "the map list's key 'id' is not a field of its items",
        ),
        (
            Annotated[list[Item], ListType("map", keys=("tags",))],
            "the map list's key 'tags' must be a scalar field",
        ),
        (
            Annotated[list[Keyed], ListType("map", keys=("optional",))],
            "the map list's key 'optional' must be a required field or have a Default",
        ),
        (
            Annotated[list[Keyed], ListType("map", keys=("maybe",))],
            "the map list's key 'maybe' cannot be nullable",
        ),
        (
            extra(
                list[Item],
                {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "name"]},
            ),
            "x-kubernetes-list-map-keys names a key twice",
        ),
    ],
)
def test_list_and_map_types_follow_kubes_rules(hint: object, message: str) -> None:
    assert message in field_error(hint)


# -- CEL rule entries and patterns ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ("self > 0", "x-kubernetes-validations is a list of rules"),
        ([{"message": "no rule"}], "is not a rule"),
        ([{"rule": "  "}], "the rule is empty"),
        ([{"rule": "self > 0", "message": " "}], "message must be non-empty if given"),
        ([{"rule": "self > 0", "message": "two\nlines"}], "message must not contain line breaks"),
        ([{"rule": "self > 0 &&\nself < 9"}], "a rule spanning lines needs a message"),
        ([{"rule": "self > 0", "reason": "Bad"}], "reason 'Bad' is not one of FieldValueDuplicate"),
    ],
)
def test_cel_rule_entries_are_checked(entries: object, message: str) -> None:
    assert message in field_error(extra(int, {"x-kubernetes-validations": entries}))


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(", "is not a regular expression"),
        (r"^(?=a)", "syntax Go's RE2 lacks"),
        (r"^(?!a)", "syntax Go's RE2 lacks"),
        (r"(?<=a)b", "syntax Go's RE2 lacks"),
        (r"(a)\1", "syntax Go's RE2 lacks"),
        (r"\Aabc\Z", "syntax Go's RE2 lacks"),
        (7, "is not a string"),
    ],
)
def test_a_pattern_is_one_kube_can_compile(pattern: object, message: str) -> None:
    assert message in field_error(extra(str, {"pattern": pattern}))


def test_re2_syntax_is_accepted() -> None:
    pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(?P<rest>\.[a-z]+)*(?i:x)?$"
    assert field_schema(Annotated[str, Meta(pattern=pattern)])["pattern"] == pattern


# -- defaults -------------------------------------------------------------------------------------


class Defaulted(TypedDict):
    name: str
    size: NotRequired[int]


@pytest.mark.parametrize(
    ("hint", "value"),
    [
        (int, 3),
        (float, 1),
        (str | None, None),
        (IntOrString, "50%"),
        (IntOrString, 3),
        (JSONValue, {"any": ["thing"]}),
        (Literal["a", "b"], "b"),
        (Annotated[int, Meta(ge=1, le=3)], 3),
        (Annotated[float, Meta(gt=0)], 0.5),
        (Annotated[int, Meta(multiple_of=5)], 10),
        (Annotated[str, Meta(min_length=1, max_length=3, pattern="^a")], "abc"),
        (Annotated[list[int], Meta(max_length=2)], [1, 2]),
        (Defaulted, {"name": "x", "size": 1}),
        (dict[str, int], {"a": 1}),
        (dict[str, JSONValue], {"a": {"b": None}}),
        (
            Annotated[
                Defaulted, Meta(extra_json_schema={"x-kubernetes-preserve-unknown-fields": True})
            ],
            {"name": "x", "other": 1},
        ),
    ],
)
def test_a_valid_pruned_default_is_accepted(hint: object, value: object) -> None:
    assert field_schema(Annotated[hint, Default(value)])["default"] == value


@pytest.mark.parametrize(
    ("hint", "value", "message"),
    [
        (int, "3", "is not of type integer"),
        (int, 1.5, "is not of type integer"),
        (int, True, "is not of type integer"),
        (float, "1", "is not of type number"),
        (bool, 1, "is not of type boolean"),
        (str, None, "is null, but the field is not nullable"),
        (list[int], {}, "is not of type array"),
        (Defaulted, [], "is not of type object"),
        (IntOrString, 1.5, "is neither an integer nor a string"),
        (Literal["a", "b"], "c", "is not one of ['a', 'b']"),
        (Annotated[int, Meta(ge=1)], 0, "is below the minimum 1"),
        (Annotated[int, Meta(gt=1)], 1, "is below the minimum 1"),
        (Annotated[int, Meta(le=3)], 4, "is above the maximum 3"),
        (Annotated[int, Meta(lt=3)], 3, "is above the maximum 3"),
        (Annotated[int, Meta(multiple_of=5)], 7, "is not a multiple of 5"),
        (Annotated[str, Meta(min_length=2)], "a", "is shorter than minLength 2"),
        (Annotated[str, Meta(max_length=2)], "abc", "is longer than maxLength 2"),
        (Annotated[str, Meta(pattern="^a")], "b", "does not match the pattern '^a'"),
        (Annotated[list[int], Meta(min_length=1)], [], "is shorter than minItems 1"),
        (
            Annotated[dict[str, int], Meta(max_length=1)],
            {"a": 1, "b": 2},
            "is longer than maxProperties 1",
        ),
        (list[Annotated[int, Meta(ge=0)]], [1, -1], "has an item [1] that is below the minimum 0"),
        (Defaulted, {"size": 1}, "lacks the required field 'name'"),
        (
            Defaulted,
            {"name": "x", "colour": "red"},
            "has the unknown field 'colour' (kube prunes it",
        ),
        (Defaulted, {"name": 1}, "has a field 'name' that is not of type string"),
        (dict[str, int], {"a": "1"}, "has a field 'a' that is not of type integer"),
    ],
)
def test_a_default_must_validate_and_be_pruned(hint: object, value: object, message: str) -> None:
    error = field_error(Annotated[hint, Default(value)])
    assert f"the default {value!r} {message}" in error
    assert error.startswith("Root.spec (at .spec of Root): ")


class Deep(TypedDict):
    port: Annotated[int, Default("http")]


class Outer(TypedDict):
    deep: Deep


def test_a_problem_deep_in_a_class_names_that_class() -> None:
    message = field_error(Outer)
    assert message.startswith("Deep.port (at .spec.deep.port of Root): the default 'http'")
