"""Manager.describe(): the RBAC an operator needs, from its registrations alone (no
server), and the Permission values a reconciler declares."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from kubereflector.client import ClientConfig
from kubereflector.models import ApiResource, register
from kubereflector.runtime import LeaderElection, Manager, Permission, Permissions, Rule
from kubereflector.runtime.permissions import ResourceRef, resolve_resource

READ = ("get", "list", "watch")
ALL = ("get", "list", "watch", "create", "update", "patch", "delete")
EVENTS = Rule("events.k8s.io", ("events",), ("create", "patch"))


def manager(**kwargs: Any) -> Manager:
    return Manager(ClientConfig("https://cluster.example"), **kwargs)


async def nothing(request: Any) -> None:
    return None


def test_a_namespaced_manager_gets_a_role_with_what_it_reads_writes_and_declares() -> None:
    m = manager(namespace="shop")
    m.reconciler(
        "configmaps",
        owns=["secrets", "deploy"],
        watches=[("pods", lambda obj: [])],
        rbac=[
            Permission("configmaps/status", "update", "patch"),
            Permission("serviceaccounts", "get", names=["builder"]),
        ],
        reconcile=nothing,
    )
    described = m.describe()
    assert described.namespace == "shop"
    assert described.lease is None
    assert described.permissions == Permissions(
        cluster=(),
        namespaced=(
            (
                "shop",
                (
                    Rule("", ("configmaps", "pods"), READ),  # same verbs: one rule
                    Rule("", ("configmaps/finalizers",), ("update",)),
                    Rule("", ("configmaps/status",), ("update", "patch")),
                    Rule("", ("secrets",), ALL),
                    Rule("", ("serviceaccounts",), ("get",), ("builder",)),
                    Rule("apps", ("deployments",), ALL),
                    EVENTS,
                ),
            ),
        ),
    )


def test_a_cluster_wide_manager_gets_a_cluster_role_and_its_lease_a_role() -> None:
    m = manager(leader_election=LeaderElection("shop-operator"))
    m.reconciler("deployments.apps", owns=["replicasets.apps"], reconcile=nothing)
    m.reconciler("nodes", watches=[("Pod", lambda obj: [])], name="node-watcher", reconcile=nothing)
    described = m.describe()
    assert described.lease == (None, "shop-operator")
    assert described.permissions.cluster == (
        Rule("", ("nodes", "pods"), READ),
        Rule("apps", ("deployments",), READ),
        Rule("apps", ("deployments/finalizers",), ("update",)),
        Rule("apps", ("replicasets",), ALL),
        EVENTS,
    )
    # The Lease: in the operator's own namespace (None), one Lease by name.
    assert described.permissions.namespaced == (
        (
            None,
            (
                Rule("coordination.k8s.io", ("leases",), ("create",)),
                Rule("coordination.k8s.io", ("leases",), ("get", "update"), ("shop-operator",)),
            ),
        ),
    )


def test_cluster_scoped_resources_of_a_namespaced_manager_need_a_cluster_role() -> None:
    m = manager(namespace="shop", leader_election=LeaderElection("op", namespace="ops"))
    m.reconciler("configmaps", watches=[("namespaces", lambda obj: [])], reconcile=nothing)
    permissions = m.describe().permissions
    assert permissions.cluster == (Rule("", ("namespaces",), READ),)
    assert [ns for ns, _ in permissions.namespaced] == ["ops", "shop"]
    assert permissions.rules_in("ops")[1].names == ("op",)
    assert permissions.rules_in("elsewhere") == ()


def test_a_manager_without_reconcilers_needs_nothing_but_its_lease() -> None:
    assert manager().describe().permissions == Permissions()
    described = manager(namespace="x", leader_election=LeaderElection("l")).describe()
    assert described.lease == ("x", "l")
    assert [ns for ns, _ in described.permissions.namespaced] == ["x"]


def test_what_it_serves_is_described() -> None:
    described = manager(metrics_port=9090, health_port=9091, graceful_shutdown_timeout=5).describe()
    assert (described.metrics_port, described.health_port) == (9090, 9091)
    assert described.graceful_shutdown_timeout == 5.0


class Widget(TypedDict):
    metadata: dict[str, Any]


register(Widget, ApiResource("example.com", "v1", "Widget", "widgets", namespaced=False))


@pytest.mark.parametrize(
    ("name", "ref", "sub"),
    [
        ("configmaps", ResourceRef("", "configmaps", True), ""),
        ("cm", ResourceRef("", "configmaps", True), ""),
        ("ConfigMap", ResourceRef("", "configmaps", True), ""),
        ("deploy", ResourceRef("apps", "deployments", True), ""),
        ("deployments.apps", ResourceRef("apps", "deployments", True), ""),
        ("deployments.v1.apps/scale", ResourceRef("apps", "deployments", True), "scale"),
        ("events", ResourceRef("", "events", True), ""),  # core first, as kubectl
        ("events.events.k8s.io", ResourceRef("events.k8s.io", "events", True), ""),
        ("nodes", ResourceRef("", "nodes", False), ""),
        ("foos.samplecontroller.k8s.io", ResourceRef("samplecontroller.k8s.io", "foos", None), ""),
        (
            "foos.v1alpha1.samplecontroller.k8s.io/status",
            ResourceRef("samplecontroller.k8s.io", "foos", None),
            "status",
        ),
        (Widget, ResourceRef("example.com", "widgets", False), ""),
    ],
)
def test_resource_names_resolve_without_a_server(name: Any, ref: ResourceRef, sub: str) -> None:
    assert resolve_resource(name) == (ref, sub)


def test_a_name_that_needs_a_server_is_refused_with_how_to_name_it() -> None:
    m = manager()
    m.reconciler("widgets", reconcile=nothing)
    with pytest.raises(LookupError, match=r"'widgets' without a server: name a custom resource"):
        m.describe()


def test_a_registered_model_decides_a_custom_resources_scope() -> None:
    m = manager(namespace="shop")
    m.reconciler("configmaps", rbac=[Permission(Widget, "get")], reconcile=nothing)
    assert m.describe().permissions.cluster == (Rule("example.com", ("widgets",), ("get",)),)


def test_permissions_are_checked_values() -> None:
    p = Permission("secrets", "get", "get", "list", names=["a", "a"])
    assert (p.resource, p.verbs, p.names) == ("secrets", ("get", "list"), ("a",))
    assert p == Permission("secrets", "get", "list", names=["a"])
    assert hash(p) == hash(Permission("secrets", "get", "list", names=["a"]))
    assert p != Permission("secrets", "get")
    assert repr(p) == "Permission('secrets', 'get', 'list', names=['a'])"
    assert repr(Permission(Widget, "*")) == "Permission('Widget', '*')"
    with pytest.raises(AttributeError, match="immutable"):
        p.verbs = ("delete",)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("secrets",), {}, ValueError, "needs at least one verb"),
        (("", "get"), {}, ValueError, "needs a resource name"),
        (("secrets", "GET it"), {}, ValueError, "'GET it' is not an RBAC verb"),
        (("secrets", "get"), {"names": "a"}, TypeError, "names is a list"),
        (("secrets", "get"), {"names": [""]}, ValueError, "names holds object names"),
        ((3, "get"), {}, TypeError, "a name or a model class"),
    ],
)
def test_bad_permissions_are_refused(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        Permission(*args, **kwargs)


def test_the_reconciler_takes_only_permissions() -> None:
    with pytest.raises(TypeError, match="rbac takes Permissions, not tuple"):
        manager().reconciler("configmaps", rbac=[("secrets", "get")], reconcile=nothing)  # type: ignore[list-item]


def test_rules_match_requests_as_kube_rbac_does() -> None:
    rule = Rule("apps", ("deployments", "*/status"), ("get", "update"), ("web",))
    assert rule.allows("get", "apps", "deployments", "web")
    assert rule.allows("update", "apps", "replicasets/status", "web")
    assert not rule.allows("get", "apps", "deployments", "db")
    assert not rule.allows("get", "apps", "deployments")
    assert not rule.allows("get", "", "deployments", "web")
    assert not rule.allows("delete", "apps", "deployments", "web")
    assert not rule.allows("get", "apps", "deployments/scale", "web")
    assert Rule("*", ("*",), ("*",)).allows("delete", "x", "y/z")
    assert rule.policy_rule() == {
        "apiGroups": ["apps"],
        "resources": ["deployments", "*/status"],
        "verbs": ["get", "update"],
        "resourceNames": ["web"],
    }


def test_permissions_allow_by_where_they_apply() -> None:
    m = manager(namespace="shop", leader_election=LeaderElection("op"))
    m.reconciler("configmaps", watches=[("nodes", lambda obj: [])], reconcile=nothing)
    permissions = m.describe().permissions
    assert permissions.allows("list", "", "configmaps", namespace="shop")
    assert not permissions.allows("list", "", "configmaps", namespace="other")
    assert not permissions.allows("list", "", "configmaps")
    assert permissions.allows("watch", "", "nodes")
    assert permissions.allows("watch", "", "nodes", namespace="shop")
    lease = ("update", "coordination.k8s.io", "leases")
    assert permissions.allows(*lease, namespace="shop", name="op")
    assert not permissions.allows(*lease, namespace="shop", name="other")


def test_reconcilers_declared_with_models_describe_the_same_rbac() -> None:
    from kubereflector.models import ConfigMap, Deployment, Pod

    by_model = manager(namespace="shop")
    by_model.reconciler(
        Deployment, owns=[Pod], watches=[(ConfigMap, lambda o: [])], reconcile=nothing
    )
    by_name = manager(namespace="shop")
    by_name.reconciler(
        "deployments.apps", owns=["pods"], watches=[("configmaps", lambda o: [])], reconcile=nothing
    )
    assert by_model.describe() == by_name.describe()
