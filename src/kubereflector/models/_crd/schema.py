"""From Python types to a custom resource's structural schema. Private to
:mod:`kubereflector.models`; :mod:`kubereflector.models.crd` is the way in.

A walk over the ``TypedDict`` classes of a custom resource, field by field, that writes
the OpenAPI v3 schema kube-apiserver wants: every object inlined (no ``$ref``), a
``type`` on every node, ``nullable`` for ``X | None``, ``x-kubernetes-int-or-string``
for ``int | str``, unions of anything else refused, ``metadata`` left to the server at
the root. msgspec's ``Meta`` gives the constraints; the markers of
:mod:`.markers` the rest. A type that cannot be a structural schema raises
:class:`StructuralSchemaError` naming the class and the field. The result is then
checked against kube's rules as a whole (:mod:`.rules`).

Why not ``msgspec.json.schema``: it writes JSON Schema 2020-12 (``$ref`` to ``$defs``,
``anyOf`` for every union, ``enum`` without ``type``), which would have to be rewritten
node by node anyway, and it drops ``Annotated`` metadata other than ``Meta`` (several CEL
rules on one field could only ride along as merged dicts, one overwriting the other).
Its ``Meta`` is used as it is: the same annotation gives msgspec's run-time checks
(``msgspec.convert(obj, Foo)``) and the server's.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import threading
import types
import typing
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Final, Literal, NewType, get_args, get_origin

import msgspec
import typing_extensions
from typing_extensions import (
    NotRequired,
    Required,
    get_type_hints,
    is_typeddict,
)

from .docs import class_description, field_descriptions
from .errors import Where
from .markers import (
    Default,
    EmbeddedResource,
    Format,
    ListType,
    MapType,
    PreserveUnknownFields,
    Rule,
    class_rules,
)

if TYPE_CHECKING:
    from .._json import JSONValue

_READ_ONLY: Final = getattr(typing_extensions, "ReadOnly", None)
"""PEP 705's ``ReadOnly`` (typing_extensions 4.9 and later; the package asks for 4.6)."""

__all__ = ["Node", "object_schema"]

Node = dict[str, "JSONValue"]
"""One node of a schema being written: a JSON object."""

QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""kube's pattern for a resource quantity (``500m``, ``1Gi``), as controller-gen writes it."""

_ROOT_DESCRIPTIONS: Final = {
    "apiVersion": "APIVersion defines the versioned schema of this representation of an object. "
    "Servers should convert recognized schemas to the latest internal value, and may reject "
    "unrecognized values. More info: https://git.k8s.io/community/contributors/devel/"
    "sig-architecture/api-conventions.md#resources",
    "kind": "Kind is a string value representing the REST resource this object represents. "
    "Servers may infer this from the endpoint the client submits requests to. Cannot be "
    "updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/"
    "sig-architecture/api-conventions.md#types-kinds",
}
"""What controller-gen writes for ``apiVersion`` and ``kind`` (``metadata`` gets nothing:
kube refuses any description there)."""

_KEY_ORDER: Final = (
    "description",
    "title",
    "type",
    "format",
    "enum",
    "default",
    "example",
    "nullable",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "anyOf",
    "items",
    "properties",
    "required",
    "additionalProperties",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
)
"""The order keys are written in (what ``kubectl get crd -o yaml`` shows first first)."""

_UNION_TYPES: Final = (types.UnionType, typing.Union)
_NONE: Final = type(None)
_SCALARS: Final[dict[type, str]] = {bool: "boolean", int: "integer", float: "number", str: "string"}
_HINTS: Final[dict[type, str]] = {
    datetime.datetime: 'str with Format("date-time") (objects hold the text, not a datetime)',
    datetime.date: 'str with Format("date")',
    datetime.timedelta: 'str with Format("duration")',
    bytes: 'str with Format("byte") (base64 text)',
    bytearray: 'str with Format("byte") (base64 text)',
    uuid.UUID: 'str with Format("uuid")',
    decimal.Decimal: "float, or str with a pattern",
    set: 'list[...] with ListType("set")',
    frozenset: 'list[...] with ListType("set")',
    tuple: "list[...] (JSON has no tuples)",
    object: "JSONValue (any JSON value, kept as it is)",
}


@dataclass
class _Field:
    """What ``Annotated`` said of a type: msgspec's constraints and our markers."""

    metas: list[msgspec.Meta]
    defaults: list[Default]
    formats: list[Format]
    list_types: list[ListType]
    map_types: list[MapType]
    rules: list[Rule]
    preserve: bool = False
    embedded: bool = False


_lock: Final = threading.Lock()
_hints: Final[dict[type, dict[str, object]]] = {}


def object_schema(model: type) -> tuple[Node, dict[int, Where]]:
    """The structural schema of ``model``, a custom resource's ``TypedDict`` class (its
    ``openAPIV3Schema``), and where each node of it came from (by ``id``), for the errors of
    the checks that follow. Raises :class:`StructuralSchemaError`."""
    where = Where(model, model, None, "")
    if not is_typeddict(model):
        raise where.error("a custom resource is declared on a TypedDict class")
    walk = _Walk(where)
    node = walk.root(model)
    walk.origins[id(node)] = where
    return node, walk.origins


class _Walk:
    """One walk over a custom resource's types (knows the classes it is inside of)."""

    def __init__(self, where: Where) -> None:
        self.where = where
        self.inside: list[type] = []
        self.origins: dict[int, Where] = {}

    # -- objects ---------------------------------------------------------------------------

    def root(self, model: type) -> Node:
        hints = _type_hints(model, self.where)
        properties: Node = {}
        for name, hint in hints.items():
            where = self.where.at(model, name)
            if name in ("apiVersion", "kind"):
                _string_field(_strip_required(hint), where)
                properties[name] = {"description": _ROOT_DESCRIPTIONS[name], "type": "string"}
            elif name == "metadata":
                _object_meta_field(_strip_required(hint), where)
                properties[name] = {"type": "object"}
        self.inside.append(model)
        node = self.typed_dict(model, self.where, skip=("apiVersion", "kind", "metadata"))
        self.inside.pop()
        node["properties"] = {**properties, **_dict(node.get("properties"))}
        if not node["properties"]:
            del node["properties"]
        return _ordered(node)

    def typed_dict(self, cls: type, where: Where, *, skip: tuple[str, ...] = ()) -> Node:
        """An object with the fields of ``cls``."""
        hints = _type_hints(cls, where)
        docs = field_descriptions(cls)
        properties: Node = {}
        required: list[JSONValue] = []
        for name, hint in hints.items():
            if name in skip:
                continue
            field_where = where.at(cls, name)
            wrapped, is_required = _required(cls, name, hint)
            properties[name] = self.schema(wrapped, field_where, doc=docs.get(name))
            if is_required:
                required.append(name)
        node: Node = {"type": "object"}
        description = class_description(cls)
        if description is not None:
            node["description"] = description
        if properties:
            node["properties"] = properties
        if required:
            node["required"] = required
        cel: list[JSONValue] = [r.to_json() for r in class_rules(cls)]
        if cel:
            node["x-kubernetes-validations"] = cel
        return node

    # -- any type ----------------------------------------------------------------------------

    def schema(self, hint: object, where: Where, *, doc: str | None = None) -> Node:
        """The schema of one annotation (``Annotated`` and ``| None`` included); ``doc``, the
        field's docstring, describes it (unless ``Meta(description=...)`` does)."""
        hint, found = _annotations(hint, where)
        hint, nullable = _without_none(hint)
        node = self.bare(hint, where, found)
        if doc:
            node["description"] = doc  # the field's words before its type's
        if nullable and ("type" in node or "x-kubernetes-int-or-string" in node):
            node["nullable"] = True  # (JSONValue holds None already)
        _apply(node, found, where)
        node = _ordered(node)
        self.origins[id(node)] = where
        return node

    def bare(self, hint: object, where: Where, found: _Field) -> Node:
        """The schema of a type stripped of ``Annotated`` and ``None``."""
        hint = _supertype(hint)
        origin = get_origin(hint)
        if isinstance(hint, type) and hint in _SCALARS:
            return {"type": _SCALARS[hint]}
        if _is_json_value(hint):
            return {"x-kubernetes-preserve-unknown-fields": True}
        if origin in _UNION_TYPES:
            return _union(get_args(hint), where)
        if origin is Literal:
            return _literal(get_args(hint), where)
        if origin is list:
            (item,) = get_args(hint)
            return {"type": "array", "items": self.schema(item, where.item())}
        if origin is dict:
            key, value = get_args(hint)
            if _supertype(key) is not str and not _is_str_literal(key):
                raise where.error(f"a map's keys are strings in JSON, not {_name(key)}")
            if _is_json_value(value):
                return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            return {
                "type": "object",
                "additionalProperties": self.schema(value, where.item()),
            }
        if isinstance(hint, type) and is_typeddict(hint):
            return self.object(hint, where, found)
        raise where.error(_refusal(hint))

    def object(self, cls: type, where: Where, found: _Field) -> Node:
        if cls in self.inside:
            chain = " -> ".join(c.__name__ for c in (*self.inside, cls))
            raise where.error(
                f"{cls.__name__} contains itself ({chain}): a structural schema is "
                "finite; type the recursive field JSONValue (kept as it is) instead"
            )
        if found.embedded and cls.__name__ == "ObjectMeta":
            raise where.error("ObjectMeta is not a resource: EmbeddedResource() goes on one")
        self.inside.append(cls)
        try:
            if found.embedded:
                return self.embedded(cls, where)
            return self.typed_dict(cls, where)
        finally:
            self.inside.pop()

    def embedded(self, cls: type, where: Where) -> Node:
        """A whole Kubernetes object inside this one: its own ``metadata`` is the server's."""
        hints = _type_hints(cls, where)
        if "metadata" in hints:
            _object_meta_field(_strip_required(hints["metadata"]), where.at(cls, "metadata"))
        node = self.typed_dict(cls, where, skip=("metadata",))
        properties = _dict(node.setdefault("properties", {}))
        if "metadata" in hints:
            properties["metadata"] = {"type": "object"}
        return node


# -- the pieces ----------------------------------------------------------------------------------


def _type_hints(cls: type, where: Where) -> dict[str, object]:
    """``cls``'s field annotations, ``Annotated`` kept; cached per class."""
    with _lock:
        known = _hints.get(cls)
    if known is not None:
        return known
    try:
        hints: dict[str, object] = get_type_hints(cls, include_extras=True)
    except NameError as err:
        raise where.error(
            f"cannot resolve the annotations of {cls.__qualname__}: {err} (a class it "
            "names is not defined at module level, or not yet)"
        ) from err
    with _lock:
        _hints[cls] = hints
    return hints


def _required(cls: type, name: str, hint: object) -> tuple[object, bool]:
    """A field's annotation without ``Required``/``NotRequired``/``ReadOnly``, and whether the
    field is required. Under ``from __future__ import annotations`` the class cannot see the
    wrappers when it is made, so they are read here; without one, the class's totality."""
    required: bool | None = None
    while True:
        origin = get_origin(hint)
        if origin is Required:
            required = True
        elif origin is NotRequired:
            required = False
        elif origin is not _READ_ONLY or origin is None:
            break
        (hint,) = get_args(hint)
    if required is None:
        required = name in getattr(cls, "__required_keys__", frozenset())
    return hint, required


def _strip_required(hint: object) -> object:
    while get_origin(hint) in (Required, NotRequired) or (
        _READ_ONLY is not None and get_origin(hint) is _READ_ONLY
    ):
        (hint,) = get_args(hint)
    return hint


def _annotations(hint: object, where: Where) -> tuple[object, _Field]:
    found = _Field([], [], [], [], [], [])
    while get_origin(hint) is Annotated:
        base, *extras = get_args(hint)
        for extra in extras:
            if isinstance(extra, msgspec.Meta):
                found.metas.append(extra)
            elif isinstance(extra, Default):
                found.defaults.append(extra)
            elif isinstance(extra, Format):
                found.formats.append(extra)
            elif isinstance(extra, ListType):
                found.list_types.append(extra)
            elif isinstance(extra, MapType):
                found.map_types.append(extra)
            elif isinstance(extra, Rule):
                found.rules.append(extra)
            elif isinstance(extra, PreserveUnknownFields):
                found.preserve = True
            elif isinstance(extra, EmbeddedResource):
                found.embedded = True
            elif extra in (msgspec.Meta, PreserveUnknownFields, EmbeddedResource):
                raise where.error(f"write {_name(extra)}() (an instance), not the class")
            # Anything else is another tool's metadata: not ours to judge.
        hint = base
    for kind, items in (
        ("Default", found.defaults),
        ("Format", found.formats),
        ("ListType", found.list_types),
        ("MapType", found.map_types),
    ):
        if len(items) > 1:
            raise where.error(f"{kind} is given {len(items)} times")
    return hint, found


def _without_none(hint: object) -> tuple[object, bool]:
    """``X | None`` -> ``(X, True)``; ``JSONValue`` is left whole (it holds ``None``)."""
    if get_origin(hint) in _UNION_TYPES and not _is_json_value(hint):
        args = get_args(hint)
        if _NONE in args:
            rest = tuple(a for a in args if a is not _NONE)
            return (rest[0] if len(rest) == 1 else typing.Union[rest]), True  # noqa: UP007
    if get_origin(hint) is Literal and None in get_args(hint):
        values = tuple(v for v in get_args(hint) if v is not None)
        return Literal[values], True
    return hint, hint is _NONE


def _supertype(hint: object) -> object:
    """A ``NewType``'s base, all the way down."""
    while isinstance(hint, NewType):
        hint = hint.__supertype__
    return hint


def _is_json_value(hint: object) -> bool:
    """Whether ``hint`` is :data:`~kubereflector.models.JSONValue` (or any union holding
    every JSON type): any JSON value."""
    if get_origin(hint) not in _UNION_TYPES:
        return False
    args = get_args(hint)
    plain = {a for a in args if isinstance(a, type)}
    origins = {get_origin(a) for a in args}
    return {bool, int, float, str} <= plain and {list, dict} <= (origins | plain)


def _is_str_literal(hint: object) -> bool:
    return get_origin(hint) is Literal and all(isinstance(v, str) for v in get_args(hint))


def _union(args: tuple[object, ...], where: Where) -> Node:
    kinds = {_supertype(a) for a in args}
    if kinds == {int, str}:
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        }
    if kinds in ({str, float}, {int, str, float}):  # kubereflector.models' Quantity
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    if kinds == {int, float}:
        return {"type": "number"}
    names = " | ".join(_name(a) for a in args)
    raise where.error(
        f"{names}: a structural schema has one type per field (only int | str, the "
        "int-or-string, and X | None are unions it knows); declare one TypedDict with the "
        "fields of each as NotRequired, and a CEL Rule choosing between them"
    )


def _literal(values: tuple[object, ...], where: Where) -> Node:
    for schema_type, python_types in (
        ("boolean", (bool,)),
        ("string", (str,)),
        ("integer", (int,)),
        ("number", (int, float)),
    ):
        if all(type(v) in python_types for v in values):
            return {"type": schema_type, "enum": [_json(v, where) for v in values]}
    shown = ", ".join(repr(v) for v in values)
    raise where.error(f"Literal[{shown}]: an enum's values are of one JSON type")


def _string_field(hint: object, where: Where) -> None:
    if get_origin(hint) is Annotated:
        raise where.error(f"{where.field} takes no constraints: kube-apiserver owns it")
    if _supertype(hint) is not str and not _is_str_literal(hint):
        raise where.error(f"{where.field} is a string (str), not {_name(hint)}")


def _object_meta_field(hint: object, where: Where) -> None:
    hint, found = _annotations(hint, where)
    name = getattr(hint, "__name__", "")
    if not (isinstance(hint, type) and is_typeddict(hint) and name == "ObjectMeta"):
        raise where.error(
            "metadata is kubereflector.models.meta_v1.ObjectMeta (kube-apiserver owns its "
            f"schema), not {_name(hint)}"
        )
    if found.metas or found.defaults or found.rules or found.formats:
        raise where.error(
            "metadata takes no constraints here; check the name with a Rule on the object "
            '(Rule("self.metadata.name.size() <= 63"))'
        )


def _refusal(hint: object) -> str:
    if hint is typing.Any:
        return "Any cannot be a structural schema: use JSONValue (any JSON value, kept as it is)"
    origin = get_origin(hint)
    if isinstance(origin, type) and origin in _HINTS:
        return f"{_name(hint)} is not a JSON type: use {_HINTS[origin]}"
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return (
                f"{_name(hint)} is an Enum; objects hold the JSON value: use Literal[...] "
                "of the values"
            )
        if hint in _HINTS:
            return f"{_name(hint)} is not a JSON type: use {_HINTS[hint]}"
        if hint in (list, dict):
            return f"{_name(hint)} needs its item type: list[str], dict[str, int]"
        return (
            f"{_name(hint)} is not a TypedDict: the models are TypedDicts over the JSON "
            "objects (a dataclass or a Struct would be a second object model)"
        )
    return f"{_name(hint)} cannot be a structural schema"


def _name(hint: object) -> str:
    if isinstance(hint, type) and not get_args(hint):
        return hint.__qualname__
    return repr(hint).replace("typing.", "").replace("typing_extensions.", "")


# -- constraints -----------------------------------------------------------------------------------

_NUMERIC: Final = ("integer", "number")
_LENGTH_KEYS: Final = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}
_NUMERIC_FORMATS: Final = {
    "int32": "integer",
    "int64": "integer",
    "float": "number",
    "double": "number",
}


def _apply(node: Node, found: _Field, where: Where) -> None:
    """Write ``Annotated``'s constraints and markers into ``node``, checking each fits."""
    schema_type = node.get("type")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    for meta in found.metas:
        _apply_meta(node, meta, schema_type, int_or_string, where)
    for fmt in found.formats:
        wanted = _NUMERIC_FORMATS.get(fmt.name, "string")
        if schema_type != wanted and not (wanted == "integer" and schema_type == "number"):
            raise where.error(f"Format({fmt.name!r}) is for {_article(wanted)}, not {_what(node)}")
        node["format"] = fmt.name
    for list_type in found.list_types:
        if schema_type != "array":
            raise where.error(f"ListType is for a list, not {_what(node)}")
        node["x-kubernetes-list-type"] = list_type.type
        if list_type.keys:
            node["x-kubernetes-list-map-keys"] = list(list_type.keys)
    for map_type in found.map_types:
        if schema_type != "object":
            raise where.error(f"MapType is for a TypedDict or a dict, not {_what(node)}")
        node["x-kubernetes-map-type"] = map_type.type
    if found.preserve:
        if schema_type != "object":
            raise where.error(f"PreserveUnknownFields is for an object, not {_what(node)}")
        node["x-kubernetes-preserve-unknown-fields"] = True
    if found.embedded:
        if schema_type != "object":
            raise where.error(f"EmbeddedResource is for an object, not {_what(node)}")
        node["x-kubernetes-embedded-resource"] = True
    if found.rules:
        existing = node.get("x-kubernetes-validations")
        cel: list[JSONValue] = list(existing) if isinstance(existing, list) else []
        cel.extend(r.to_json() for r in found.rules)
        node["x-kubernetes-validations"] = cel
    for default in found.defaults:
        node["default"] = _json(default.value, where)
    for meta in found.metas:
        if meta.extra_json_schema:
            node.update(typing.cast("Node", _json(dict(meta.extra_json_schema), where)))


def _apply_meta(
    node: Node, meta: msgspec.Meta, schema_type: object, int_or_string: bool, where: Where
) -> None:
    numeric = schema_type in _NUMERIC
    for name, key, exclusive in (
        ("ge", "minimum", None),
        ("gt", "minimum", "exclusiveMinimum"),
        ("le", "maximum", None),
        ("lt", "maximum", "exclusiveMaximum"),
        ("multiple_of", "multipleOf", None),
    ):
        value = getattr(meta, name)
        if value is None:
            continue
        if not numeric:
            raise where.error(f"Meta({name}=...) is for a number, not {_what(node)}")
        node[key] = value
        if exclusive:
            node[exclusive] = True
    if meta.pattern is not None:
        if schema_type != "string" and not int_or_string:
            raise where.error(f"Meta(pattern=...) is for a string, not {_what(node)}")
        node["pattern"] = meta.pattern
    for name, index in (("min_length", 0), ("max_length", 1)):
        value = getattr(meta, name)
        if value is None:
            continue
        keys = _LENGTH_KEYS.get(schema_type) if isinstance(schema_type, str) else None
        if keys is None:
            raise where.error(
                f"Meta({name}=...) is for a string, a list or a map, not {_what(node)}"
            )
        node[keys[index]] = value
    if meta.tz is not None:
        raise where.error("Meta(tz=...) is for datetimes; objects hold date-time text")
    if meta.title is not None:
        node["title"] = meta.title
    if meta.description is not None:
        node["description"] = meta.description
    if meta.examples:
        node["example"] = _json(meta.examples[0], where)


def _what(node: Node) -> str:
    """What ``node`` is, for an error: ``an integer``, ``a list``, ``a JSON value``."""
    if node.get("x-kubernetes-int-or-string") is True:
        return "an int-or-string"
    if "type" not in node:
        return "a JSON value"
    kind = str(node["type"])
    return _article({"array": "list"}.get(kind, kind))


def _article(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _json(value: object, where: Where) -> JSONValue:
    """``value`` if it is JSON (as msgspec and ``json`` decode it), else an error."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_json(v, where) for v in value]
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _json(v, where) for k, v in value.items()}
    raise where.error(f"{value!r} is not a JSON value (lists and str-keyed dicts of scalars)")


def _dict(value: object) -> Node:
    return typing.cast("Node", value) if isinstance(value, dict) else {}


def _ordered(node: Node) -> Node:
    """``node`` with its keys in :data:`_KEY_ORDER` (others after, as given)."""
    ordered: Node = {k: node[k] for k in _KEY_ORDER if k in node}
    ordered.update((k, v) for k, v in node.items() if k not in ordered)
    return ordered
