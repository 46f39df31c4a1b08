"""Aggregated discovery documents (``apidiscovery.k8s.io/v2``), for the tests whose
fake server must let a client resolve resource names."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete"]


class Resource(NamedTuple):
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: list[str]
    verbs: list[str] = ALL_VERBS


def aggregated_discovery(resources: Iterable[Resource], *, core: bool) -> dict[str, Any]:
    """What ``/api`` answers (``core``: the resources of the core group ``""``) or
    ``/apis`` (the others), listing ``resources`` by group and version in the
    order given."""
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in resources:
        if (r.group == "") != core:
            continue
        groups.setdefault(r.group, {}).setdefault(r.version, []).append(
            {
                "resource": r.plural,
                "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                "scope": "Namespaced" if r.namespaced else "Cluster",
                "singularResource": r.kind.lower(),
                "shortNames": r.short_names,
                "verbs": r.verbs,
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "items": [
            {
                "metadata": {"name": group},
                "versions": [{"version": v, "resources": rs} for v, rs in versions.items()],
            }
            for group, versions in groups.items()
        ],
    }
