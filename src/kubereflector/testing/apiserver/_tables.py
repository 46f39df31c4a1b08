"""The Table answers (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``) that
``kubectl get`` prints: the columns and cells of pods, namespaces, deployments,
configmaps and secrets as kube's printers make them, a CRD's
``additionalPrinterColumns``, and Name and Age for everything else.

Private to :mod:`kubereflector.testing.apiserver`. Pure functions, no I/O. Columns
with ``priority`` > 0 are the ones ``kubectl get -o wide`` adds.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, Final

import msgspec

from ..._kubectl.duration import age, human_duration
from ..._kubectl.jsonpath import json_path
from ._records import Record
from ._resources import ServedResource
from ._statuses import bad_request
from ._timestamps import wall_now

__all__ = ["row_object", "table", "table_columns", "table_row"]


def _column(
    name: str, kind: str = "string", description: str = "", priority: int = 0, fmt: str = ""
) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


def _age(obj: Mapping[str, Any], now: float) -> str:
    return age((obj.get("metadata") or {}).get("creationTimestamp"), now)


_NAME_COLUMN: Final = _column(
    "Name",
    description="Name must be unique within a namespace. https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    fmt="name",
)
_AGE_COLUMN: Final = _column(
    "Age",
    description="CreationTimestamp is a timestamp representing the server time when this object "
    "was created.",
)


def _pod_cells(obj: Mapping[str, Any]) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if isinstance(c, Mapping) and c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses if isinstance(c, Mapping))
    total = len(spec.get("containers") or [])
    phase = status.get("reason") or status.get("phase") or "Pending"
    for c in statuses:  # kubectl shows a waiting or failed container's reason
        state = c.get("state") if isinstance(c, Mapping) else None
        if not isinstance(state, Mapping):
            continue
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        reason = waiting.get("reason") or terminated.get("reason")
        if reason and reason not in ("ContainerCreating", "PodInitializing", "Completed"):
            phase = reason
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        phase = "Terminating"
    return [f"{ready}/{total}", phase, restarts]


def _pod_wide_cells(obj: Mapping[str, Any]) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    gates = spec.get("readinessGates") or []
    return [
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"{len(gates)}" if gates else "<none>",
    ]


def table_columns(info: ServedResource) -> list[dict[str, Any]]:
    """The ``columnDefinitions`` of ``info``'s Tables."""
    if info.plural == "pods" and info.builtin:
        return [
            _NAME_COLUMN,
            _column(
                "Ready",
                description="The aggregate readiness state of this pod for accepting traffic.",
            ),
            _column("Status", description="The aggregate status of the containers in this pod."),
            _column(
                "Restarts",
                "integer",
                "The number of times the containers in this pod have been restarted.",
            ),
            _AGE_COLUMN,
            _column("IP", description="IP address allocated to the pod.", priority=1),
            _column("Node", description="Name of the node the pod runs on.", priority=1),
            _column("Nominated Node", description="Node the scheduler nominated.", priority=1),
            _column("Readiness Gates", description="The pod's readiness gates.", priority=1),
        ]
    if info.plural == "namespaces" and info.builtin:
        return [
            _NAME_COLUMN,
            _column("Status", description="The status of the namespace"),
            _AGE_COLUMN,
        ]
    custom = _custom_columns(info)
    if custom is not None:
        return [_NAME_COLUMN, *custom]
    return [_NAME_COLUMN, _AGE_COLUMN]


def table_row(
    info: ServedResource, obj: Mapping[str, Any], row_object: Any, now: float
) -> dict[str, Any]:
    """The row of ``obj`` (cells matching :func:`table_columns`; ages from ``now``, in
    seconds since the epoch), carrying ``row_object`` unless it is ``None``."""
    name = (obj.get("metadata") or {}).get("name", "")
    if info.plural == "pods" and info.builtin:
        cells = [name, *_pod_cells(obj), _age(obj, now), *_pod_wide_cells(obj)]
    elif info.plural == "namespaces" and info.builtin:
        phase = (obj.get("status") or {}).get("phase") or "Active"
        cells = [name, phase, _age(obj, now)]
    else:
        custom = _custom_cells(info, obj, _age(obj, now), now)
        cells = [name, *custom] if custom is not None else [name, _age(obj, now)]
    row: dict[str, Any] = {"cells": cells}
    if row_object is not None:
        row["object"] = row_object
    return row


def table(
    info: ServedResource,
    records: list[Record],
    rv: int,
    continue_: str,
    include_object: str,
) -> dict[str, Any]:
    """The Table of ``records`` (a list's page at ``rv``, with its ``continue_`` token,
    or one object); ``include_object``: the request's ``includeObject`` (400 unless
    ``None``, ``Metadata`` or ``Object``)."""
    if include_object not in ("None", "Metadata", "Object"):
        raise bad_request(f"includeObject: Unsupported value: {include_object!r}")
    now = wall_now()
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if continue_:
        meta["continue"] = continue_
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": table_columns(info),
        "rows": [table_row(info, r.obj, row_object(r, include_object), now) for r in records],
    }


def row_object(record: Record, include_object: str) -> Any:
    """What a row carries of ``record`` for ``includeObject`` (``None``, ``Metadata``: a
    PartialObjectMetadata, the default; ``Object``: the whole object)."""
    if include_object == "None":
        return None
    if include_object == "Object":
        return msgspec.Raw(record.full())
    return msgspec.Raw(record.meta_json())


def _count(value: Any) -> int:
    return len(value) if isinstance(value, Mapping | list) else 0


def _custom_columns(info: ServedResource) -> list[dict[str, Any]] | None:
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


def _custom_cells(
    info: ServedResource, obj: Mapping[str, Any], age: str, now: float
) -> list[Any] | None:
    """The cells matching :func:`_custom_columns` (``age``: the AGE cell)."""
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
        try:
            then = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        except ValueError:
            return value
        return human_duration(now - then.timestamp())
    if kind in ("integer", "number", "boolean"):
        return value
    return value if isinstance(value, str) else str(value)
