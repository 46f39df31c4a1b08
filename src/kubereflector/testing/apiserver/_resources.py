"""The emulator's resource catalogue: what each resource is, discovery documents, tables.

Private to :mod:`kubereflector.testing.apiserver`. Pure data and functions: no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Final

from ._fields import (
    DEFAULT_SCHEMA,
    DEPLOYMENT_SCHEMA,
    EVENT_SCHEMA,
    NAMESPACE_SCHEMA,
    POD_SCHEMA,
    SERVICE_SCHEMA,
    Schema,
)
from ._printers import custom_cells, custom_columns

DEFAULT_VERBS: Final = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)
SUBRESOURCE_VERBS: Final = ("get", "patch", "update")
_META_FIELDS: Final = frozenset({"metadata.name", "metadata.namespace"})
_POD_FIELDS: Final = _META_FIELDS | {
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}
_EVENT_FIELDS: Final = _META_FIELDS | {
    "reason",
    "type",
    "reportingController",
    "regarding.apiVersion",
    "regarding.kind",
    "regarding.name",
    "regarding.namespace",
    "regarding.uid",
    "regarding.resourceVersion",
    "regarding.fieldPath",
}


@dataclass(frozen=True, slots=True, eq=False)
class ServedResource:
    """One resource the emulator serves (a built-in, a CRD's, or one registered from
    Python): its names, scope, verbs and what its objects carry. Immutable.

    Not :class:`kubereflector.client.ResourceInfo`, the client's view of a resource
    found through discovery: this is the server's, with what it needs to store,
    validate and print objects.

    ``generation``: whether objects carry ``metadata.generation`` (custom
    resources and workloads do; ConfigMaps, Secrets, Events, ... do not).
    ``schema``: its granular lists, for field management (server-side apply).
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = DEFAULT_VERBS
    categories: tuple[str, ...] = ()
    builtin: bool = False
    subresources: tuple[str, ...] = ()
    field_selectors: frozenset[str] = _META_FIELDS
    return_deleted_object: bool = False
    generation: bool = True
    schema: Schema = DEFAULT_SCHEMA
    # A CRD's openAPIV3Schema (served in the OpenAPI documents; None: schemaless).
    openapi_schema: Mapping[str, Any] | None = None
    # A CRD's additionalPrinterColumns (the Table kubectl prints).
    printer_columns: tuple[Mapping[str, Any], ...] = ()
    # Derived in __post_init__.
    api_version: str = field(init=False)
    group_resource: str = field(init=False)
    typemeta_prefix: bytes = field(init=False)

    def __post_init__(self) -> None:
        if not self.singular:
            object.__setattr__(self, "singular", self.kind.lower())
        api_version = f"{self.group}/{self.version}" if self.group else self.version
        object.__setattr__(self, "api_version", api_version)
        gr = f"{self.plural}.{self.group}" if self.group else self.plural
        object.__setattr__(self, "group_resource", gr)
        prefix = f'{{"kind":"{self.kind}","apiVersion":"{api_version}",'.encode()
        object.__setattr__(self, "typemeta_prefix", prefix)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


BUILTIN_RESOURCES: Final = (
    ServedResource(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        builtin=True,
        subresources=("status", "finalize"),
        field_selectors=_META_FIELDS | {"status.phase"},
        return_deleted_object=True,
        generation=False,
        schema=NAMESPACE_SCHEMA,
    ),
    ServedResource(
        "",
        "v1",
        "pods",
        "Pod",
        short_names=("po",),
        categories=("all",),
        builtin=True,
        subresources=("status",),
        field_selectors=_POD_FIELDS,
        return_deleted_object=True,
        schema=POD_SCHEMA,
    ),
    ServedResource(
        "", "v1", "configmaps", "ConfigMap", short_names=("cm",), builtin=True, generation=False
    ),
    ServedResource(
        "",
        "v1",
        "secrets",
        "Secret",
        builtin=True,
        field_selectors=_META_FIELDS | {"type"},
        generation=False,
    ),
    ServedResource(
        "",
        "v1",
        "services",
        "Service",
        short_names=("svc",),
        categories=("all",),
        builtin=True,
        subresources=("status",),
        return_deleted_object=True,
        generation=False,
        schema=SERVICE_SCHEMA,
    ),
    ServedResource(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        short_names=("deploy",),
        categories=("all",),
        builtin=True,
        subresources=("status",),
        schema=DEPLOYMENT_SCHEMA,
    ),
    ServedResource(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        short_names=("ev",),
        builtin=True,
        field_selectors=_EVENT_FIELDS,
        generation=False,
        schema=EVENT_SCHEMA,
    ),
    ServedResource("coordination.k8s.io", "v1", "leases", "Lease", builtin=True, generation=False),
)

EMULATED_VERSION: Final = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.0-kubereflector-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

AGGREGATED_V2: Final = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def group_versions(resources: Iterable[ServedResource]) -> dict[str, list[str]]:
    """``{group: [versions...]}`` in registration order (the core group is ``""``)."""
    out: dict[str, list[str]] = {}
    for info in resources:
        versions = out.setdefault(info.group, [])
        if info.version not in versions:
            versions.append(info.version)
    return out


def api_versions(server_address: str) -> dict[str, Any]:
    """``GET /api`` (legacy discovery)."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_entry(group: str, versions: Sequence[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": listed, "preferredVersion": listed[0]}


def api_group_list(resources: Iterable[ServedResource]) -> dict[str, Any]:
    """``GET /apis`` (legacy discovery)."""
    groups = [_group_entry(g, vs) for g, vs in group_versions(resources).items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(resources: Iterable[ServedResource], group: str) -> dict[str, Any] | None:
    """``GET /apis/{group}``, or ``None`` for an unknown group."""
    versions = group_versions(resources).get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def api_resource_list(
    resources: Iterable[ServedResource], group: str, version: str
) -> dict[str, Any] | None:
    """``GET /api/v1`` or ``/apis/{group}/{version}``, or ``None`` if not served."""
    entries: list[dict[str, Any]] = []
    for info in resources:
        if info.group != group or info.version != version:
            continue
        entry: dict[str, Any] = {
            "name": info.plural,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": list(info.verbs),
        }
        if info.short_names:
            entry["shortNames"] = list(info.short_names)
        if info.categories:
            entry["categories"] = list(info.categories)
        entries.append(entry)
        entries.extend(
            {
                "name": f"{info.plural}/{sub}",
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": list(SUBRESOURCE_VERBS) if sub != "finalize" else ["update"],
            }
            for sub in info.subresources
        )
    if not entries:
        return None
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}


def aggregated_discovery(resources: Iterable[ServedResource], *, core: bool) -> dict[str, Any]:
    """``GET /api`` (``core``) or ``/apis``: an ``apidiscovery.k8s.io/v2`` APIGroupDiscoveryList."""
    by_group: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for info in resources:
        if (info.group == "") != core:
            continue
        entry: dict[str, Any] = {
            "resource": info.plural,
            "responseKind": {"group": info.group, "version": info.version, "kind": info.kind},
            "scope": "Namespaced" if info.namespaced else "Cluster",
            "singularResource": info.singular,
            "verbs": list(info.verbs),
        }
        if info.short_names:
            entry["shortNames"] = list(info.short_names)
        if info.categories:
            entry["categories"] = list(info.categories)
        if info.subresources:
            entry["subresources"] = [
                {
                    "subresource": sub,
                    "responseKind": {
                        "group": info.group,
                        "version": info.version,
                        "kind": info.kind,
                    },
                    "verbs": list(SUBRESOURCE_VERBS) if sub != "finalize" else ["update"],
                }
                for sub in info.subresources
            ]
        by_group.setdefault(info.group, {}).setdefault(info.version, []).append(entry)
    items = []
    for group, versions in by_group.items():
        metadata: dict[str, Any] = {"creationTimestamp": None}
        if group:
            metadata["name"] = group
        items.append(
            {
                "metadata": metadata,
                "versions": [
                    {"version": v, "resources": rs, "freshness": "Current"}
                    for v, rs in versions.items()
                ],
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }


# -- tables (what `kubectl get` prints) ------------------------------------------------------


def human_duration(seconds: float) -> str:
    """kube's ``duration.HumanDuration`` (the AGE column)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def _age(obj: Mapping[str, Any], now: float) -> str:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not isinstance(stamp, str):
        return "<unknown>"
    try:
        created = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return "<unknown>"
    return human_duration(now - created.timestamp())


def _column(name: str, description: str, fmt: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "type": "string",
        "format": fmt,
        "description": description,
        "priority": 0,
    }


_NAME_COLUMN: Final = _column(
    "Name",
    "Name must be unique within a namespace. https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    "name",
)
_AGE_COLUMN: Final = _column(
    "Age",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
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
    if info.plural == "pods" and info.builtin:
        return [
            _NAME_COLUMN,
            _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
            _column("Status", "The aggregate status of the containers in this pod."),
            {
                **_column(
                    "Restarts",
                    "The number of times the containers in this pod have been restarted.",
                ),
                "type": "integer",
            },
            _AGE_COLUMN,
            {**_column("IP", "IP address allocated to the pod."), "priority": 1},
            {**_column("Node", "Name of the node the pod runs on."), "priority": 1},
            {**_column("Nominated Node", "Node the scheduler nominated."), "priority": 1},
            {**_column("Readiness Gates", "The pod's readiness gates."), "priority": 1},
        ]
    if info.plural == "namespaces" and info.builtin:
        return [_NAME_COLUMN, _column("Status", "The status of the namespace"), _AGE_COLUMN]
    custom = custom_columns(info)
    if custom is not None:
        return [_NAME_COLUMN, *custom]
    return [_NAME_COLUMN, _AGE_COLUMN]


def table_row(
    info: ServedResource, obj: Mapping[str, Any], row_object: Any, now: float
) -> dict[str, Any]:
    name = (obj.get("metadata") or {}).get("name", "")
    if info.plural == "pods" and info.builtin:
        cells = [name, *_pod_cells(obj), _age(obj, now), *_pod_wide_cells(obj)]
    elif info.plural == "namespaces" and info.builtin:
        phase = (obj.get("status") or {}).get("phase") or "Active"
        cells = [name, phase, _age(obj, now)]
    else:
        custom = custom_cells(info, obj, _age(obj, now), now)
        cells = [name, *custom] if custom is not None else [name, _age(obj, now)]
    row: dict[str, Any] = {"cells": cells}
    if row_object is not None:
        row["object"] = row_object
    return row


def wall_now() -> float:
    """Seconds since the epoch (timestamps in objects are wall-clock, as in kube)."""
    return time.time()


def timestamp(now: float | None = None) -> str:
    """RFC 3339 in UTC with second precision, as ``metav1.Time`` serialises."""
    moment = datetime.fromtimestamp(wall_now() if now is None else now, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
