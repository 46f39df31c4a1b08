"""From Python types to a custom resource's structural schema: each type, constraint and
marker gives the schema kube-apiserver wants, and each type that cannot be one is refused
naming the class and field."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re
from typing import Annotated, Any, Literal, NewType, Optional

import msgspec
import pytest
from msgspec import Meta
from typing_extensions import NotRequired, ReadOnly, Required, TypedDict

from crd_models import declare, field_error, field_schema, schema_of
from kubereflector.models import JSONValue
from kubereflector.models.core_v1 import PodTemplateSpec
from kubereflector.models.crd import (
    Default,
    EmbeddedResource,
    Format,
    ListType,
    MapType,
    PreserveUnknownFields,
    Rule,
    StructuralSchemaError,
    rules,
)
from kubereflector.models.meta_v1 import IntOrString, ObjectMeta, Quantity

Name = NewType("Name", str)

# -- types -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Name, {"type": "string"}),
        (int | float, {"type": "number"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (
            dict[Literal["a", "b"], int],
            {"type": "object", "additionalProperties": {"type": "integer"}},
        ),
        (JSONValue, {"x-kubernetes-preserve-unknown-fields": True}),
        (dict[str, JSONValue], {"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
        (
            list[JSONValue],
            {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}},
        ),
        (Literal["Fast", "Slow"], {"type": "string", "enum": ["Fast", "Slow"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal[True], {"type": "boolean", "enum": [True]}),
        (Literal["a"] | None, {"type": "string", "enum": ["a"], "nullable": True}),
        (Literal["a", None], {"type": "string", "enum": ["a"], "nullable": True}),
        (int | None, {"type": "integer", "nullable": True}),
        (Optional[str], {"type": "string", "nullable": True}),  # noqa: UP045
        (list[str] | None, {"type": "array", "items": {"type": "string"}, "nullable": True}),
    ],
)
def test_a_type_gives_its_schema(hint: object, schema: dict[str, Any]) -> None:
    assert field_schema(hint) == schema


def test_int_or_string_is_kubes_int_or_string() -> None:
    expected = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    assert field_schema(IntOrString) == expected
    assert field_schema(int | str) == expected
    assert field_schema(str | int) == expected
    assert field_schema(IntOrString | None) == {**expected, "nullable": True}


def test_a_quantity_is_an_int_or_string_with_kubes_pattern() -> None:
    schema = field_schema(Quantity)
    assert schema["x-kubernetes-int-or-string"] is True
    assert schema["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert schema["pattern"].startswith(r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))")
    assert "type" not in schema


class Inner(TypedDict):
    """An inner object."""

    name: str
    """Its name."""

    size: NotRequired[int]


class Partial(TypedDict, total=False):
    a: int
    b: Required[str]


class Frozen(TypedDict):
    name: ReadOnly[str]
    size: ReadOnly[NotRequired[int]]


class Derived(Inner):
    colour: str
    """Its colour."""


def test_a_typed_dict_is_an_object_with_its_fields_and_descriptions() -> None:
    assert field_schema(Inner) == {
        "description": "An inner object.",
        "type": "object",
        "properties": {
            "name": {"description": "Its name.", "type": "string"},
            "size": {"type": "integer"},
        },
        "required": ["name"],
    }


def test_totality_and_required_decide_what_is_required() -> None:
    schema = field_schema(Partial)
    assert schema["required"] == ["b"]
    assert list(schema["properties"]) == ["a", "b"]


def test_read_only_fields_are_fields() -> None:
    schema = field_schema(Frozen)
    assert schema["properties"] == {"name": {"type": "string"}, "size": {"type": "integer"}}
    assert schema["required"] == ["name"]


def test_an_inherited_typed_dict_has_its_bases_fields_and_descriptions() -> None:
    schema = field_schema(Derived)
    assert list(schema["properties"]) == ["name", "size", "colour"]
    assert schema["properties"]["name"]["description"] == "Its name."
    assert schema["properties"]["colour"]["description"] == "Its colour."
    assert schema["required"] == ["name", "colour"]


def test_a_field_docstring_or_a_meta_description_beats_the_types() -> None:
    class Holder(TypedDict):
        inner: Inner
        """The field's own words."""

        other: Annotated[Inner, Meta(description="Meta's words.", title="T")]

    properties = field_schema(Holder)["properties"]
    assert properties["inner"]["description"] == "The field's own words."
    assert properties["other"]["description"] == "Meta's words."
    assert properties["other"]["title"] == "T"


def test_a_built_in_model_is_inlined_whole() -> None:
    template = field_schema(PodTemplateSpec)
    metadata = template["properties"]["metadata"]
    # Not the root: ObjectMeta's fields are kept (labels of a pod template survive pruning).
    assert metadata["properties"]["labels"] == {
        "description": metadata["properties"]["labels"]["description"],
        "type": "object",
        "additionalProperties": {"type": "string"},
    }
    container = template["properties"]["spec"]["properties"]["containers"]["items"]
    assert container["required"] == ["name"]
    limits = container["properties"]["resources"]["properties"]["limits"]
    assert limits["additionalProperties"]["x-kubernetes-int-or-string"] is True
    port = container["properties"]["ports"]["items"]["properties"]["containerPort"]
    assert port["type"] == "integer"


# -- the object itself -------------------------------------------------------------------------


@rules(Rule("self.spec.size <= 10", message="too big"))
class Sized(TypedDict):
    """A sized thing."""

    apiVersion: NotRequired[str]
    kind: NotRequired[Literal["Sized"]]
    metadata: NotRequired[ObjectMeta]
    spec: Inner
    status: NotRequired[dict[str, str]]


def test_the_object_has_kubes_type_meta_and_metadata_left_to_the_server() -> None:
    schema = schema_of(Sized)
    assert schema["description"] == "A sized thing."
    assert schema["type"] == "object"
    properties = schema["properties"]
    assert list(properties) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert properties["apiVersion"]["type"] == "string"
    assert properties["apiVersion"]["description"].startswith("APIVersion defines")
    assert properties["kind"]["type"] == "string"  # a Literal kind: no enum kube would check
    assert properties["metadata"] == {"type": "object"}  # kube refuses any more
    assert schema["required"] == ["spec"]
    assert schema["x-kubernetes-validations"] == [
        {"rule": "self.spec.size <= 10", "message": "too big"}
    ]


def test_an_object_without_type_meta_has_none() -> None:
    class Bare(TypedDict):
        spec: Inner

    assert list(schema_of(Bare)["properties"]) == ["spec"]


# -- constraints -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (Annotated[int, Meta(ge=1, le=10)], {"minimum": 1, "maximum": 10}),
        (
            Annotated[float, Meta(gt=0, lt=1)],
            {"minimum": 0, "exclusiveMinimum": True, "maximum": 1, "exclusiveMaximum": True},
        ),
        (Annotated[int, Meta(multiple_of=5)], {"multipleOf": 5}),
        (Annotated[str, Meta(pattern="^[a-z]+$")], {"pattern": "^[a-z]+$"}),
        (Annotated[str, Meta(min_length=1, max_length=63)], {"minLength": 1, "maxLength": 63}),
        (Annotated[list[int], Meta(min_length=1, max_length=3)], {"minItems": 1, "maxItems": 3}),
        (
            Annotated[dict[str, str], Meta(min_length=1, max_length=2)],
            {"minProperties": 1, "maxProperties": 2},
        ),
        (Annotated[Inner, Meta(max_length=2)], {"maxProperties": 2}),
        (Annotated[int, Meta(examples=[3, 4])], {"example": 3}),
        (Annotated[int, Meta(extra_json_schema={"format": "int32"})], {"format": "int32"}),
        (Annotated[int, Default(1)], {"default": 1}),
        (Annotated[int | None, Default(None)], {"default": None, "nullable": True}),
        (Annotated[str, Format("date-time")], {"format": "date-time"}),
        (Annotated[int, Format("int64")], {"format": "int64"}),
        (Annotated[float, Format("int32")], {"format": "int32"}),
        (Annotated[list[str], ListType("atomic")], {"x-kubernetes-list-type": "atomic"}),
        (Annotated[list[str], ListType("set")], {"x-kubernetes-list-type": "set"}),
        (
            Annotated[list[Inner], ListType("map", keys=("name",))],
            {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        ),
        (Annotated[dict[str, str], MapType("atomic")], {"x-kubernetes-map-type": "atomic"}),
        (Annotated[Inner, MapType("granular")], {"x-kubernetes-map-type": "granular"}),
        (
            Annotated[Inner, PreserveUnknownFields()],
            {"x-kubernetes-preserve-unknown-fields": True},
        ),
        (
            Annotated[str | None, Meta(max_length=3)],
            {"maxLength": 3, "nullable": True},
        ),
        (
            Annotated[IntOrString, Meta(pattern="^[0-9]+%?$")],
            {"pattern": "^[0-9]+%?$"},
        ),
    ],
)
def test_a_constraint_gives_its_keyword(hint: object, expected: dict[str, Any]) -> None:
    schema = field_schema(hint)
    assert {k: schema[k] for k in expected} == expected


def test_constraints_of_items_and_values_stay_with_them() -> None:
    schema = field_schema(Annotated[list[Annotated[str, Meta(max_length=5)]], Meta(max_length=2)])
    assert schema == {
        "type": "array",
        "maxItems": 2,
        "items": {"type": "string", "maxLength": 5},
    }
    values = field_schema(dict[str, Annotated[int, Meta(ge=0)]])
    assert values["additionalProperties"] == {"type": "integer", "minimum": 0}


def test_rules_on_a_field_add_to_the_rules_of_its_class() -> None:
    @rules(Rule("size(self.name) > 0", message="a name"))
    class Ruled(TypedDict):
        name: str

    schema = field_schema(
        Annotated[
            Ruled,
            Rule("self.name != 'x'", reason="FieldValueForbidden", field_path=".name"),
            Rule("true", message_expression="'always'"),
        ]
    )
    assert schema["x-kubernetes-validations"] == [
        {"rule": "size(self.name) > 0", "message": "a name"},
        {"rule": "self.name != 'x'", "reason": "FieldValueForbidden", "fieldPath": ".name"},
        {"rule": "true", "messageExpression": "'always'"},
    ]


def test_an_embedded_resource_keeps_its_fields_but_leaves_metadata_to_the_server() -> None:
    class Thing(TypedDict):
        apiVersion: NotRequired[str]
        kind: NotRequired[str]
        metadata: NotRequired[ObjectMeta]
        data: NotRequired[dict[str, str]]

    assert field_schema(Annotated[Thing, EmbeddedResource()]) == {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "data": {"type": "object", "additionalProperties": {"type": "string"}},
            "metadata": {"type": "object"},
        },
        "x-kubernetes-embedded-resource": True,
    }
    assert field_schema(Annotated[dict[str, JSONValue], EmbeddedResource()]) == {
        "type": "object",
        "x-kubernetes-embedded-resource": True,
        "x-kubernetes-preserve-unknown-fields": True,
    }


def test_extra_json_schema_is_written_last() -> None:
    schema = field_schema(
        Annotated[
            Inner,
            Meta(extra_json_schema={"oneOf": [{"required": ["name"]}, {"required": ["size"]}]}),
        ]
    )
    assert schema["oneOf"] == [{"required": ["name"]}, {"required": ["size"]}]


# -- refusals ----------------------------------------------------------------------------------


class Cat(TypedDict):
    meow: str


class Dog(TypedDict):
    woof: str


class Node(TypedDict):
    children: list[Node]


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int


class Loud(msgspec.Struct):
    x: int


class Broken(TypedDict):
    missing: NotDefinedAnywhere  # type: ignore[name-defined]  # noqa: F821


@pytest.mark.parametrize(
    ("hint", "message"),
    [
        (Cat | Dog, "one type per field"),
        (str | bool, "one type per field"),
        (Any, "use JSONValue"),
        (datetime.datetime, 'Format("date-time")'),
        (datetime.date, 'Format("date")'),
        (bytes, 'Format("byte")'),
        (set[str], 'ListType("set")'),
        (frozenset[str], 'ListType("set")'),
        (tuple[int, int], "JSON has no tuples"),
        (Colour, "use Literal[...]"),
        (Point, "is not a TypedDict"),
        (Loud, "is not a TypedDict"),
        (list, "needs its item type"),
        (dict, "needs its item type"),
        (dict[int, str], "a map's keys are strings"),
        (Literal["a", 1], "an enum's values are of one JSON type"),
        (type(None), "NoneType"),
        (Annotated[str, Meta(ge=1)], "Meta(ge=...) is for a number, not a string"),
        (Annotated[list[int], Meta(lt=1)], "Meta(lt=...) is for a number, not a list"),
        (Annotated[int, Meta(pattern="a")], "Meta(pattern=...) is for a string, not an integer"),
        (Annotated[bool, Meta(max_length=1)], "is for a string, a list or a map, not a boolean"),
        (Annotated[JSONValue, Meta(min_length=1)], "not a JSON value"),
        (Annotated[str, Meta(tz=True)], "Meta(tz=...) is for datetimes"),
        (
            Annotated[int, Format("date-time")],
            "Format('date-time') is for a string, not an integer",
        ),
        (Annotated[str, Format("int32")], "Format('int32') is for an integer, not a string"),
        (Annotated[str, ListType("set")], "ListType is for a list, not a string"),
        (Annotated[list[str], MapType("atomic")], "MapType is for a TypedDict or a dict"),
        (Annotated[int, PreserveUnknownFields()], "PreserveUnknownFields is for an object"),
        (Annotated[list[str], EmbeddedResource()], "EmbeddedResource is for an object"),
        (Annotated[ObjectMeta, EmbeddedResource()], "ObjectMeta is not a resource"),
        (Annotated[int, PreserveUnknownFields], "write PreserveUnknownFields() (an instance)"),
        (Annotated[int, Meta], "write Meta() (an instance)"),
        (Annotated[int, Default(1), Default(2)], "Default is given 2 times"),
        (Annotated[int, Default((1, 2))], "(1, 2) is not a JSON value"),
        (Annotated[int, Meta(examples=[{1: 2}])], "{1: 2} is not a JSON value"),
    ],
)
def test_a_type_that_cannot_be_structural_is_refused(hint: object, message: str) -> None:
    assert message in field_error(hint)


class Pet(TypedDict):
    kind: Cat | Dog


class Owner(TypedDict):
    pets: list[Pet]


def test_a_refusal_names_the_class_the_field_and_the_path() -> None:
    message = field_error(Owner)
    assert message.startswith("Pet.kind (at .spec.pets[*].kind of Root): Cat | Dog: ")


def test_a_type_containing_itself_is_refused_naming_the_cycle() -> None:
    message = field_error(Node)
    assert "Node.children (at .spec.children[*] of Root)" in message
    assert "Node contains itself (Root -> Node -> Node)" in message


def test_an_annotation_that_cannot_be_resolved_is_refused() -> None:
    assert "cannot resolve the annotations of Broken" in field_error(Broken)


@pytest.mark.parametrize(
    ("field", "hint", "message"),
    [
        ("metadata", dict[str, str], "metadata is kubereflector.models.meta_v1.ObjectMeta"),
        ("metadata", Annotated[ObjectMeta, Meta(max_length=3)], "metadata takes no constraints"),
        ("apiVersion", int, "apiVersion is a string (str), not int"),
        ("kind", Annotated[str, Default("X")], "kind takes no constraints"),
    ],
)
def test_the_objects_own_fields_are_kubes(field: str, hint: object, message: str) -> None:
    root = TypedDict("Root", {field: hint, "spec": Inner})  # type: ignore[misc]
    version = declare(root)
    with pytest.raises(StructuralSchemaError, match=re.escape(message)) as caught:
        version.schema()
    assert str(caught.value).startswith(f"Root.{field} (at .{field} of Root): ")


def test_a_custom_resource_is_declared_on_a_typed_dict() -> None:
    with pytest.raises(TypeError, match="decorates a TypedDict class"):
        declare(Point)
