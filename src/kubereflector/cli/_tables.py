"""The tables ``kubereflector get`` prints: kubectl's columns for the common kinds.

Private to :mod:`kubereflector.cli`. Pure functions of the cached objects: no I/O.
Pods: NAME READY STATUS RESTARTS AGE (``wide``: IP NODE); deployments: NAME READY
UP-TO-DATE AVAILABLE AGE; configmaps: NAME DATA AGE; nodes: NAME STATUS ROLES AGE
VERSION; namespaces: NAME STATUS AGE; a CRD's resource: its additionalPrinterColumns;
everything else: NAME AGE.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._kubectl.duration import age
from .._kubectl.jsonpath import json_path
from ..cache.keys import KubeObject, get_metadata

__all__ = ["render_table"]

Cell = Callable[[Mapping[str, Any]], str]


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _container_statuses(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    statuses = _status(obj).get("containerStatuses") or []
    return [c for c in statuses if isinstance(c, Mapping)]


def _pod_ready(obj: Mapping[str, Any]) -> str:
    ready = sum(1 for c in _container_statuses(obj) if c.get("ready"))
    return f"{ready}/{len(_spec(obj).get('containers') or [])}"


def _pod_status(obj: Mapping[str, Any]) -> str:
    if (get_metadata(obj) or {}).get("deletionTimestamp"):
        return "Terminating"
    status = _status(obj)
    shown = str(status.get("reason") or status.get("phase") or "Pending")
    for c in _container_statuses(obj):
        raw = c.get("state")
        state: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        reason = (state.get("waiting") or {}).get("reason") or (state.get("terminated") or {}).get(
            "reason"
        )
        if reason and reason not in ("ContainerCreating", "PodInitializing", "Completed"):
            shown = str(reason)
    return shown


def _restarts(obj: Mapping[str, Any]) -> str:
    return str(sum(int(c.get("restartCount") or 0) for c in _container_statuses(obj)))


def _count(value: Any) -> str:
    return str(len(value)) if isinstance(value, Mapping | list) else "0"


def _node_status(obj: Mapping[str, Any]) -> str:
    for condition in _status(obj).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            ready = "Ready" if condition.get("status") == "True" else "NotReady"
            return ready + (",SchedulingDisabled" if _spec(obj).get("unschedulable") else "")
    return "Unknown"


def _node_roles(obj: Mapping[str, Any]) -> str:
    labels = (get_metadata(obj) or {}).get("labels") or {}
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in labels if k.startswith(prefix) and k != prefix)
    return ",".join(roles) or "<none>"


def _columns(kind: str, wide: bool) -> list[tuple[str, Cell]]:
    """The columns between NAME and AGE, then after AGE (``wide``)."""
    if kind == "Pod":
        columns: list[tuple[str, Cell]] = [
            ("READY", _pod_ready),
            ("STATUS", _pod_status),
            ("RESTARTS", _restarts),
            ("AGE", lambda o: ""),
        ]
        if wide:
            columns += [
                ("IP", lambda o: str(_status(o).get("podIP") or "<none>")),
                ("NODE", lambda o: str(_spec(o).get("nodeName") or "<none>")),
            ]
        return columns
    if kind == "Deployment":
        return [
            (
                "READY",
                lambda o: (
                    f"{int(_status(o).get('readyReplicas') or 0)}/"
                    f"{int(_spec(o).get('replicas', 1) or 0)}"
                ),
            ),
            ("UP-TO-DATE", lambda o: str(int(_status(o).get("updatedReplicas") or 0))),
            ("AVAILABLE", lambda o: str(int(_status(o).get("availableReplicas") or 0))),
            ("AGE", lambda o: ""),
        ]
    if kind == "ConfigMap":
        return [
            ("DATA", lambda o: str(int(_count(o.get("data"))) + int(_count(o.get("binaryData"))))),
            ("AGE", lambda o: ""),
        ]
    if kind == "Namespace":
        return [
            ("STATUS", lambda o: str(_status(o).get("phase") or "Active")),
            ("AGE", lambda o: ""),
        ]
    if kind == "Node":
        columns = [
            ("STATUS", _node_status),
            ("ROLES", _node_roles),
            ("AGE", lambda o: ""),
            (
                "VERSION",
                lambda o: str((_status(o).get("nodeInfo") or {}).get("kubeletVersion", "")),
            ),
        ]
        if wide:
            columns.append(
                (
                    "INTERNAL-IP",
                    lambda o: next(
                        (
                            str(a.get("address"))
                            for a in _status(o).get("addresses") or []
                            if isinstance(a, Mapping) and a.get("type") == "InternalIP"
                        ),
                        "<none>",
                    ),
                )
            )
        return columns
    return [("AGE", lambda o: "")]


def _printer_cell(column: Mapping[str, Any], now: float) -> Cell:
    path = str(column.get("jsonPath", ""))
    is_date = column.get("type") == "date"

    def cell(obj: Mapping[str, Any]) -> str:
        value = json_path(obj, path)
        if value is None:
            return "<none>"
        if is_date:
            return age(value, now)
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return cell


def _printer_columns(
    printer_columns: Sequence[Mapping[str, Any]], wide: bool, now: float
) -> list[tuple[str, Cell]]:
    return [
        (str(c.get("name", "")).upper(), _printer_cell(c, now))
        for c in printer_columns
        if wide or not int(c.get("priority", 0) or 0)
    ]


def render_table(
    objects: Sequence[KubeObject],
    kind: str,
    *,
    show_namespace: bool,
    wide: bool = False,
    printer_columns: Sequence[Mapping[str, Any]] = (),
    header: bool = True,
    now: datetime.datetime | None = None,
) -> str:
    """The objects as kubectl prints them (three spaces between columns).

    ``printer_columns``: a CRD version's ``additionalPrinterColumns`` (they replace
    the kind's columns; ``priority`` > 0 only with ``wide``). ``header``: print the
    column names first. ``now``: the time AGE is counted to (the current time by
    default)."""
    seconds = (now or datetime.datetime.now(datetime.timezone.utc)).timestamp()
    if printer_columns:
        columns = _printer_columns(printer_columns, wide, seconds)
    else:
        columns = _columns(kind, wide)
    names = ["NAME", *(name for name, _ in columns)]
    if show_namespace:
        names.insert(0, "NAMESPACE")
    rows = [names] if header else []
    for obj in objects:
        meta = get_metadata(obj) or {}
        row = [str(meta.get("name", ""))]
        for name, cell in columns:
            if name == "AGE" and not printer_columns:
                row.append(age(meta.get("creationTimestamp"), seconds))
            else:
                row.append(cell(obj))
        if show_namespace:
            row.insert(0, str(meta.get("namespace", "")))
        rows.append(row)
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(names))]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
