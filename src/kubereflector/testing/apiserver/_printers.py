"""Table columns for kinds beyond pods and namespaces, and CRDs' additionalPrinterColumns.

Private to :mod:`kubereflector.testing.apiserver`; used by the Table answers
(``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``) that ``kubectl get``
prints. Pure functions, no I/O. Columns with ``priority`` > 0 are the ones
``kubectl get -o wide`` adds.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..._jsonpath import json_path

if TYPE_CHECKING:
    from ._resources import ServedResource

__all__ = ["custom_cells", "custom_columns"]


def _column(
    name: str, kind: str = "string", description: str = "", priority: int = 0
) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "format": "",
        "description": description,
        "priority": priority,
    }


def _count(value: Any) -> int:
    return len(value) if isinstance(value, Mapping | list) else 0


def custom_columns(info: ServedResource) -> list[dict[str, Any]] | None:
    """The columns after Name (and Age, last, where kube shows it) for ``info``, or
    ``None`` when the default table applies."""
    if info.printer_columns:
        return [
            _column(
                str(c.get("name", "")),
                str(c.get("type", "string")),
                str(c.get("description", "")),
                int(c.get("priority", 0) or 0),
            )
            for c in info.printer_columns
        ]
    if not info.builtin:
        return None
    if info.kind == "Deployment":
        return [
            _column("Ready"),
            _column("Up-to-date", "integer"),
            _column("Available", "integer"),
            _column("Age"),
            _column("Containers", priority=1),
            _column("Images", priority=1),
            _column("Selector", priority=1),
        ]
    if info.kind == "ConfigMap":
        return [_column("Data", "integer"), _column("Age")]
    if info.kind == "Secret":
        return [_column("Type"), _column("Data", "integer"), _column("Age")]
    return None


def custom_cells(
    info: ServedResource, obj: Mapping[str, Any], age: str, now: float
) -> list[Any] | None:
    """The cells matching :func:`custom_columns` (``age``: the AGE cell)."""
    if info.printer_columns:
        return [_printer_cell(obj, c, now) for c in info.printer_columns]
    if not info.builtin:
        return None
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if info.kind == "Deployment":
        containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        return [
            f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas', 1) or 0)}",
            int(status.get("updatedReplicas") or 0),
            int(status.get("availableReplicas") or 0),
            age,
            ",".join(str(c.get("name", "")) for c in containers),
            ",".join(str(c.get("image", "")) for c in containers),
            ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
        ]
    if info.kind == "ConfigMap":
        return [_count(obj.get("data")) + _count(obj.get("binaryData")), age]
    if info.kind == "Secret":
        return [obj.get("type") or "Opaque", _count(obj.get("data")), age]
    return None


def _printer_cell(obj: Mapping[str, Any], column: Mapping[str, Any], now: float) -> Any:
    value = json_path(obj, str(column.get("jsonPath", "")))
    if value is None:
        return None
    kind = column.get("type", "string")
    if kind == "date" and isinstance(value, str):
        from ._resources import human_duration

        try:
            then = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        except ValueError:
            return value
        return human_duration(now - then.timestamp())
    if kind in ("integer", "number", "boolean"):
        return value
    return value if isinstance(value, str) else str(value)
