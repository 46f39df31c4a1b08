"""kube-apiserver's rules for a CRD's schema, checked before the server sees it. Private to
:mod:`kubereflector.models`.

:func:`check` walks a finished ``openAPIV3Schema`` (what the types gave, and what
``Meta(extra_json_schema=...)`` merged in) and raises
:class:`~.errors.StructuralSchemaError` on the first rule it breaks, in kube's words:
the structural-schema invariants of
``k8s.io/apiextensions-apiserver/pkg/apiserver/schema/validation.go`` (a ``type``
everywhere, no ``$ref``, value validations only under ``anyOf``/``allOf``/``oneOf``/``not``,
embedded resources), the CRD API's rules of
``pkg/apis/apiextensions/validation/validation.go`` (``additionalProperties`` beside
``properties``, ``uniqueItems``, list and map types and their keys, CEL rule entries), and
defaults that validate and are pruned (``pkg/apiserver/schema/defaulting/validation.go``).
CEL is compiled by the server.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

from .errors import StructuralSchemaError, Where
from .markers import RULE_REASONS

if TYPE_CHECKING:
    from .._json import JSONValue
    from .schema import Node

__all__ = ["check"]

_TYPES: Final = ("string", "number", "integer", "boolean", "array", "object")
_UNSUPPORTED: Final = (
    "$ref",
    "$schema",
    "id",
    "definitions",
    "dependencies",
    "patternProperties",
    "additionalItems",
)
_VALUE_VALIDATIONS: Final = frozenset(
    {
        "format",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "multipleOf",
        "enum",
        "maxProperties",
        "minProperties",
        "required",
        "allOf",
        "oneOf",
        "anyOf",
        "not",
        "properties",
        "items",
    }
)
"""What a schema under ``anyOf``/``allOf``/``oneOf``/``not`` may say: value validations only
(no ``type``, ``default``, ``description``, ``nullable``, ``x-kubernetes-*``)."""

_RE2_UNSUPPORTED: Final = re.compile(r"\(\?[=!]|\(\?<[=!]|\\[1-9]|\(\?P=|\\[AZz]|\(\?>|[*+?}]\+")
"""Python regex syntax Go's RE2 (kube's regexp engine) does not have: lookarounds,
backreferences, possessive quantifiers, atomic groups, ``\\A``/``\\Z``."""
_NEWLINE: Final = re.compile(r"[\n\r]")


def check(schema: Node, origins: Mapping[int, Where], *, root: Where) -> None:
    """Check ``schema`` (a custom resource's ``openAPIV3Schema``) against kube's rules.
    Raises :class:`StructuralSchemaError` naming the class and field of the first problem.

    The root itself is written within kube's rules by construction (an object; ``metadata``
    exactly ``{type: object}``; only the keys kube allows beside the status subresource:
    ``description``, ``type``, ``properties``, ``required``, ``x-kubernetes-validations``);
    what this checks is what the fields below it hold."""
    _Checker(origins, root).node(schema, "", root, level="root")


class _Checker:
    def __init__(self, origins: Mapping[int, Where], root: Where) -> None:
        self.origins = origins
        self.root_where = root

    def fail(
        self, node: Node, path: str, message: str, where: Where | None
    ) -> StructuralSchemaError:
        found = self.origins.get(id(node), where) or self.root_where
        if found.path != path:
            message = f"{message} (at {path or 'the root'})"
        return found.error(message)

    # -- the root ----------------------------------------------------------------------------

    def resource_meta(self, node: Node, path: str, where: Where) -> None:
        """``apiVersion`` and ``kind`` of an embedded object are strings. (Its
        ``metadata``, like the object's own, is written ``{type: object}``: the server's.)"""
        properties = _mapping(node.get("properties"))
        for name in ("apiVersion", "kind"):
            child = _mapping(properties.get(name))
            if name in properties and child.get("type") != "string":
                raise self.fail(child, f"{path}.{name}", f"{name} must be of type string", where)

    # -- every node ----------------------------------------------------------------------------

    def node(self, node: Node, path: str, where: Where, *, level: str) -> None:
        """Check one schema node and what is under it. ``level``: root, field or item."""
        where = self.origins.get(id(node), where)
        for key in _UNSUPPORTED:
            if key in node:
                raise self.fail(node, path, f"{key} is not supported in a CRD schema", where)
        schema_type = node.get("type")
        if schema_type == "null":
            raise self.fail(node, path, "type cannot be null: use X | None (nullable)", where)
        if schema_type is not None and schema_type not in _TYPES:
            raise self.fail(
                node, path, f"type {schema_type!r} is not one of {', '.join(_TYPES)}", where
            )
        int_or_string = node.get("x-kubernetes-int-or-string") is True
        preserve = node.get("x-kubernetes-preserve-unknown-fields")
        embedded = node.get("x-kubernetes-embedded-resource") is True
        if preserve is not None and preserve is not True:
            raise self.fail(
                node, path, "x-kubernetes-preserve-unknown-fields must be true or absent", where
            )
        if embedded and schema_type != "object":
            raise self.fail(
                node, path, "x-kubernetes-embedded-resource must be on an object", where
            )
        if schema_type is None and not int_or_string and preserve is not True:
            what = {"item": "list items", "field": "object fields"}.get(level, "the root")
            raise self.fail(node, path, f"type must not be empty for {what}", where)
        if int_or_string and preserve:
            raise self.fail(
                node,
                path,
                "x-kubernetes-preserve-unknown-fields must be false if "
                "x-kubernetes-int-or-string is true",
                where,
            )
        if int_or_string and embedded:
            raise self.fail(
                node,
                path,
                "x-kubernetes-embedded-resource must be false if x-kubernetes-int-or-string "
                "is true",
                where,
            )
        if node.get("uniqueItems") is True:
            raise self.fail(
                node,
                path,
                'uniqueItems cannot be true (quadratic); use ListType("set")',
                where,
            )
        properties = _mapping(node.get("properties"))
        additional = node.get("additionalProperties")
        if additional is not None and properties and additional is not True:
            raise self.fail(
                node, path, "additionalProperties and properties are mutually exclusive", where
            )
        if embedded:
            if additional is not None:
                raise self.fail(
                    node, path, "an embedded resource cannot have additionalProperties", where
                )
            if not properties and preserve is not True:
                raise self.fail(
                    node,
                    path,
                    "an embedded resource needs properties or x-kubernetes-preserve-unknown-fields",
                    where,
                )
            self.resource_meta(node, path, where)
        if "pattern" in node:
            _pattern(node["pattern"], lambda m: self.fail(node, path, m, where))
        self.junctors(node, path, where, int_or_string=int_or_string)
        self.map_type(node, path, where)
        self.list_type(node, path, where)
        self.validations(node, path, where)
        if "default" in node:
            problem = _default_problem(node["default"], node, path)
            if problem:
                raise self.fail(node, path, f"the default {node['default']!r} {problem}", where)
        if schema_type == "array" or "items" in node:
            items = node.get("items")
            if items is None:
                raise self.fail(node, path, "a list needs items", where)
            if not isinstance(items, dict):
                raise self.fail(node, path, "items must be one schema, not a list", where)
            self.node(items, f"{path}[*]", where, level="item")
        if isinstance(additional, dict):
            self.node(additional, f"{path}[*]", where, level="field")
        for name, child in properties.items():
            if not isinstance(child, dict):
                raise self.fail(node, f"{path}.{name}", "a property's schema is an object", where)
            self.node(child, f"{path}.{name}", where, level="field")

    def junctors(self, node: Node, path: str, where: Where, *, int_or_string: bool) -> None:
        """``anyOf``, ``allOf``, ``oneOf``, ``not``: value validations of fields the node
        itself specifies (kube's completeness), and ``int | str``'s own ``anyOf``."""
        nested: list[tuple[str, JSONValue]] = []
        for key in ("anyOf", "allOf", "oneOf"):
            value = node.get(key)
            if value is None:
                continue
            if not isinstance(value, list):
                raise self.fail(node, path, f"{key} is a list of schemas", where)
            if key == "anyOf" and int_or_string and value == _INT_OR_STRING:
                continue
            nested.extend((f"{key}[{i}]", v) for i, v in enumerate(value))
        if "not" in node:
            nested.append(("not", node["not"]))
        for label, sub in nested:
            if not isinstance(sub, dict):
                raise self.fail(node, path, f"{label} must be a schema", where)
            self.value_validation(sub, node, path, label, where)

    def value_validation(
        self, value: Node, outer: Node, path: str, label: str, where: Where
    ) -> None:
        wrong = sorted(set(value) - _VALUE_VALIDATIONS)
        if wrong:
            raise self.fail(
                outer,
                path,
                f"{label} may hold value validations only, not {', '.join(wrong)} "
                "(they must be empty to be structural)",
                where,
            )
        properties = _mapping(value.get("properties"))
        if "metadata" in properties:
            raise self.fail(
                outer, path, f"{label}: metadata must not be specified in a nested context", where
            )
        specified = _mapping(outer.get("properties"))
        for name, child in properties.items():
            if name not in specified:
                raise self.fail(
                    outer,
                    path,
                    f"{label}: property {name!r} must also be specified outside of the value "
                    "validations (in properties)",
                    where,
                )
            if isinstance(child, dict):
                self.value_validation(
                    child, _mapping(specified[name]), f"{path}.{name}", label, where
                )
        if "items" in value:
            if not isinstance(outer.get("items"), dict):
                raise self.fail(
                    outer, path, f"{label}: items must also be specified outside", where
                )
            inner = value["items"]
            if isinstance(inner, dict):
                self.value_validation(inner, _mapping(outer["items"]), f"{path}[*]", label, where)
        for key in ("anyOf", "allOf", "oneOf"):
            subs = value.get(key)
            for i, sub in enumerate(subs if isinstance(subs, list) else []):
                if isinstance(sub, dict):
                    self.value_validation(sub, outer, path, f"{label}.{key}[{i}]", where)
        sub_not = value.get("not")
        if isinstance(sub_not, dict):
            self.value_validation(sub_not, outer, path, f"{label}.not", where)

    def map_type(self, node: Node, path: str, where: Where) -> None:
        map_type = node.get("x-kubernetes-map-type")
        if map_type is None:
            return
        if node.get("type") != "object":
            raise self.fail(node, path, "x-kubernetes-map-type is for objects", where)
        if map_type not in ("atomic", "granular"):
            raise self.fail(node, path, 'x-kubernetes-map-type is "atomic" or "granular"', where)

    def list_type(self, node: Node, path: str, where: Where) -> None:
        list_type = node.get("x-kubernetes-list-type")
        keys = node.get("x-kubernetes-list-map-keys")
        if keys is not None and list_type != "map":
            raise self.fail(
                node, path, "x-kubernetes-list-map-keys needs x-kubernetes-list-type map", where
            )
        if list_type is None:
            return
        if node.get("type") != "array":
            raise self.fail(node, path, "x-kubernetes-list-type is for lists", where)
        if list_type not in ("atomic", "set", "map"):
            raise self.fail(node, path, 'x-kubernetes-list-type is "atomic", "set" or "map"', where)
        items = _mapping(node.get("items"))
        if list_type in ("set", "map") and items.get("nullable"):
            raise self.fail(
                node, path, f"the items of a {list_type} list cannot be nullable (X | None)", where
            )
        if list_type == "set":
            if items.get("type") == "array" and items.get("x-kubernetes-list-type", "atomic") != (
                "atomic"
            ):
                raise self.fail(node, path, "the lists in a set list must be atomic lists", where)
            if items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
                raise self.fail(
                    node,
                    path,
                    'the objects in a set list must be atomic: MapType("atomic") on the item type',
                    where,
                )
        if list_type != "map":
            return
        if not isinstance(keys, list) or not keys:
            raise self.fail(node, path, "a map list needs x-kubernetes-list-map-keys", where)
        if items.get("type") != "object":
            raise self.fail(node, path, "the items of a map list must be objects", where)
        properties = _mapping(items.get("properties"))
        required = items.get("required") or []
        if len(set(map(str, keys))) != len(keys):
            raise self.fail(node, path, "x-kubernetes-list-map-keys names a key twice", where)
        for key in keys:
            if not isinstance(key, str) or key not in properties:
                raise self.fail(
                    node, path, f"the map list's key {key!r} is not a field of its items", where
                )
            key_schema = _mapping(properties[key])
            if key_schema.get("type") in ("array", "object"):
                raise self.fail(
                    node, path, f"the map list's key {key!r} must be a scalar field", where
                )
            if key not in required and "default" not in key_schema:  # type: ignore[operator]
                raise self.fail(
                    node,
                    path,
                    f"the map list's key {key!r} must be a required field or have a Default",
                    where,
                )
            if key_schema.get("nullable"):
                raise self.fail(node, path, f"the map list's key {key!r} cannot be nullable", where)

    def validations(self, node: Node, path: str, where: Where) -> None:
        entries = node.get("x-kubernetes-validations")
        if entries is None:
            return
        if not isinstance(entries, list):
            raise self.fail(node, path, "x-kubernetes-validations is a list of rules", where)
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("rule"), str):
                raise self.fail(node, path, f"{entry!r} is not a rule ({{'rule': ...}})", where)
            rule = str(entry["rule"]).strip()
            message = entry.get("message")
            problem = None
            if not rule:
                problem = "the rule is empty"
            elif message is not None and (not isinstance(message, str) or not message.strip()):
                problem = "message must be non-empty if given"
            elif isinstance(message, str) and _NEWLINE.search(message.strip()):
                problem = "message must not contain line breaks"
            elif _NEWLINE.search(rule) and not (isinstance(message, str) and message.strip()):
                problem = "a rule spanning lines needs a message"
            elif "reason" in entry and entry["reason"] not in RULE_REASONS:
                problem = (
                    f"reason {entry['reason']!r} is not one of {', '.join(sorted(RULE_REASONS))}"
                )
            if problem:
                raise self.fail(node, path, f"rule {rule!r}: {problem}", where)


_INT_OR_STRING: Final[list[JSONValue]] = [{"type": "integer"}, {"type": "string"}]


def _pattern(pattern: object, fail: _Fail) -> None:
    if not isinstance(pattern, str):
        raise fail(f"pattern {pattern!r} is not a string")
    try:
        re.compile(pattern)
    except re.error as err:
        raise fail(f"pattern {pattern!r} is not a regular expression: {err}") from None
    if _RE2_UNSUPPORTED.search(pattern):
        raise fail(
            f"pattern {pattern!r} uses syntax Go's RE2 lacks (lookarounds, backreferences, "
            "possessive or atomic groups, \\A/\\Z): kube-apiserver could not compile it"
        )


def _mapping(value: object) -> Node:
    return value if isinstance(value, dict) else {}


# -- defaults ------------------------------------------------------------------------------------


def _default_problem(value: JSONValue, schema: Node, path: str) -> str | None:
    """Why ``value`` is not a valid, pruned value of ``schema`` (``None`` when it is)."""
    if value is None:
        if schema.get("nullable") is True or _is_any(schema):
            return None
        return "is null, but the field is not nullable (X | None)"
    if schema.get("x-kubernetes-int-or-string") is True and (
        isinstance(value, bool) or not isinstance(value, int | str)
    ):
        return "is neither an integer nor a string"
    schema_type = schema.get("type")
    checks = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    if isinstance(schema_type, str) and schema_type in checks and not checks[schema_type](value):
        return f"is not of type {schema_type}"
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        return f"is not one of {enum!r}"
    problem = _bounds_problem(value, schema)
    if problem:
        return problem
    if isinstance(value, list):
        items = schema.get("items")
        for i, item in enumerate(value):
            if isinstance(items, dict):
                problem = _default_problem(item, items, f"{path}[{i}]")
                if problem:
                    return f"has an item [{i}] that {problem}"
    if isinstance(value, dict):
        return _object_default_problem(value, schema, path)
    return None


def _object_default_problem(value: dict[str, JSONValue], schema: Node, path: str) -> str | None:
    properties = _mapping(schema.get("properties"))
    additional = schema.get("additionalProperties")
    for name in _strings(schema.get("required")):
        if name not in value:
            return f"lacks the required field {name!r}"
    for name, item in value.items():
        if name in properties:
            child = _mapping(properties[name])
        elif isinstance(additional, dict):
            child = additional
        elif additional is True or schema.get("x-kubernetes-preserve-unknown-fields") is True:
            continue
        else:
            return f"has the unknown field {name!r} (kube prunes it: a default must not have one)"
        problem = _default_problem(item, child, f"{path}.{name}")
        if problem:
            return f"has a field {name!r} that {problem}"
    return None


def _bounds_problem(value: JSONValue, schema: Node) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        minimum, maximum = schema.get("minimum"), schema.get("maximum")
        exclusive_min = schema.get("exclusiveMinimum") is True
        exclusive_max = schema.get("exclusiveMaximum") is True
        if isinstance(minimum, int | float) and (
            value < minimum or (exclusive_min and value == minimum)
        ):
            return f"is below the minimum {minimum}"
        if isinstance(maximum, int | float) and (
            value > maximum or (exclusive_max and value == maximum)
        ):
            return f"is above the maximum {maximum}"
        step = schema.get("multipleOf")
        if (
            isinstance(step, int | float)
            and step
            and not math.isclose(value / step, round(value / step))
        ):
            return f"is not a multiple of {step}"
    for kind, (low, high) in (
        (str, ("minLength", "maxLength")),
        (list, ("minItems", "maxItems")),
        (dict, ("minProperties", "maxProperties")),
    ):
        if isinstance(value, kind):
            size = len(value)
            least, most = schema.get(low), schema.get(high)
            if isinstance(least, int) and size < least:
                return f"is shorter than {low} {least}"
            if isinstance(most, int) and size > most:
                return f"is longer than {high} {most}"
    pattern = schema.get("pattern")
    if isinstance(value, str) and isinstance(pattern, str) and not re.search(pattern, value):
        return f"does not match the pattern {pattern!r}"
    return None


def _is_any(schema: Node) -> bool:
    return "type" not in schema and schema.get("x-kubernetes-preserve-unknown-fields") is True


def _strings(value: object) -> Sequence[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


if TYPE_CHECKING:
    from typing import Protocol

    class _Fail(Protocol):
        def __call__(self, message: str, /) -> StructuralSchemaError: ...
