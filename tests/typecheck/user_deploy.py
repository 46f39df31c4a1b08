"""Deploying a user's operator, as mypy --strict sees it: the permissions a reconciler
declares, what the manager describes, the manifests (typed with the models), and an
emulator checking RBAC for a ServiceAccount. Type-checked by test_typecheck.py."""

from __future__ import annotations

from typing_extensions import assert_type

from kubereflector.client import load_config
from kubereflector.models import Deployment, ServiceAccount
from kubereflector.runtime import (
    LeaderElection,
    Manager,
    ManagerDescription,
    Permission,
    Permissions,
    Request,
    Rule,
)
from kubereflector.runtime.manifests import Manifest, manifests
from kubereflector.testing import ApiServerEmulator
from kubereflector.testing.apiserver import Denial

manager = Manager(
    load_config(),
    namespace="shop",
    leader_election=LeaderElection("shop-operator"),
    metrics_port=8080,
    health_port=8081,
)


@manager.reconciler(
    "foos.samplecontroller.k8s.io",
    owns=["deployments"],
    rbac=[
        Permission("foos.samplecontroller.k8s.io/status", "update", "patch"),
        Permission("secrets", "get", names=["registry"]),
    ],
)
async def reconcile(request: Request) -> None:
    return None


described = manager.describe()
assert_type(described, ManagerDescription)
assert_type(described.permissions, Permissions)
assert_type(described.permissions.cluster, tuple[Rule, ...])
assert_type(described.lease, tuple[str | None, str] | None)
allowed: bool = described.permissions.allows("get", "", "secrets", namespace="shop", name="x")

objects = manifests(described, name="shop-operator", namespace="ops", image="shop:1.0", replicas=2)
assert_type(objects, list[Manifest])
account: ServiceAccount = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {}}
for obj in objects:
    if obj.get("kind") == "Deployment":
        print(obj.get("spec"))
deployment: Deployment = {
    "spec": {"selector": {}, "template": {"spec": {"containers": []}}},
}


async def check() -> None:
    async with ApiServerEmulator(rbac="report") as server:
        server.create("serviceaccounts", {"metadata": {"name": "shop-operator"}}, namespace="ops")
        token = server.service_account_token("shop-operator", "ops")
        assert_type(token, str)
        server.write_kubeconfig("operator.kubeconfig", token=token)
        alice = server.add_user("alice", groups=["team"])
        assert_type(alice, str)
        denials = server.denials()
        assert_type(denials, list[Denial])
        for denial in denials:
            assert_type(denial.verb, str)
            assert_type(denial.resource_request, bool)
