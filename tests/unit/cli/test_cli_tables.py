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


def test_age_is_kubectls_human_duration() -> None:
    # kubectl shows two significant figures below 10 minutes, 8 hours and 8 days;
    # the command used to round these down to "3m", "3h" and "2d".
    def created(seconds: float) -> dict[str, Any]:
        then = NOW - datetime.timedelta(seconds=seconds)
        stamp = then.isoformat().replace("+00:00", "Z")
        return {"metadata": {"name": f"age-{seconds:g}", "creationTimestamp": stamp}}

    objects = [created(s) for s in (200, 3 * 3600 + 60, 2 * 86400 + 3600, 3 * 365 * 86400, -5)]
    table = render_table(objects, "Lease", show_namespace=False, header=False, now=NOW)
    assert [row[1] for row in rows(table)] == ["3m20s", "3h1m", "2d1h", "3y", "<invalid>"]


def test_date_printer_columns_show_an_age() -> None:
    columns = [{"name": "Started", "type": "date", "jsonPath": ".status.started"}]
    started: dict[str, Any] = {
        "metadata": {"name": "a"},
        "status": {"started": "2025-01-02T11:56:40Z"},
    }
    day_only: dict[str, Any] = {"metadata": {"name": "b"}, "status": {"started": "2025-01-02"}}
    table = render_table(
        [started, day_only], "Widget", show_namespace=False, printer_columns=columns, now=NOW
    )
    # A date without a time and zone is not a timestamp: no age (it used to raise a
    # TypeError comparing a naive and an aware time, ending `get` with an internal error).
    assert rows(table) == [["NAME", "STARTED"], ["a", "3m20s"], ["b", "<unknown>"]]
