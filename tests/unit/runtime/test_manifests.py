"""runtime.manifests: the objects that deploy an operator, from its Manager's description."""

from __future__ import annotations

from typing import Any

import pytest
from typing_extensions import NotRequired, TypedDict

from kubereflector.client import ClientConfig
from kubereflector.models import ObjectMeta
from kubereflector.models.crd import crd_manifest, custom_resource
from kubereflector.runtime import LeaderElection, Manager, WebhookOptions
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


# -- what the manager declares: its CRDs, and what serves its webhooks ---------------------------

SHOPS = "manifests.shop.example"


class ShopSpec(TypedDict):
    items: int


@custom_resource(group=SHOPS, version="v1alpha1", kind="Shop")
class ShopV1alpha1(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: ShopSpec


@custom_resource(group=SHOPS, version="v1", storage=True)
class Shop(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: ShopSpec


def same(shop: Any) -> Any:
    return shop


def check(shop: Shop, request: Any) -> None:
    return None


def shop_manager(*, webhooks: bool, **kwargs: Any) -> Manager:
    m = Manager(ClientConfig("https://cluster.example"), **kwargs)
    m.reconciler(Shop, owns=["configmaps"], reconcile=nothing)
    if webhooks:
        m.defaulter(Shop)(check)
        m.validator(Shop)(check)
        m.converter(Shop, ShopV1alpha1, to_hub=same, from_hub=same)
    return m


def test_the_custom_resources_a_manager_names_give_their_crds_first() -> None:
    objects = manifests(shop_manager(webhooks=False).describe(), name="shop", image="i")
    assert [o["kind"] for o in objects][:2] == ["CustomResourceDefinition", "ServiceAccount"]
    assert objects[0] == crd_manifest(Shop)
    assert "conversion" not in objects[0]["spec"]
    assert "Service" not in by_kind(objects)


def test_a_crd_given_under_a_generated_ones_name_replaces_it() -> None:
    mine = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"shops.{SHOPS}"},
    }
    objects = manifests(
        shop_manager(webhooks=False).describe(),
        name="shop",
        image="i",
        custom_resource_definitions=[mine],
    )
    assert by_kind(objects)["CustomResourceDefinition"] == [mine]


def test_a_manager_serving_webhooks_gets_their_service_certificate_and_configurations() -> None:
    manager = shop_manager(
        webhooks=True, webhook_port=9443, webhook_options=WebhookOptions(cert_dir="/certs/")
    )
    objects = manifests(manager.describe(), name="shop", namespace="ops", image="i")
    assert [o["kind"] for o in objects] == [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Service",
        "Deployment",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    injected = {"cert-manager.io/inject-ca-from": "ops/shop-webhook"}
    service = {"namespace": "ops", "name": "shop-webhook", "port": 443}
    crd = objects[0]
    assert crd["metadata"]["annotations"] == {
        **crd_manifest(Shop)["metadata"].get("annotations", {}),
        **injected,
    }
    assert crd["spec"]["conversion"] == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {"service": {**service, "path": "/convert"}},
            "conversionReviewVersions": ["v1"],
        },
    }
    assert "conversion" not in crd_manifest(Shop).get("spec", {})  # the declaration is untouched
    (svc,) = by_kind(objects)["Service"]
    assert svc["metadata"]["namespace"] == "ops"
    assert svc["spec"] == {
        "selector": {"app.kubernetes.io/name": "shop"},
        "ports": [{"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}],
    }
    pod = by_kind(objects)["Deployment"][0]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {"name": "webhook", "containerPort": 9443, "protocol": "TCP"} in container["ports"]
    assert container["volumeMounts"][-1] == {
        "name": "webhook-cert",
        "mountPath": "/certs",
        "readOnly": True,
    }
    assert pod["volumes"][-1] == {
        "name": "webhook-cert",
        "secret": {"secretName": "shop-webhook-cert"},
    }
    mutating, validating = objects[-2:]
    for configuration in (mutating, validating):
        assert configuration["metadata"]["name"] == "shop"
        assert configuration["metadata"]["annotations"] == injected
        (hook,) = configuration["webhooks"]
        assert hook["clientConfig"]["service"]["name"] == "shop-webhook"
        assert "caBundle" not in hook["clientConfig"]
    assert mutating["webhooks"][0]["clientConfig"]["service"]["path"].startswith("/mutate-")
    assert validating["webhooks"][0]["clientConfig"]["service"]["path"].startswith("/validate-")


def test_a_webhook_port_with_nothing_registered_adds_nothing() -> None:
    manager = shop_manager(
        webhooks=False, webhook_port=9443, webhook_options=WebhookOptions(cert_dir="/certs")
    )
    objects = manifests(manager.describe(), name="shop", image="i")
    assert [o["kind"] for o in objects] == [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"webhook_port": 9443}, "serves webhooks with a self-signed certificate"),
        (
            {"webhook_port": 9443, "webhook_options": WebhookOptions(cert_dir="certs")},
            "cert_dir must be an absolute path, not 'certs'",
        ),
        (
            {"webhook_port": 0, "webhook_options": WebhookOptions(cert_dir="/certs")},
            "webhook_port=0 lets the system pick a port",
        ),
    ],
)
def test_webhooks_that_a_cluster_cannot_reach_or_trust_are_refused(
    kwargs: dict[str, Any], message: str
) -> None:
    description = shop_manager(webhooks=True, **kwargs).describe()
    with pytest.raises(ValueError, match=message):
        manifests(description, name="shop", image="i")
