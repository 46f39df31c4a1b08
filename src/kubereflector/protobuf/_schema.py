"""The table the decoder reads: Kubernetes' built-in kinds, their protobuf field
numbers, and what Go's ``encoding/json`` does with each field.

``_schema.json`` is generated from a Kubernetes source tree by
``tools/protobuf_schema.py`` (reflection over client-go's scheme) and loaded on
first use. Thread-safe: the table is read-only once loaded, and a message's
compiled form is built idempotently.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Final, NamedTuple, TypeAlias

__all__ = [
    "Element",
    "Field",
    "Message",
    "Shape",
    "kind_type",
    "kubernetes_release",
    "list_kind",
    "message",
]

Element: TypeAlias = "str | tuple[str, str]"
"""One value: a scalar or special type's name (``"string"``, ``"time"``, ...), or
``("message", type)``."""
Shape: TypeAlias = "Element | tuple[str, Element]"
"""A field's shape: an :data:`Element`, or ``("list", element)`` or ``("map",
element)`` (Kubernetes has no list of lists; the table has none)."""

OMIT_EMPTY: Final = 1
"""The field's JSON tag has ``omitempty``."""
POINTER: Final = 2
"""The Go field is a pointer: absent means nil."""
INLINE: Final = 4
"""An embedded struct whose fields JSON flattens into its parent."""


class Field(NamedTuple):
    """One field of a message."""

    number: int
    name: str
    """Its JSON name (empty for an inline one)."""
    flags: int
    shape: Shape


class Message(NamedTuple):
    """A Go type with a protobuf encoding."""

    name: str
    fields: tuple[Field, ...]
    """In the Go struct's order (the JSON's)."""
    by_number: dict[int, Field]
    items: Element | None
    """A named slice's element (the message is ``{repeated items = 1}`` and its
    JSON a list), or None for a struct."""


def _freeze(shape: object) -> Shape:
    if isinstance(shape, list) and len(shape) == 2 and shape[0] in ("list", "map"):
        return (shape[0], _freeze_element(shape[1]))
    return _freeze_element(shape)


def _freeze_element(shape: object) -> Element:
    if isinstance(shape, str):
        return shape
    if isinstance(shape, list) and len(shape) == 2 and shape[0] == "message":
        return ("message", str(shape[1]))
    raise ValueError(f"the protobuf schema has a shape it does not define: {shape!r}")


@functools.cache
def _table() -> dict[str, object]:
    text = resources.files(__package__).joinpath("_schema.json").read_text(encoding="utf-8")
    table: dict[str, object] = json.loads(text)
    return table


def kubernetes_release() -> str:
    """The Kubernetes release the table was generated from (``v1.28.7``)."""
    return str(_table()["kubernetes"])


def kind_type(api_version: str, kind: str) -> str | None:
    """The type name of ``kind`` in ``api_version`` (``"v1"``, ``"apps/v1"``), or
    None when the table has no protobuf for it (a custom resource, say)."""
    kinds = _table()["kinds"]
    assert isinstance(kinds, dict)
    name = kinds.get(f"{api_version}/{kind}")
    return name if isinstance(name, str) else None


def list_kind(api_version: str, resource: str) -> str | None:
    """The list kind of ``resource`` (a plural name) in ``api_version`` when the
    table has protobuf for it (``"v1"``, ``"pods"`` -> ``"PodList"``), else None."""
    resources = _table()["resources"]
    assert isinstance(resources, dict)
    kind = resources.get(f"{api_version}/{resource}")
    return kind if isinstance(kind, str) and kind_type(api_version, kind) else None


@functools.cache
def message(name: str) -> Message:
    """The message ``name`` (a type name from the table). Raises ``KeyError`` for
    a name the table does not have."""
    types = _table()["types"]
    assert isinstance(types, dict)
    entry = types[name]
    if isinstance(entry, dict):
        return Message(name, (), {}, _freeze_element(entry["items"]))
    fields = tuple(
        Field(int(number), str(json_name), int(flags), _freeze(shape))
        for number, json_name, flags, shape in entry
    )
    return Message(name, fields, {f.number: f for f in fields}, None)
