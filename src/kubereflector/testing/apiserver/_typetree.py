"""How the fields of a kind merge, place by place: the list types, map keys and map
types that server-side apply follows, and the patch strategies and merge keys of
strategic merge patch. For built-in kinds from the generated OpenAPI metadata
(:mod:`._builtin_schemas`); for custom resources from their CRD's structural schema
(``x-kubernetes-list-type``, ``x-kubernetes-list-map-keys``,
``x-kubernetes-map-type``), with ObjectMeta's own rules for ``metadata``.

Private to :mod:`kubereflector.testing.apiserver`. Immutable values; no I/O.

Walk from :func:`kind_root` or :func:`schema_root` with :meth:`TypeNode.field` (a
field of an object, or a value of a map) and :meth:`TypeNode.item` (an item of a
list). A place nothing is known of is :data:`UNKNOWN`: its lists are atomic and
replaced, its maps granular, as kube treats values without metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ._builtin_schemas import FIELDS, KINDS, MAP_TYPES, Field

__all__ = ["UNKNOWN", "TypeNode", "kind_root", "schema_root"]

_OBJECT_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


class TypeNode:
    """One place in a kind's tree of values (immutable).

    ``list_type`` (``"atomic"``, ``"set"``, ``"map"``, or ``""`` for atomic),
    ``keys`` and ``key_defaults`` describe a list there; ``atomic_map`` whether a map
    or object there is one value; ``patch_strategy`` and ``merge_key`` what strategic
    merge patch does with it (``"merge"``, ``"retainKeys"``, ``"replace"``...)."""

    __slots__ = (
        "_field",
        "_schema",
        "_schema_resource",
        "_type",
        "atomic_map",
        "key_defaults",
        "keys",
        "list_type",
        "merge_key",
        "patch_strategy",
    )

    def __init__(
        self,
        *,
        field: Field | None = None,
        definition: str = "",
        schema: Mapping[str, Any] | None = None,
        resource: bool = False,
    ) -> None:
        self._field = field
        self._type = definition
        self._schema = schema
        self._schema_resource = resource if schema is not None else False
        self.list_type = ""
        self.keys: tuple[str, ...] = ()
        self.key_defaults: Mapping[str, Any] = {}
        self.atomic_map = False
        self.patch_strategy = ""
        self.merge_key = ""
        if field is not None:
            self.list_type = field.list_type
            self.keys = field.list_map_keys
            self.key_defaults = dict(field.key_defaults)
            self.patch_strategy = field.patch_strategy
            self.merge_key = field.patch_merge_key
            self.atomic_map = field.map_type == "atomic" or (
                field.container != "list"
                and field.map_type != "granular"
                and MAP_TYPES.get(field.type) == "atomic"
            )
        elif definition:
            self.atomic_map = MAP_TYPES.get(definition) == "atomic"
        if schema is not None:
            list_type = schema.get("x-kubernetes-list-type")
            self.list_type = list_type if isinstance(list_type, str) else ""
            self.keys = tuple(str(k) for k in schema.get("x-kubernetes-list-map-keys") or ())
            items = schema.get("items")
            item_properties = items.get("properties") if isinstance(items, Mapping) else None
            if isinstance(item_properties, Mapping):
                self.key_defaults = {
                    k: item_properties[k]["default"]
                    for k in self.keys
                    if isinstance(item_properties.get(k), Mapping)
                    and "default" in item_properties[k]
                }
            self.atomic_map = schema.get("x-kubernetes-map-type") == "atomic"

    def field(self, name: str) -> TypeNode:
        """The place of field ``name`` of the object here (or of a value of the map here)."""
        if self._schema is not None:
            return self._schema_field(name)
        field = self._field
        if field is not None and field.container == "map":
            return TypeNode(definition=field.type) if field.type else UNKNOWN
        if field is not None and field.container == "list":
            return UNKNOWN
        definition = field.type if field is not None else self._type
        child = FIELDS.get(definition, {}).get(name) if definition else None
        if child is None:
            return UNKNOWN
        return TypeNode(field=child, definition=child.type)

    def _schema_field(self, name: str) -> TypeNode:
        schema = self._schema
        assert schema is not None
        if name == "metadata" and (
            self._schema_resource or schema.get("x-kubernetes-embedded-resource")
        ):
            return TypeNode(definition=_OBJECT_META)
        properties = schema.get("properties")
        sub = properties.get(name) if isinstance(properties, Mapping) else None
        if not isinstance(sub, Mapping):
            sub = schema.get("additionalProperties")
        return TypeNode(schema=sub) if isinstance(sub, Mapping) else UNKNOWN

    def item(self) -> TypeNode:
        """The place of each item of the list here."""
        if self._schema is not None:
            items = self._schema.get("items")
            return TypeNode(schema=items) if isinstance(items, Mapping) else UNKNOWN
        field = self._field
        if field is not None and field.container == "list" and field.type:
            return TypeNode(definition=field.type)
        return UNKNOWN


UNKNOWN: Final = TypeNode()
"""A place with no metadata: atomic lists, granular maps, lists replaced by patches."""


def kind_root(group: str, version: str, kind: str) -> TypeNode:
    """The root of a built-in kind (:data:`UNKNOWN` but for ``metadata`` if the spec
    does not have it)."""
    definition = KINDS.get((group, version, kind))
    if definition is None:
        return TypeNode(schema={}, resource=True)
    return TypeNode(definition=definition)


def schema_root(schema: Mapping[str, Any] | None) -> TypeNode:
    """The root of a custom resource whose CRD has ``schema`` (``None``: none)."""
    return TypeNode(schema=schema or {}, resource=True)
