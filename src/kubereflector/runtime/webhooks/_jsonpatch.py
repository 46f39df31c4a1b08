"""A JSON Patch (RFC 6902) from a document to its mutated copy: what a mutating webhook
answers (private to :mod:`kubereflector.runtime.webhooks`).

Pure functions over JSON values (dicts, lists, strings, numbers, booleans, ``None``).
The patch is small where that is cheap to find: objects are compared key by key, lists
of the same length element by element, and a list that only grew at its end gets
``add`` operations; any other change of a list replaces it whole (as correct, and
what kube-apiserver applies just as well).
"""

from __future__ import annotations

from typing import Any

__all__ = ["diff", "pointer"]


def pointer(tokens: list[str]) -> str:
    """The JSON Pointer (RFC 6901) of ``tokens``: ``~`` and ``/`` escaped."""
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON: ``True`` is not ``1``, and ``1`` is ``1.0`` (both numbers)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


def diff(old: Any, new: Any) -> list[dict[str, Any]]:
    """The operations that turn ``old`` into ``new`` (empty when they are equal as JSON).

    Neither argument is modified; the operations' values are ``new``'s own objects
    (encode the patch before changing ``new`` again).
    """
    ops: list[dict[str, Any]] = []
    _diff(old, new, [], ops)
    return ops


def _diff(old: Any, new: Any, path: list[str], ops: list[dict[str, Any]]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        ops.extend({"op": "remove", "path": pointer([*path, key])} for key in old if key not in new)
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": pointer([*path, key]), "value": value})
            else:
                _diff(old[key], value, [*path, key], ops)
        return
    if isinstance(old, list) and isinstance(new, list):
        if _same(old, new):
            return
        if len(old) == len(new):
            for index, (a, b) in enumerate(zip(old, new, strict=True)):
                _diff(a, b, [*path, str(index)], ops)
            return
        if len(new) > len(old) and all(
            _same(a, b) for a, b in zip(old, new[: len(old)], strict=True)
        ):
            ops.extend(
                {"op": "add", "path": pointer([*path, str(index)]), "value": new[index]}
                for index in range(len(old), len(new))
            )
            return
        ops.append({"op": "replace", "path": pointer(path), "value": new})
        return
    if not _same(old, new):
        ops.append({"op": "replace", "path": pointer(path), "value": new})
