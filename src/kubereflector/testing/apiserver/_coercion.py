"""What kube-apiserver's decoder does to a custom resource before anything checks it:
prune the fields its structural schema does not have, drop the ``null``\\ s it does not
allow, default the fields that have a ``default``, and keep ``metadata`` (at the root
and in embedded resources) to ObjectMeta's fields. A port of apiextensions-apiserver's
``unstructuredSchemaCoercer`` and ``unstructuredDefaulter``
(``pkg/apiserver/schema/{pruning,defaulting,objectmeta}``).

Private to :mod:`kubereflector.testing.apiserver`. :func:`coerce` changes the object it
is given (a fresh dict a write owns) and returns the paths of the unknown fields it
dropped, as kube reports them to ``fieldValidation=Warn``/``Strict``
(``"spec.foo"``, ``"spec.items[0].bar"``, ``"metadata.foo"``). No I/O.

kube runs this on every request body (create, update, and the result of a patch) and
on every read from storage: :func:`coerce` is idempotent, so the emulator runs it on
each write and again over the stored objects when a CRD's schema changes.

Numbers: Go decodes JSON numbers into ``int64`` or ``float64`` and writes a whole
``float64`` without a fraction (``1.0`` comes back as ``1``); :func:`coerce` turns whole
floats into ints so the objects read back the same.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any, Final

from ._schema import Schema

__all__ = ["META_FIELDS", "coerce", "default"]

# ObjectMeta's fields (what kube decodes from a metadata object; the rest is unknown).
META_FIELDS: Final = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)

_TYPE_META: Final = frozenset({"apiVersion", "kind", "metadata"})
_MAX_EXACT: Final = 2.0**53


def coerce(obj: dict[str, Any], schema: Schema | None) -> list[str]:
    """Prune, drop disallowed nulls, keep metadata to ObjectMeta and default ``obj`` (a
    custom resource, changed in place) by its CRD's ``schema`` (``None``: a CRD
    without one, which keeps unknown fields). Returns the unknown fields' paths."""
    unknown = _prune_metadata(obj, "")
    _normalize_numbers(obj)
    if schema is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        if schema is not None:
            _prune_preserved(obj, schema, [], unknown, root=True)
        return unknown
    pruned: list[str] = []
    _prune(obj, schema, [], pruned, embedded=True)
    unknown.extend(sorted(pruned))
    _drop_nulls(obj, schema)
    embedded: list[str] = []
    _coerce_embedded(obj, schema, "", embedded)
    unknown.extend(sorted(embedded))
    default(obj, schema)
    return unknown


def _normalize_numbers(value: Any) -> Any:
    if isinstance(value, dict):
        for key, child in value.items():
            if isinstance(child, (float, dict, list)):
                value[key] = _normalize_numbers(child)
        return value
    if isinstance(value, list):
        for index, child in enumerate(value):
            if isinstance(child, (float, dict, list)):
                value[index] = _normalize_numbers(child)
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < _MAX_EXACT:
        return int(value) if value or math.copysign(1.0, value) > 0 else value  # Go keeps -0
    return value


# -- metadata ---------------------------------------------------------------------------------


def _prune_metadata(obj: dict[str, Any], prefix: str) -> list[str]:
    """Drop what ObjectMeta does not have from ``obj["metadata"]``: its paths."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []
    unknown = [k for k in meta if k not in META_FIELDS]
    for key in unknown:
        del meta[key]
    base = f"{prefix}.metadata" if prefix else "metadata"
    return [f"{base}.{key}" for key in unknown]


def _coerce_embedded(value: Any, schema: Schema | None, path: str, unknown: list[str]) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        if schema.get("x-kubernetes-embedded-resource") and path:
            unknown.extend(_prune_metadata(value, path))
        for key, child in value.items():
            sub = _property(schema, key)
            if sub is not None:
                child_path = f"{path}.{key}" if path else key
                if key not in _properties(schema):
                    child_path = f"{path}[{key}]" if path else f"[{key}]"
                _coerce_embedded(child, sub, child_path, unknown)
    elif isinstance(value, list):
        items = _items(schema)
        for index, child in enumerate(value):
            _coerce_embedded(child, items, f"{path}[{index}]", unknown)


# -- pruning ----------------------------------------------------------------------------------


def _properties(schema: Schema) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _additional(schema: Schema) -> Schema | None:
    additional = schema.get("additionalProperties")
    return additional if isinstance(additional, Mapping) else None


def _items(schema: Schema | None) -> Schema | None:
    items = schema.get("items") if schema is not None else None
    return items if isinstance(items, Mapping) else None


def _property(schema: Schema, key: str) -> Schema | None:
    sub = _properties(schema).get(key)
    if isinstance(sub, Mapping):
        return sub
    return _additional(schema)


def _key_path(parent: list[str], key: str) -> list[str]:
    return [*parent, ".", key] if parent else [key]


def _prune(
    value: Any, schema: Schema | None, parent: list[str], unknown: list[str], *, embedded: bool
) -> None:
    """kube's ``prune``: ``embedded`` keeps apiVersion, kind and metadata."""
    if schema is not None and schema.get("x-kubernetes-preserve-unknown-fields"):
        _prune_preserved(value, schema, parent, unknown, root=False)
        return
    if isinstance(value, dict):
        if schema is None:
            for key in list(value):
                unknown.append("".join(_key_path(parent, key)))
                del value[key]
            return
        for key in list(value):
            if embedded and key in _TYPE_META:
                continue
            sub = _property(schema, key)
            if sub is not None:
                _prune(value[key], sub, _key_path(parent, key), unknown, embedded=_embeds(sub))
            elif key in _properties(schema) or _additional(schema) is not None:
                continue  # a property without a schema of its own (not structural)
            else:
                if key not in _TYPE_META or parent:
                    unknown.append("".join(_key_path(parent, key)))
                del value[key]
    elif isinstance(value, list):
        items = _items(schema)
        for index, child in enumerate(value):
            path = [*parent, "[", str(index), "]"]
            _prune(child, items, path, unknown, embedded=items is not None and _embeds(items))


def _embeds(schema: Schema) -> bool:
    return bool(schema.get("x-kubernetes-embedded-resource"))


def _prune_preserved(
    value: Any, schema: Schema, parent: list[str], unknown: list[str], *, root: bool
) -> None:
    """kube's ``skipPrune``: unknown fields stay, known ones are pruned by their schema."""
    if isinstance(value, dict):
        embedded = root or _embeds(schema)
        for key, child in value.items():
            if embedded and key in _TYPE_META:
                continue
            sub = _property(schema, key)
            if sub is not None:
                _prune(child, sub, _key_path(parent, key), unknown, embedded=_embeds(sub))
    elif isinstance(value, list):
        items = _items(schema)
        if items is not None:
            for index, child in enumerate(value):
                _prune_preserved(child, items, [*parent, "[", str(index), "]"], unknown, root=False)


# -- nulls and defaults -----------------------------------------------------------------------


def _drop_nulls(value: Any, schema: Schema | None) -> None:
    """kube's ``PruneNonNullableNullsWithoutDefaults``."""
    if isinstance(value, dict):
        for key in list(value):
            sub = _property(schema, key) if schema is not None else None
            child = value[key]
            if (
                child is None
                and sub is not None
                and not sub.get("nullable")
                and "default" not in sub
            ):
                del value[key]
            else:
                _drop_nulls(child, sub)
    elif isinstance(value, list):
        items = _items(schema)
        for child in value:
            _drop_nulls(child, items)


def _non_nullable_null(value: Any, schema: Schema | None) -> bool:
    return value is None and schema is not None and not schema.get("nullable")


def _default_of(schema: Schema) -> Any:
    """A fresh copy of ``schema``'s default, pruned by ``schema`` as kube prunes the
    defaults of a CRD when it loads it."""
    value = copy.deepcopy(schema["default"])
    _normalize_numbers(value)
    if isinstance(value, (dict, list)):
        _prune(value, schema, [], [], embedded=_embeds(schema))
    return value


def default(value: Any, schema: Schema | None) -> None:
    """kube's structural ``Default``: absent fields (and non-nullable nulls) with a
    ``default`` get it, and defaults apply inside what was defaulted."""
    if schema is None:
        return
    if isinstance(value, dict):
        for key, sub in _properties(schema).items():
            if not isinstance(sub, Mapping) or sub.get("default") is None:
                continue
            if key not in value or _non_nullable_null(value[key], sub):
                value[key] = _default_of(sub)
        additional = _additional(schema)
        for key in list(value):
            sub = _properties(schema).get(key)
            if isinstance(sub, Mapping):
                default(value[key], sub)
            elif additional is not None:
                if (
                    _non_nullable_null(value[key], additional)
                    and additional.get("default") is not None
                ):
                    value[key] = _default_of(additional)
                default(value[key], additional)
    elif isinstance(value, list):
        items = _items(schema)
        for index, child in enumerate(value):
            if (
                _non_nullable_null(child, items)
                and items is not None
                and items.get("default") is not None
            ):
                value[index] = _default_of(items)
            default(value[index], items)
