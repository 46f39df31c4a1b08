"""The emulator's printer-column JSONPath and CRD admission (pure functions)."""

from __future__ import annotations

from typing import Any

import pytest

from kubereflector import ApiError
from kubereflector._kubectl.jsonpath import json_path
from kubereflector.testing import ApiServerEmulator

OBJ: dict[str, Any] = {
    "spec": {"size": 3, "ports": [{"port": 80}, {"port": 443}]},
    "status": {
        "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "Synced", "status": "True"},
        ]
    },
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".spec.size", 3),
        ("{.spec.size}", 3),
        (".spec.ports[1].port", 443),
        (".spec.ports[*].port", 80),
        ('.status.conditions[?(@.type=="Synced")].status', "True"),
        (".status.conditions[?(@.type=='Ready')].status", "False"),
        (".spec.missing", None),
        (".spec.ports[5]", None),
        ("spec size", None),
    ],
)
def test_json_path(path: str, expected: Any) -> None:
    assert json_path(OBJ, path) == expected


def crd(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1", "served": True, "storage": True}],
    }
    base.update(spec)
    return {"metadata": {"name": "widgets.example.com"}, "spec": base}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"scope": "Global"}, 'spec.scope: Unsupported value: "Global"'),
        ({"group": "nodot"}, "spec.group: Invalid value"),
        ({"versions": []}, "spec.versions: Invalid value"),
        (
            {"versions": [{"name": "v1", "storage": True}, {"name": "v2", "storage": True}]},
            "exactly one version marked as storage version",
        ),
        ({"names": {"plural": "gadgets", "kind": "Gadget"}}, 'must be spec.names.plural+"."'),
    ],
)
def test_invalid_crds_are_refused_and_serve_nothing(spec: dict[str, Any], message: str) -> None:
    server = ApiServerEmulator()
    with pytest.raises(ApiError) as caught:
        server.create("customresourcedefinitions", crd(**spec))
    assert caught.value.status == 422
    assert message in str(caught.value)
    assert server.objects("customresourcedefinitions") == []
    with pytest.raises(ValueError, match="unknown resource"):
        server.objects("widgets")


def test_a_crd_serves_its_resource_until_deleted() -> None:
    server = ApiServerEmulator()
    server.create("customresourcedefinitions", crd(scope="Cluster"))
    server.create("widgets.example.com", {"metadata": {"name": "w1"}, "spec": {}})
    assert [w["metadata"]["name"] for w in server.objects("widgets")] == ["w1"]
    assert "namespace" not in server.get("widgets", "w1")["metadata"]  # cluster-scoped
    server.delete("customresourcedefinitions", "widgets.example.com")
    with pytest.raises(ValueError, match="unknown resource"):
        server.objects("widgets")
