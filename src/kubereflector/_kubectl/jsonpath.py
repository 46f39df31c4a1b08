"""The JSONPath subset of CRDs' ``additionalPrinterColumns`` (kubectl's ``{.spec.replicas}``
notation), for the emulator's Tables and the command line's. Pure functions, no I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["json_path"]

_FILTER: Final = re.compile(r"""\[\?\(@\.([\w.]+)\s*==\s*["']([^"']*)["']\)\]""")
_STEP: Final = re.compile(r"\.([\w-]+)|\[(\d+)\]|\[\*\]")


def json_path(obj: Any, path: str) -> Any:
    """The first value at a kubectl-style JSONPath (``.spec.replicas``,
    ``.status.conditions[?(@.type=="Ready")].status``, ``.items[0]``, ``{...}``
    braces optional), or ``None`` if absent or not understood."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    values = [obj]
    pos = 0
    while pos < len(text):
        filtered = _FILTER.match(text, pos)
        if filtered is not None:
            field, wanted = filtered.group(1), filtered.group(2)
            values = [
                item
                for value in values
                if isinstance(value, list)
                for item in value
                if str(json_path(item, "." + field)) == wanted
            ]
            pos = filtered.end()
            continue
        step = _STEP.match(text, pos)
        if step is None:
            return None
        name, index = step.group(1), step.group(2)
        if name is not None:
            values = [v[name] for v in values if isinstance(v, Mapping) and name in v]
        elif index is not None:
            i = int(index)
            values = [v[i] for v in values if isinstance(v, list) and i < len(v)]
        else:
            values = [item for v in values if isinstance(v, list) for item in v]
        pos = step.end()
    return values[0] if values else None
