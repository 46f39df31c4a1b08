"""The paths a custom resource's declaration points into its own schema with: printer
columns and the scale subresource. Private to :mod:`kubereflector.models`.

A path of plain fields (``.spec.replicas``) is followed through the schema: a field that
is not there is a typo, refused with :class:`~.errors.StructuralSchemaError`; a
field of the wrong type too (the scale subresource's replicas are integers). A path the
walk cannot follow (a JSONPath filter, a map's values, fields kept unknown) is left to
the server.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from .errors import StructuralSchemaError, Where

if TYPE_CHECKING:
    from ..crd import CustomResourceVersion
    from .schema import Node

__all__ = ["check_paths", "column_type"]

_PLAIN: Final = re.compile(r"(\.[A-Za-z_$][-A-Za-z0-9_$]*)+\Z")
_METADATA: Final = {
    "creationTimestamp": "date",
    "deletionTimestamp": "date",
    "generation": "integer",
    "deletionGracePeriodSeconds": "integer",
}
"""The types of ``metadata``'s fields a column may show (any other is a ``string``)."""


class _Unknown:
    """A path the walk cannot follow."""


_UNKNOWN: Final = _Unknown()


def _follow(path: str, schema: Node) -> Node | _Unknown | None:
    """The schema node at ``path``; ``None`` when a field on the way does not exist."""
    if not _PLAIN.match(path):
        return _UNKNOWN
    node: Node = schema
    for name in path.split(".")[1:]:
        properties = node.get("properties")
        if isinstance(properties, dict) and name in properties:
            child = properties[name]
            node = child if isinstance(child, dict) else {}
            continue
        if (
            node.get("x-kubernetes-preserve-unknown-fields") is True
            or "additionalProperties" in node
        ):
            return _UNKNOWN
        return None
    return node


def column_type(path: str, schema: Node) -> str:
    """A printer column's ``type``, read from the schema at ``path``."""
    if path.startswith(".metadata."):
        return _METADATA.get(path.removeprefix(".metadata."), "string")
    node = _follow(path, schema)
    if not isinstance(node, dict):
        return "string"
    schema_type = node.get("type")
    if schema_type == "string" and node.get("format") in ("date-time", "datetime"):
        return "date"
    if schema_type in ("integer", "number", "boolean", "string"):
        return str(schema_type)
    return "string"


def check_paths(version: CustomResourceVersion, schema: Node, root: Where) -> None:
    """Check that the printer columns and the scale subresource of ``version`` point at
    fields of ``schema`` of the right type. Raises :class:`StructuralSchemaError`."""
    for column in version.printer_columns:
        if not column.json_path.startswith(".metadata."):
            _expect(schema, column.json_path, None, f"PrinterColumn({column.name!r})", root)
    scale = version.scale
    if scale is None:
        return
    for path, wanted, setting in (
        (scale.spec_replicas_path, "integer", "spec_replicas_path"),
        (scale.status_replicas_path, "integer", "status_replicas_path"),
        (scale.label_selector_path, "string", "label_selector_path"),
    ):
        if path is not None:
            _expect(schema, path, wanted, f"ScaleSubresource {setting}", root)


def _expect(schema: Node, path: str, wanted: str | None, what: str, root: Where) -> None:
    node = _follow(path, schema)
    if node is None:
        raise _error(root, f"{what} names {path}, a field {root.root.__name__} does not have")
    if isinstance(node, dict) and wanted is not None and node.get("type") != wanted:
        found = node.get("type") or "untyped"
        raise _error(root, f"{what} names {path}, a field of type {found}, not {wanted}")


def _error(root: Where, message: str) -> StructuralSchemaError:
    return root.error(message)
