"""What the emulator says it serves: ``/version`` and the discovery documents, legacy
(``/api``, ``/apis``, ``/apis/{group}[/{version}]``) and aggregated
(``apidiscovery.k8s.io/v2``).

Private to :mod:`kubereflector.testing.apiserver`. Pure functions of the served
resources: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from ._resources import ServedResource

__all__ = [
    "AGGREGATED_V2",
    "EMULATED_VERSION",
    "aggregated_discovery",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "api_versions",
]

SUBRESOURCE_VERBS: Final = ("get", "patch", "update")
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


_OTHER_KINDS: Final = {"token": ("authentication.k8s.io", "TokenRequest")}
"""Subresources served as another kind than their resource's (group, kind; version v1)."""


def _subresource(info: ServedResource, sub: str) -> tuple[dict[str, str], list[str]]:
    """The group/version/kind a subresource answers with, and its verbs."""
    other = _OTHER_KINDS.get(sub)
    if other is not None:
        return {"group": other[0], "version": "v1", "kind": other[1]}, ["create"]
    gvk = {"group": info.group, "version": info.version, "kind": info.kind}
    return gvk, list(SUBRESOURCE_VERBS) if sub != "finalize" else ["update"]


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
        for sub in info.subresources:
            gvk, verbs = _subresource(info, sub)
            sub_entry: dict[str, Any] = {
                "name": f"{info.plural}/{sub}",
                "singularName": "",
                "namespaced": info.namespaced,
            }
            if sub in _OTHER_KINDS:
                sub_entry["group"], sub_entry["version"] = gvk["group"], gvk["version"]
            entries.append({**sub_entry, "kind": gvk["kind"], "verbs": verbs})
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
                    "responseKind": _subresource(info, sub)[0],
                    "verbs": _subresource(info, sub)[1],
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
