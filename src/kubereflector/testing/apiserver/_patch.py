"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902), for the emulator's PATCH
(strategic merge patch: :mod:`._merge`). Private to :mod:`kubereflector.testing.apiserver`.

Every function leaves its inputs untouched and returns a new document.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["PatchFailed", "json_patch", "merge_patch"]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``target`` is not modified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class PatchFailed(Exception):
    """A JSON patch could not be applied (the message says where)."""


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchFailed(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, dict):
            if part not in doc:
                raise PatchFailed(f"path element {part!r} not found")
            doc = doc[part]
        elif isinstance(doc, list):
            doc = doc[_index(doc, part, allow_end=False)]
        else:
            raise PatchFailed(f"cannot descend into {type(doc).__name__} at {part!r}")
    return doc


def _index(items: list[Any], part: str, *, allow_end: bool) -> int:
    if allow_end and part == "-":
        return len(items)
    if not part.isdigit() or (len(part) > 1 and part[0] == "0"):
        raise PatchFailed(f"invalid array index {part!r}")
    index = int(part)
    if index > len(items) or (index == len(items) and not allow_end):
        raise PatchFailed(f"array index {index} out of bounds")
    return index


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch on a deep copy of ``doc``. Raises ``PatchFailed``."""
    if not isinstance(operations, list):
        raise PatchFailed("a JSON patch is a list of operations")
    doc = copy.deepcopy(doc)

    def add(parts: list[str], value: Any) -> None:
        nonlocal doc
        if not parts:
            doc = value
            return
        parent = _walk(doc, parts[:-1])
        if isinstance(parent, dict):
            parent[parts[-1]] = value
        elif isinstance(parent, list):
            parent.insert(_index(parent, parts[-1], allow_end=True), value)
        else:
            raise PatchFailed("cannot add to a scalar")

    def remove(parts: list[str]) -> Any:
        if not parts:
            raise PatchFailed("cannot remove the whole document")
        parent = _walk(doc, parts[:-1])
        if isinstance(parent, dict):
            if parts[-1] not in parent:
                raise PatchFailed(f"cannot remove missing {parts[-1]!r}")
            return parent.pop(parts[-1])
        if isinstance(parent, list):
            return parent.pop(_index(parent, parts[-1], allow_end=False))
        raise PatchFailed("cannot remove from a scalar")

    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchFailed(f"invalid operation {op!r}")
        kind, path = op["op"], _pointer(str(op["path"]))
        if kind == "add":
            add(path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            remove(path)
        elif kind == "replace":
            remove(path) if path else None
            add(path, copy.deepcopy(op.get("value")))
        elif kind == "move":
            value = remove(_pointer(str(op.get("from", ""))))
            add(path, value)
        elif kind == "copy":
            add(path, copy.deepcopy(_walk(doc, _pointer(str(op.get("from", ""))))))
        elif kind == "test":
            try:
                current = _walk(doc, path)
            except PatchFailed:
                # kube-apiserver's json-patch: a missing path tests equal to null
                # (kube-rs's finalizer() relies on it to add the first finalizer).
                if op.get("value") is not None:
                    raise
                current = None
            if current != op.get("value"):
                raise PatchFailed(f"test operation failed at {op['path']!r}")
        else:
            raise PatchFailed(f"unknown operation {kind!r}")
    return doc
