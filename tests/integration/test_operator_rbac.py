"""The example operator deployed as its generated manifests say, on the target (the
emulator, or a real kube-apiserver with RBAC on): the manifests apply, and the
operator runs its whole scenario with a token of its ServiceAccount, bound to
exactly that RBAC, without one 403; what the RBAC does not grant stays refused.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import KUBECONFIG_ENV, Target
from test_configmap_replicator import keep_the_copies, load_example
from test_rbac import review, settled

from kubereflector.errors import ApiError
from kubereflector.runtime import Manager
from kubereflector.runtime.manifests import manifests

pytestmark = pytest.mark.asyncio

NAME = "configmap-replicator"


def admin_kubeconfig(target: Target) -> str:
    if target.emulator is not None:
        return target.emulator.kubeconfig_path
    return os.environ[KUBECONFIG_ENV]


def with_token(target: Target, token: str, path: Path) -> str:
    """A copy of the target's kubeconfig whose user is ``token``."""
    config = yaml.safe_load(Path(admin_kubeconfig(target)).read_text(encoding="utf-8"))
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    user = current["context"]["user"]
    config["users"] = [{"name": user, "user": {"token": token}}]
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    path.chmod(0o600)
    return str(path)


async def apply(target: Target, objects: list[Any]) -> None:
    """Create each object through the API, as ``kubectl create -f`` would."""
    resources = await target.client.discovery.resources()
    for obj in objects:
        info = next(
            r
            for r in resources
            if (r.api_version, r.kind) == (obj["apiVersion"], obj["kind"]) and "/" not in r.resource
        )
        await target.client.create(info.api_path(obj["metadata"].get("namespace")), obj)


def requests_answered(manager: Manager, code: str) -> float:
    """How many of the manager's requests were answered with HTTP ``code``."""
    return sum(
        sample.value
        for family in manager.metrics.registry.collect()
        for sample in family.samples
        if sample.name == "rest_client_requests_total" and sample.labels.get("code") == code
    )


@pytest.mark.timeout(120)
async def test_the_replicator_runs_under_exactly_its_generated_rbac(
    target: Target, tmp_path: Path
) -> None:
    ns = target.namespace
    example = load_example()
    flags = ["--namespace", ns, "--leader-elect", "--lease-name", NAME, "--lease-namespace", ns]
    flags += ["--concurrency", "2"]
    # As deployed: the example's default ports (the in-process run below serves none).
    deployed = example.parse_args(["--kubeconfig", admin_kubeconfig(target), *flags])
    objects = manifests(
        example.build(deployed).describe(),
        name=NAME,
        namespace=ns,
        image="registry.example/configmap-replicator:1.0",
        replicas=2,
    )
    kinds = [o["kind"] for o in objects]
    assert kinds == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
    ]
    await apply(target, objects)
    user = f"system:serviceaccount:{ns}:{NAME}"
    await settled(  # a real server's authorizer sees the new binding a moment later
        target,
        {
            "user": user,
            "resourceAttributes": {"verb": "watch", "resource": "configmaps", "namespace": ns},
        },
    )
    # Least privilege: what the operator does not do, it may not do.
    for attributes in (
        {"verb": "list", "resource": "secrets", "namespace": ns},
        {"verb": "list", "resource": "configmaps", "namespace": "default"},
        {
            "verb": "update",
            "resource": "leases",
            "group": "coordination.k8s.io",
            "namespace": ns,
            "name": "another",
        },
        {"verb": "create", "resource": "deployments", "group": "apps", "namespace": ns},
    ):
        status = await review(target, {"user": user, "resourceAttributes": attributes})
        assert status == {"allowed": False}, attributes

    path = f"/api/v1/namespaces/{ns}/serviceaccounts/{NAME}/token"
    token = (await target.client.create(path, {"spec": {}}))["status"]["token"]
    kubeconfig = with_token(target, token, tmp_path / "operator.kubeconfig")
    args = example.parse_args(
        ["--kubeconfig", kubeconfig, *flags, "--metrics-port", "0", "--health-port", "0"]
    )
    manager = example.build(args)
    await keep_the_copies(target, manager)
    assert requests_answered(manager, "200") > 0  # (the manager's requests are counted)
    assert requests_answered(manager, "403") == 0
    if target.emulator is not None:
        assert target.emulator.denials() == []


async def test_a_cluster_wide_operators_manifests_apply(target: Target) -> None:
    ns = target.namespace
    example = load_example()
    flags = ["--kubeconfig", admin_kubeconfig(target), "--leader-elect", "--lease-name", NAME]
    name = f"replicator-{ns}"  # ClusterRoles are cluster-wide: one per test
    objects = manifests(
        example.build(example.parse_args(flags)).describe(), name=name, namespace=ns, image="r:1"
    )
    assert [o["kind"] for o in objects] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
    ]
    try:
        await apply(target, objects)
        user = f"system:serviceaccount:{ns}:{name}"
        everywhere = {"verb": "list", "resource": "configmaps"}
        await settled(target, {"user": user, "resourceAttributes": everywhere})
        lease = {"verb": "update", "resource": "leases", "group": "coordination.k8s.io"}
        assert (
            await review(
                target,
                {"user": user, "resourceAttributes": {**lease, "namespace": ns, "name": NAME}},
            )
        )["allowed"]
        assert not (
            await review(
                target,
                {
                    "user": user,
                    "resourceAttributes": {**lease, "namespace": "default", "name": NAME},
                },
            )
        )["allowed"]
    finally:
        for kind in ("clusterrolebindings", "clusterroles"):
            with contextlib.suppress(ApiError):
                await target.client.delete(f"/apis/rbac.authorization.k8s.io/v1/{kind}/{name}")
