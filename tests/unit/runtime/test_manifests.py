"""runtime.manifests: the objects that deploy an operator, from its Manager's description."""

from __future__ import annotations

from typing import Any

import pytest

from kubereflector.client import ClientConfig
from kubereflector.runtime import LeaderElection, Manager
from kubereflector.runtime.manifests import DEFAULT_RESOURCES, manifests
from kubereflector.runtime.permissions import ManagerDescription, Permissions

LABELS = {"app.kubernetes.io/name": "shop", "app.kubernetes.io/managed-by": "kubereflector"}


async def nothing(request: Any) -> None:
    return None


def described(**kwargs: Any) -> ManagerDescription:
    m = Manager(ClientConfig("https://cluster.example"), **kwargs)
    m.reconciler("configmaps", owns=["secrets"], reconcile=nothing)
    return m.describe()


def by_kind(objects: list[Any]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for obj in objects:
        found.setdefault(obj["kind"], []).append(obj)
    return found


def test_a_namespaced_operator_with_replicas() -> None:
    description = described(
        namespace="shop",
        leader_election=LeaderElection("shop"),
        metrics_port=8080,
        health_port=8081,
        graceful_shutdown_timeout=12.5,
    )
    objects = manifests(description, name="shop", namespace="ops", image="shop:1.2", replicas=3)
    assert [o["kind"] for o in objects] == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
    ]
    account, role, binding, deployment, budget = objects
    assert account == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "shop", "namespace": "ops", "labels": LABELS},
    }
    # The Role is where the manager works; it binds the ServiceAccount where it runs.
    assert role["metadata"] == {"name": "shop", "namespace": "shop", "labels": LABELS}
    assert {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["create"],
    } in role["rules"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "shop",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "shop", "namespace": "ops"}]
    spec = deployment["spec"]
    assert spec["replicas"] == 3
    assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/name": "shop"}}
    pod = spec["template"]["spec"]
    assert spec["template"]["metadata"]["labels"] == LABELS
    assert pod["serviceAccountName"] == "shop"
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["terminationGracePeriodSeconds"] == 23  # the graceful shutdown, and 10 s
    (container,) = pod["containers"]
    assert container["image"] == "shop:1.2"
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["resources"] == DEFAULT_RESOURCES
    assert container["ports"] == [
        {"name": "metrics", "containerPort": 8080, "protocol": "TCP"},
        {"name": "health", "containerPort": 8081, "protocol": "TCP"},
    ]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["env"] == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}}]
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "shop"}},
    }


def test_a_cluster_wide_operator_gets_a_cluster_role_and_its_lease_a_role_where_it_runs() -> None:
    description = described(leader_election=LeaderElection("shop"))
    objects = by_kind(manifests(description, name="shop", namespace="ops", image="shop"))
    (cluster_role,) = objects["ClusterRole"]
    assert cluster_role["metadata"] == {"name": "shop", "labels": LABELS}
    assert {r["resources"][0] for r in cluster_role["rules"]} == {
        "configmaps",
        "configmaps/finalizers",
        "secrets",
        "events",
    }
    (cluster_binding,) = objects["ClusterRoleBinding"]
    assert cluster_binding["roleRef"]["kind"] == "ClusterRole"
    assert cluster_binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "shop", "namespace": "ops"}
    ]
    (role,) = objects["Role"]
    assert role["metadata"]["namespace"] == "ops"
    assert [r["resources"] for r in role["rules"]] == [["leases"], ["leases"]]
    assert "PodDisruptionBudget" not in objects  # one replica


def test_the_lease_role_merges_with_the_managers_role_in_one_namespace() -> None:
    description = described(namespace="ops", leader_election=LeaderElection("shop"))
    objects = by_kind(manifests(description, name="shop", namespace="ops", image="shop"))
    (role,) = objects["Role"]
    assert {r["resources"][0] for r in role["rules"]} >= {"leases", "configmaps"}


def test_ports_and_probes_follow_what_the_manager_serves() -> None:
    same = manifests(described(metrics_port=8080, health_port=8080), name="a", image="i")
    container = by_kind(same)["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"]["port"] == "http"
    bare = manifests(described(), name="a", image="i", resources={"limits": {"memory": "1Gi"}})
    container = by_kind(bare)["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    assert "ports" not in container
    assert "livenessProbe" not in container
    assert container["resources"] == {"limits": {"memory": "1Gi"}}
    metrics_only = manifests(described(metrics_port=9090), name="a", image="i")
    container = by_kind(metrics_only)["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}]
    assert "readinessProbe" not in container


def test_custom_resource_definitions_come_first_and_webhooks_last() -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}
    hook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
    }
    objects = manifests(
        described(),
        name="a",
        image="i",
        custom_resource_definitions=[crd],
        webhook_configurations=[hook],
    )
    assert objects[0] == crd
    assert objects[0] is not crd
    assert objects[-1] == hook


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "Shop"}, "name must be a DNS-1123 label"),
        ({"namespace": "a.b"}, "namespace must be a DNS-1123 label"),
        ({"image": " "}, "image must name a container image"),
        ({"replicas": 0}, "replicas must be an integer >= 1"),
        ({"replicas": True}, "replicas must be an integer >= 1"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"name": "shop", "image": "shop", **kwargs}
    with pytest.raises(ValueError, match=message):
        manifests(described(), **arguments)


def test_a_port_the_system_picks_cannot_be_deployed() -> None:
    description = ManagerDescription(None, Permissions(), metrics_port=0, health_port=8081)
    with pytest.raises(ValueError, match="metrics_port=0 lets the system pick a port"):
        manifests(description, name="a", image="i")
