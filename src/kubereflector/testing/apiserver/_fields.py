"""Field management for the emulator: ``managedFields`` and server-side apply.

Private to :mod:`kubereflector.testing.apiserver`. A port, on plain JSON, of what
kube-apiserver does with sigs.k8s.io/structured-merge-diff (SMD):

* every write records which fields its **field manager** set, in
  ``metadata.managedFields`` (``FieldsV1``): an ``Update`` entry per manager for
  create/update/patch, an ``Apply`` entry for server-side apply;
* an **apply** merges the applied configuration into the live object, makes its
  manager own exactly the fields it sent, removes fields the manager applied
  before and no applier owns now, and fails with a conflict when it would
  change a field another manager owns (unless forced, which takes the field).

The schema (:class:`Schema`) is the kind's: for built-in kinds the list types, map
keys and map types of the OpenAPI spec (:mod:`._builtin_schemas`), for custom
resources those of the CRD's structural schema (:mod:`._typetree`). Differences
from SMD: every object key is treated as a struct field (SMD refuses fields a
schema lacks; the emulator prunes or refuses them before); values are not
validated here; a create's "empty" object is ``{"metadata": {}}``, so the
``Update`` entries of built-in types may mark a few more containers with ``"."``
than kube (whose empty object holds Go's zero-value structs).

No I/O; every function leaves its inputs untouched unless it says otherwise.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from ._typetree import UNKNOWN, TypeNode, kind_root, schema_root

__all__ = [
    "DEFAULT_SCHEMA",
    "ApplyConflict",
    "FieldManagers",
    "ListType",
    "Schema",
    "builtin_schema",
    "compare",
    "custom_schema",
    "decode_fields",
    "encode_fields",
    "merge",
    "path_text",
    "remove_paths",
    "to_field_set",
]

Path = tuple[str, ...]
"""A field path: ``FieldsV1`` keys, ``("f:spec", "f:containers", 'k:{"name":"c"}', "f:image")``."""

_encode_json: Final = msgspec.json.Encoder(order="sorted").encode
_decode_json: Final = msgspec.json.decode

_NEVER_TRACKED: Final = frozenset(
    {
        ("f:apiVersion",),
        ("f:kind",),
        ("f:metadata",),
        *(
            ("f:metadata", f"f:{name}")
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        ),
    }
)
"""kube's fieldmanager strips these paths from every manager's set (``stripMeta``)."""

_SKIPPED: Final = (("f:metadata", "f:managedFields"),)
"""Subtrees never walked."""


# -- schema -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListType:
    """How a list merges: ``atomic`` (a whole value), ``set`` (of scalars) or
    ``map`` (of objects identified by ``keys``; a missing key field takes its
    ``defaults`` value)."""

    kind: str = "atomic"
    keys: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)


ATOMIC: Final = ListType()
_CACHE_LIMIT: Final = 4096


class Schema:
    """Which lists of a resource are sets or keyed maps, and which objects are
        atomic, read from its :class:`~._typetree.TypeNode` tree. Patterns are tuples of
        field names with ``"*"`` for a list item. Lookups are cached (a Schema belongs to
        one served resource; the cache is emptied when it reaches a few thousand paths, as
    map keys make them open-ended)."""

    __slots__ = ("_cache", "_root")

    def __init__(self, root: TypeNode = UNKNOWN) -> None:
        self._root = root
        self._cache: dict[tuple[str, ...], TypeNode] = {(): root}

    @property
    def root(self) -> TypeNode:
        """The place of the whole object."""
        return self._root

    def node(self, fields: tuple[str, ...]) -> TypeNode:
        """The place of ``fields`` (``"*"``: a list item)."""
        found = self._cache.get(fields)
        if found is None:
            parent = self.node(fields[:-1])
            found = parent.item() if fields[-1] == "*" else parent.field(fields[-1])
            if len(self._cache) >= _CACHE_LIMIT:  # map keys (labels, data) are open-ended
                self._cache = {(): self._root}
            self._cache[fields] = found
        return found

    def list_type(self, fields: tuple[str, ...]) -> ListType:
        node = self.node(fields)
        if node.list_type == "set":
            return ListType("set")
        if node.list_type == "map" and node.keys:
            return ListType("map", node.keys, node.key_defaults)
        return ATOMIC

    def atomic_map(self, fields: tuple[str, ...]) -> bool:
        return self.node(fields).atomic_map


def builtin_schema(group: str, version: str, kind: str) -> Schema:
    """The schema of a built-in kind, from the OpenAPI spec's metadata."""
    return Schema(kind_root(group, version, kind))


def custom_schema(openapi_schema: Mapping[str, Any] | None) -> Schema:
    """The schema of a custom resource, from its CRD's ``openAPIV3Schema``."""
    return Schema(schema_root(openapi_schema))


DEFAULT_SCHEMA: Final = custom_schema(None)
"""A resource nothing is known of but its ObjectMeta."""


# -- path elements ----------------------------------------------------------------------------


def _item_element(item: Any, list_type: ListType) -> str | None:
    """The path element of a list item (``None``: the list cannot be granular)."""
    if list_type.kind == "set":
        if isinstance(item, (dict, list)):
            return None
        return "v:" + _encode_json(item).decode()
    if not isinstance(item, dict):
        return None
    key: dict[str, Any] = {}
    for name in list_type.keys:
        value = item.get(name, list_type.defaults.get(name))
        if value is None:
            if name in list_type.defaults:
                continue
            return None
        key[name] = value
    return "k:" + _encode_json(key).decode()


def _elements(items: list[Any], list_type: ListType) -> dict[str, Any] | None:
    """``{element: item}`` in list order (repeats ignored), or ``None`` if any item
    has no element (then the list is treated as atomic)."""
    if list_type.kind == "atomic":
        return None
    out: dict[str, Any] = {}
    for item in items:
        element = _item_element(item, list_type)
        if element is None:
            return None
        out.setdefault(element, item)
    return out


def path_text(path: Path) -> str:
    """SMD's rendering of a path: ``.spec.containers[name="c"].image``."""
    parts: list[str] = []
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            parts.append("." + rest)
        elif kind == "k":
            key = _decode_json(rest)
            parts.append(
                "[" + ",".join(f"{k}={_encode_json(v).decode()}" for k, v in key.items()) + "]"
            )
        elif kind == "v":
            parts.append(f"[={rest}]")
        else:
            parts.append(f"[{rest}]")
    return "".join(parts)


def _fields_of(path: Path) -> tuple[str, ...]:
    """The schema pattern of a path: field names, ``"*"`` for list items."""
    return tuple(e[2:] if e.startswith("f:") else "*" for e in path)


# -- FieldsV1 ---------------------------------------------------------------------------------


def encode_fields(paths: Iterable[Path]) -> dict[str, Any]:
    """A set of paths as ``FieldsV1`` (``{"f:data": {".": {}, "f:x": {}}}``), in SMD's order."""
    root: dict[str, Any] = {}
    # Sorted, every path comes after its prefixes, so "." is a node's first key and
    # siblings are in SMD's order (fields, then keys, then values: "f:" < "k:" < "v:";
    # the emulator makes no "i:" elements), which the dicts keep.
    for path in sorted(paths):
        node = root
        for element in path:
            node = node.setdefault(element, {})
        node["."] = {}
    _collapse(root)
    return root


def _collapse(node: dict[str, Any]) -> None:
    """A member without children is ``{}``, not ``{".": {}}``."""
    for key, child in node.items():
        if key == ".":
            continue
        if len(child) == 1 and "." in child:
            node[key] = {}
        else:
            _collapse(child)


def decode_fields(fields: Any) -> set[Path]:
    """The paths of a ``FieldsV1`` mapping (malformed parts are skipped)."""
    paths: set[Path] = set()

    def walk(node: Any, path: Path) -> None:
        if not isinstance(node, Mapping):
            return
        if path and (not node or "." in node):
            paths.add(path)
        for key, child in node.items():
            if key != "." and isinstance(key, str) and key[:2] in ("f:", "k:", "v:", "i:"):
                walk(child, (*path, key))

    walk(fields, ())
    return paths


# -- walking values ---------------------------------------------------------------------------


def to_field_set(obj: Mapping[str, Any], schema: Schema) -> set[Path]:
    """SMD's ``ToFieldSet``: every field an applied configuration sets (minus the
    fields kube never tracks)."""
    out: set[Path] = set()

    def walk(value: Any, path: Path, fields: tuple[str, ...]) -> None:
        if path in _SKIPPED:
            return
        if isinstance(value, dict):
            if path and schema.atomic_map(fields):
                out.add(path)
                return
            for key, child in value.items():
                child_path = (*path, f"f:{key}")
                walk(child, child_path, (*fields, key))
                if child is None or (isinstance(child, dict) and not child):
                    out.add(child_path)
        elif isinstance(value, list):
            elements = _elements(value, schema.list_type(fields))
            if elements is None:
                out.add(path)
                return
            item_fields = (*fields, "*")
            for element, item in elements.items():
                item_path = (*path, element)
                walk(item, item_path, item_fields)
                out.add(item_path)
        elif path:
            out.add(path)

    walk(obj, (), ())
    return out - _NEVER_TRACKED


@dataclass(slots=True)
class Comparison:
    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)


_ABSENT: Final = object()


def compare(old: Mapping[str, Any], new: Mapping[str, Any], schema: Schema) -> Comparison:
    """SMD's ``Compare``: the fields ``new`` adds, modifies and removes (leaves and
    atomic values compared by value; maps and list items added or removed whole
    are named too)."""
    result = Comparison()

    def leaf(lhs: Any, rhs: Any, path: Path) -> None:
        if lhs is _ABSENT:
            result.added.add(path)
        elif rhs is _ABSENT:
            result.removed.add(path)
        elif lhs != rhs:
            result.modified.add(path)

    def walk(lhs: Any, rhs: Any, path: Path, fields: tuple[str, ...]) -> None:
        if path in _SKIPPED or lhs is rhs:
            return
        lmap, rmap = isinstance(lhs, dict), isinstance(rhs, dict)
        llist, rlist = isinstance(lhs, list), isinstance(rhs, list)
        if (lmap or lhs is _ABSENT) and (rmap or rhs is _ABSENT) and (lmap or rmap):
            if (path and schema.atomic_map(fields)) or (_empty(lhs) and _empty(rhs)):
                leaf(lhs, rhs, path)
                return
            if lhs == rhs:  # equal subtrees change nothing (a C-speed check)
                return
            lm = lhs if lmap else {}
            rm = rhs if rmap else {}
            for key in {**lm, **rm}:
                child = (*path, f"f:{key}")
                walk(lm.get(key, _ABSENT), rm.get(key, _ABSENT), child, (*fields, key))
        elif (llist or lhs is _ABSENT) and (rlist or rhs is _ABSENT) and (llist or rlist):
            if lhs == rhs:
                return
            list_type = schema.list_type(fields)
            lel = _elements(lhs if llist else [], list_type)
            rel = _elements(rhs if rlist else [], list_type)
            if lel is None or rel is None or (not lel and not rel):
                leaf(lhs, rhs, path)
                return
            item_fields = (*fields, "*")
            for element in {**lel, **rel}:
                walk(
                    lel.get(element, _ABSENT),
                    rel.get(element, _ABSENT),
                    (*path, element),
                    item_fields,
                )
        else:
            leaf(lhs, rhs, path)
            return
        if path:  # a map or list item that appeared or went, as a whole
            if lhs is _ABSENT:
                result.added.add(path)
            elif rhs is _ABSENT:
                result.removed.add(path)

    walk(old, new, (), ())
    for found in (result.added, result.modified, result.removed):
        found -= _NEVER_TRACKED
    return result


def _empty(value: Any) -> bool:
    return value is _ABSENT or not value


def merge(live: Any, config: Any, schema: Schema, fields: tuple[str, ...] = ()) -> Any:
    """SMD's ``Merge``: ``config`` over ``live`` (maps merged key by key, granular
    lists item by item in SMD's order, everything else replaced). New values;
    ``fields`` is where ``live`` sits (the schema pattern of its path)."""
    if isinstance(live, dict) and isinstance(config, dict) and not schema.atomic_map(fields):
        out = dict(live)
        for key, value in config.items():
            if value is None:  # an applied null: the field goes (Go omits a nil pointer)
                out.pop(key, None)
            elif key in live:
                out[key] = merge(live[key], value, schema, (*fields, key))
            else:
                out[key] = _copy(value)
        return out
    if isinstance(live, list) and isinstance(config, list):
        list_type = schema.list_type(fields)
        lel, rel = _elements(live, list_type), _elements(config, list_type)
        if lel is not None and rel is not None:
            item_fields = (*fields, "*")
            return [
                merge(lel[e], rel[e], schema, item_fields)
                if e in lel and e in rel
                else _copy(rel[e] if e in rel else lel[e])
                for e in _merged_order(list(lel), list(rel))
            ]
    return _copy(config)


def _merged_order(lhs: list[str], rhs: list[str]) -> Iterator[str]:
    """The order of a merged list's items (SMD's ``visitListItems``): the live
    order, with the configuration's items where the configuration puts them."""
    in_lhs, in_rhs = set(lhs), set(rhs)
    shared = [e for e in rhs if e in in_lhs]
    next_shared = shared.pop(0) if shared else None
    li = ri = 0
    while li < len(lhs) or ri < len(rhs):
        if li < len(lhs) and ri < len(rhs):
            element = lhs[li]
            if element == rhs[ri]:
                yield element
                li += 1
                ri += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if element in in_rhs and next_shared is not None and next_shared != element:
                li += 1
                continue
        if li < len(lhs) and lhs[li] not in in_rhs:
            yield lhs[li]
            li += 1
            continue
        if ri < len(rhs):
            element = rhs[ri]
            yield element
            ri += 1
            if next_shared is not None and next_shared == element:
                next_shared = shared.pop(0) if shared else None


def remove_paths(obj: dict[str, Any], paths: Iterable[Path], schema: Schema) -> None:
    """Remove each path's field or list item from ``obj`` (in place). A path under
    another one goes with it (removing it first could take a list item's key fields,
    and then the item could no longer be found)."""
    removed: set[Path] = set()
    for path in sorted(paths, key=len):
        if any(path[:size] in removed for size in range(1, len(path))):
            continue
        removed.add(path)
        parent: Any = obj
        for depth, element in enumerate(path[:-1]):
            parent = _child(parent, element, schema, path[:depth])
            if parent is None:
                break
        else:
            last = path[-1]
            if isinstance(parent, dict) and last.startswith("f:"):
                parent.pop(last[2:], None)
            elif isinstance(parent, list):
                list_type = schema.list_type(_fields_of(path[:-1]))
                parent[:] = [i for i in parent if _item_element(i, list_type) != last]


def _child(node: Any, element: str, schema: Schema, path: Path) -> Any:
    if isinstance(node, dict) and element.startswith("f:"):
        return node.get(element[2:])
    if isinstance(node, list):
        list_type = schema.list_type(_fields_of(path))
        for item in node:
            if _item_element(item, list_type) == element:
                return item
    return None


def _copy(value: Any) -> Any:
    return copy.deepcopy(value) if isinstance(value, (dict, list)) else value


# -- managers ---------------------------------------------------------------------------------


class _Entry:
    """One manager's entry. Its field set is decoded from ``FieldsV1`` only when a
    write needs all of it; membership tests read the tree directly."""

    __slots__ = ("_fields", "api_version", "manager", "operation", "raw", "subresource", "time")

    def __init__(
        self,
        manager: str,
        operation: str,
        api_version: str,
        subresource: str,
        time: str | None,
        fields: set[Path] | None,
        raw: dict[str, Any] | None = None,
    ) -> None:
        self.manager = manager
        self.operation = operation
        self.api_version = api_version
        self.subresource = subresource
        self.time = time
        self._fields = fields
        self.raw = raw  # the entry as stored, while unchanged

    @property
    def fields(self) -> set[Path]:
        if self._fields is None:
            self._fields = decode_fields(self.raw.get("fieldsV1") if self.raw else None)
        return self._fields

    @fields.setter
    def fields(self, value: set[Path]) -> None:
        self._fields = value
        self.raw = None

    def owns(self, path: Path) -> bool:
        if self._fields is not None:
            return path in self._fields
        node: Any = self.raw.get("fieldsV1") if self.raw else None
        for element in path:
            if not isinstance(node, Mapping):
                return False
            node = node.get(element)
        return isinstance(node, Mapping) and (not node or "." in node)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        # kube: appliers are one manager whatever the API version they used.
        version = self.api_version if self.operation == "Update" else ""
        return (self.manager, self.operation, version, self.subresource)

    def describe(self) -> str:
        """kube's ``printManager``: ``"mgr"``, ``"mgr" with subresource "status"``,
        ``"mgr" using v1``."""
        text = _encode_json(self.manager).decode()
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def encode(self) -> dict[str, Any]:
        if self.raw is not None:
            return self.raw
        entry: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode_fields(self.fields),
        }
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


class ApplyConflict(Exception):
    """An apply would change fields other managers own: ``[(manager text, path)]``."""

    def __init__(self, conflicts: list[tuple[str, Path]]) -> None:
        self.conflicts = conflicts
        super().__init__(self.message())

    def message(self) -> str:
        count = len(self.conflicts)
        noun = "conflict" if count == 1 else "conflicts"
        if count == 1:
            manager, path = self.conflicts[0]
            detail = f"conflict with {manager}: {path_text(path)}"
        else:
            by_manager: dict[str, list[Path]] = {}
            for manager, path in self.conflicts:
                by_manager.setdefault(manager, []).append(path)
            lines = []
            for manager in sorted(by_manager):
                lines.append(f"conflicts with {manager}:")
                lines.extend(f"- {path_text(p)}" for p in by_manager[manager])
            detail = "\n".join(lines)
        return f"Apply failed with {count} {noun}: {detail}"

    def causes(self) -> list[dict[str, str]]:
        return [
            {
                "reason": "FieldManagerConflict",
                "message": f"conflict with {manager}",
                "field": path_text(path),
            }
            for manager, path in self.conflicts
        ]


class FieldManagers:
    """The ``managedFields`` of one object, for one write.

    ``FieldManagers.of(obj)`` reads them; :meth:`update` and :meth:`apply`
    record a write; :meth:`encode` gives the new ``managedFields`` list.
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[_Entry] = ()) -> None:
        self._entries: dict[tuple[str, str, str, str], _Entry] = {}
        for entry in entries:
            self._entries[entry.identity] = entry

    @classmethod
    def decode(cls, managed: Any) -> FieldManagers:
        """From a ``managedFields`` list (malformed entries are dropped)."""
        entries = []
        for raw in managed if isinstance(managed, list) else ():
            if not isinstance(raw, dict) or not isinstance(raw.get("manager"), str):
                continue
            operation = raw.get("operation")
            if operation not in ("Apply", "Update"):
                continue
            entries.append(
                _Entry(
                    raw["manager"],
                    operation,
                    str(raw.get("apiVersion") or ""),
                    str(raw.get("subresource") or ""),
                    raw.get("time") if isinstance(raw.get("time"), str) else None,
                    None,
                    raw,
                )
            )
        return cls(entries)

    def copy(self) -> FieldManagers:
        return FieldManagers(
            _Entry(
                e.manager, e.operation, e.api_version, e.subresource, e.time, set(e.fields), e.raw
            )
            for e in self._entries.values()
        )

    def encode(self) -> list[dict[str, Any]]:
        """kube's order: Apply before Update, then by time, manager, version, subresource."""
        entries = sorted(
            self._entries.values(),
            key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource),
        )
        return [e.encode() for e in entries]

    def _strip(
        self,
        acting: tuple[str, str, str, str],
        comparison: Comparison,
        *,
        force: bool,
    ) -> None:
        """SMD's ``update``: fields the write changed leave other managers (or, without
        ``force``, raise ApplyConflict); removed fields leave everyone."""
        changed = sorted(comparison.modified | comparison.added)
        removed = comparison.removed
        conflicts = [
            (entry, path)
            for key, entry in self._entries.items()
            if key != acting
            for path in changed
            if entry.owns(path)
        ]
        if conflicts and not force:
            raise ApplyConflict([(entry.describe(), path) for entry, path in conflicts])
        for key, entry in list(self._entries.items()):
            if key == acting:
                continue
            lost = {p for p in changed if entry.owns(p)} | {p for p in removed if entry.owns(p)}
            if lost:
                entry.fields = entry.fields - lost
                if not entry.fields:
                    del self._entries[key]

    def update(
        self,
        old: Mapping[str, Any],
        new: Mapping[str, Any],
        *,
        manager: str,
        api_version: str,
        subresource: str,
        now: str,
        schema: Schema,
    ) -> None:
        """Record a create, update or patch by ``manager`` (an ``Update`` entry)."""
        comparison = compare(old, new, schema)
        probe = _Entry(manager, "Update", api_version, subresource, now, set())
        self._strip(probe.identity, comparison, force=True)
        entry = self._entries.get(probe.identity)
        if (
            entry is not None
            and not comparison.added
            and not comparison.removed
            and all(entry.owns(p) for p in comparison.modified)
        ):  # the manager changed only fields it owns: its set stays, its time moves
            entry.time = now
            if entry.raw is not None:
                entry.raw = {**entry.raw, "time": now}
            return
        fields = (
            (entry.fields if entry is not None else set()) | comparison.modified | comparison.added
        ) - comparison.removed
        if fields:
            self._entries[probe.identity] = _Entry(
                manager, "Update", api_version, subresource, now, fields
            )
        else:
            self._entries.pop(probe.identity, None)

    def apply(
        self,
        live: Mapping[str, Any],
        config: Mapping[str, Any],
        *,
        manager: str,
        api_version: str,
        subresource: str,
        now: str,
        force: bool,
        schema: Schema,
    ) -> dict[str, Any]:
        """Apply ``config`` over ``live`` as ``manager``: the new object. Raises
        :class:`ApplyConflict` unless ``force`` (the managers are then unchanged)."""
        new: dict[str, Any] = merge(live, config, schema)
        entry = _Entry(
            manager, "Apply", api_version, subresource, now, to_field_set(config, schema)
        )
        saved = dict(self._entries)
        previous = self._entries.get(entry.identity)
        self._entries[entry.identity] = entry
        if previous is not None:
            appliers = [e.fields for e in self._entries.values() if e.operation == "Apply"]
            dropped = {
                path
                for path in previous.fields - entry.fields
                if not any(_owns_under(fields, path) for fields in appliers)
            }
            remove_paths(new, dropped, schema)
        try:
            self._strip(entry.identity, compare(live, new, schema), force=force)
        except ApplyConflict:
            self._entries = saved  # a refused apply changes no manager
            raise
        return new


def _owns_under(fields: set[Path], path: Path) -> bool:
    """Whether ``fields`` holds ``path`` or anything below it."""
    size = len(path)
    return any(p[:size] == path for p in fields)
