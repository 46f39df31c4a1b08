"""The CLI's kubectl-style tables (pure functions, a fixed 'now')."""

from __future__ import annotations

import datetime
from typing import Any

from kubereflector.cli._tables import render_table

NOW = datetime.datetime(2025, 1, 2, 12, 0, 0, tzinfo=datetime.timezone.utc)
CREATED = "2025-01-02T11:00:00Z"  # an hour before NOW


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_nodes_with_roles_status_and_wide_internal_ip() -> None:
    node: dict[str, Any] = {
        "metadata": {
            "name": "n1",
            "creationTimestamp": CREATED,
            "labels": {"node-role.kubernetes.io/control-plane": ""},
        },
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.34.0"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        },
    }
    bare: dict[str, Any] = {"metadata": {"name": "n2", "creationTimestamp": CREATED}}
    table = render_table([node, bare], "Node", show_namespace=False, wide=True, now=NOW)
    assert rows(table) == [
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP"],
        ["n1", "Ready,SchedulingDisabled", "control-plane", "60m", "v1.34.0", "10.0.0.1"],
        ["n2", "Unknown", "<none>", "60m", "<none>"],
    ]


def test_namespaced_rows_without_header_and_other_kinds() -> None:
    cm: dict[str, Any] = {
        "metadata": {"name": "c", "namespace": "ns", "creationTimestamp": CREATED},
        "data": {"a": "1"},
        "binaryData": {"b": ""},
    }
    table = render_table([cm], "ConfigMap", show_namespace=True, header=False, now=NOW)
    assert rows(table) == [["ns", "c", "2", "60m"]]
    assert render_table([], "ConfigMap", show_namespace=False, header=False, now=NOW) == ""
    other = render_table([cm], "Lease", show_namespace=False, now=NOW)
    assert rows(other) == [["NAME", "AGE"], ["c", "60m"]]


def test_terminating_pod() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "creationTimestamp": CREATED, "deletionTimestamp": CREATED},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "containerStatuses": [{"ready": True, "restartCount": 2}]},
    }
    assert rows(render_table([pod], "Pod", show_namespace=False, now=NOW))[1] == [
        "p",
        "1/2",
        "Terminating",
        "2",
        "60m",
    ]
