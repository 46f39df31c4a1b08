"""RBAC on the target (the emulator, or a real kube-apiserver with RBAC on): the same
Roles, bindings, tokens and requests, the same decisions, the same 403s and 422s.

Decisions are asked with SubjectAccessReviews (many cases, one request each) and
checked with real requests under a ServiceAccount's token (minted with the
TokenRequest API). Cluster-scoped objects are named after the test's namespace and
deleted at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest
from conftest import KUBECONFIG_ENV, Target

from kubereflector.client import Client, load_config
from kubereflector.client.auth import StaticAuth
from kubereflector.errors import ApiError
from kubereflector.testing import ApiServerEmulator

pytestmark = pytest.mark.asyncio

RBAC = "/apis/rbac.authorization.k8s.io/v1"
SAR = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
ANY: Any = object()
SETTLE = 10.0
"""Seconds a real server may take to see new RBAC objects (its authorizer reads an
informer); the emulator sees them at once."""
TOKEN_CACHE = 10.0
"""Seconds kube-apiserver keeps a token it has authenticated in its cache (so a
deleted ServiceAccount's token works that much longer there)."""


def admin_config(target: Target) -> Any:
    if target.emulator is not None:
        return load_config(target.emulator.kubeconfig_path)
    return load_config(os.environ[KUBECONFIG_ENV])


@contextlib.asynccontextmanager
async def client_with_token(target: Target, token: str) -> AsyncIterator[Client]:
    config = dataclasses.replace(admin_config(target), auth=StaticAuth(token=token))
    async with Client(config) as client:
        yield client


async def mint_token(target: Target, service_account: str) -> str:
    path = f"/api/v1/namespaces/{target.namespace}/serviceaccounts/{service_account}/token"
    answer = await target.client.create(path, {"spec": {"expirationSeconds": 600}})
    assert answer["kind"] == "TokenRequest"
    assert answer["spec"]["expirationSeconds"] == 600
    assert answer["status"]["expirationTimestamp"]
    return str(answer["status"]["token"])


async def status_of(call: Awaitable[Any]) -> int:
    """The HTTP status a request got."""
    try:
        await call
    except ApiError as err:
        return err.status
    return 200


async def review(target: Target, spec: dict[str, Any]) -> dict[str, Any]:
    answer = await target.client.create(SAR, {"spec": spec})
    assert answer["kind"] == "SubjectAccessReview"
    status: dict[str, Any] = answer["status"]
    return status


async def settled(target: Target, spec: dict[str, Any]) -> None:
    """Wait until ``spec`` is allowed: at once on the emulator; on a real server, once
    its authorizer's informers have the objects just written (polled: nothing else
    tells when they have)."""
    if target.emulator is not None:
        assert (await review(target, spec))["allowed"]
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE
    while not (await review(target, spec))["allowed"]:
        assert loop.time() < deadline, f"the server never allowed {spec}"
        await asyncio.sleep(0.05)


def allowed_by(binding: str, role: str, subject: str) -> str:
    return f"RBAC: allowed by {binding} of {role} to {subject}"


def rule(verbs: list[str], groups: list[str], resources: list[str], **extra: Any) -> Any:
    return {"verbs": verbs, "apiGroups": groups, "resources": resources, **extra}


def subject(kind: str, name: str, namespace: str | None = None) -> dict[str, str]:
    entry = {"kind": kind, "name": name}
    if namespace is not None:
        entry["namespace"] = namespace
    return entry


def binding(name: str, role_kind: str, role: str, subjects: list[dict[str, str]]) -> Any:
    return {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects,
    }


@contextlib.asynccontextmanager
async def policy(target: Target) -> AsyncIterator[str]:
    """The test's RBAC objects; yields the suffix of its cluster-scoped names."""
    ns, client = target.namespace, target.client
    suffix = ns
    here = f"{RBAC}/namespaces/{ns}"
    await client.create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "bot"}})
    reader = {
        "metadata": {"name": "reader"},
        "rules": [
            rule(["get", "list", "watch"], [""], ["configmaps"]),
            rule(["get", "list"], [""], ["secrets"], resourceNames=["one"]),
            rule(["update"], ["apps"], ["*/status"]),
            rule(["patch"], ["apps"], ["deployments/scale"]),
        ],
    }
    await client.create(f"{here}/roles", reader)
    cluster_role = {
        "metadata": {"name": f"pods-{suffix}"},
        "rules": [
            rule(["list"], [""], ["pods"]),
            rule(["get"], [""], ["namespaces"]),
            {"verbs": ["get"], "nonResourceURLs": ["/metrics", "/logs/*"]},
        ],
    }
    await client.create(f"{RBAC}/clusterroles", cluster_role)
    await client.create(
        f"{here}/rolebindings",
        binding("bot-reads", "Role", "reader", [subject("ServiceAccount", "bot")]),
    )
    await client.create(
        f"{here}/rolebindings",
        binding("other-bot", "Role", "reader", [subject("ServiceAccount", "bot2", "elsewhere")]),
    )
    await client.create(
        f"{here}/rolebindings",
        binding("alice-pods", "ClusterRole", f"pods-{suffix}", [subject("User", "alice")]),
    )
    await client.create(
        f"{here}/rolebindings", binding("bob-missing", "Role", "nope", [subject("User", "bob")])
    )
    await client.create(
        f"{RBAC}/clusterrolebindings",
        binding(
            f"team-{suffix}", "ClusterRole", f"pods-{suffix}", [subject("Group", f"team-{suffix}")]
        ),
    )
    try:
        for spec in (
            {
                "user": f"system:serviceaccount:{ns}:bot",
                "resourceAttributes": {"verb": "get", "resource": "configmaps", "namespace": ns},
            },
            {
                "user": "x",
                "groups": [f"team-{suffix}"],
                "nonResourceAttributes": {"verb": "get", "path": "/metrics"},
            },
            {
                "user": "alice",
                "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": ns},
            },
            {
                "user": "system:serviceaccount:elsewhere:bot2",
                "resourceAttributes": {"verb": "get", "resource": "configmaps", "namespace": ns},
            },
        ):
            await settled(target, spec)
        yield suffix
    finally:
        for path in (
            f"{RBAC}/clusterrolebindings/team-{suffix}",
            f"{RBAC}/clusterroles/pods-{suffix}",
        ):
            with contextlib.suppress(ApiError):
                await client.delete(path)


def resource(verb: str, resource: str, namespace: str = "", **extra: str) -> dict[str, Any]:
    attributes = {"verb": verb, "resource": resource, **extra}
    if namespace:
        attributes["namespace"] = namespace
    return {"resourceAttributes": attributes}


def url(verb: str, path: str) -> dict[str, Any]:
    return {"nonResourceAttributes": {"verb": verb, "path": path}}


async def test_decisions_match_kube_rbac(target: Target) -> None:
    ns = target.namespace
    bot = {"user": f"system:serviceaccount:{ns}:bot"}
    bot_groups = {
        **bot,
        "groups": [
            "system:serviceaccounts",
            f"system:serviceaccounts:{ns}",
            "system:authenticated",
        ],
    }
    async with policy(target) as suffix:
        by_bot = allowed_by(
            f'RoleBinding "bot-reads/{ns}"', 'Role "reader"', f'ServiceAccount "bot/{ns}"'
        )
        pods = f'ClusterRole "pods-{suffix}"'
        by_alice = allowed_by(f'RoleBinding "alice-pods/{ns}"', pods, 'User "alice"')
        by_team = allowed_by(f'ClusterRoleBinding "team-{suffix}"', pods, f'Group "team-{suffix}"')
        cases: list[tuple[dict[str, Any], dict[str, Any]]] = [
            # verbs, resources, namespaces
            ({**bot, **resource("get", "configmaps", ns)}, {"allowed": True, "reason": by_bot}),
            ({**bot, **resource("watch", "configmaps", ns)}, {"allowed": True, "reason": by_bot}),
            ({**bot, **resource("delete", "configmaps", ns)}, {"allowed": False}),
            ({**bot, **resource("list", "configmaps", "elsewhere")}, {"allowed": False}),
            ({**bot, **resource("list", "configmaps")}, {"allowed": False}),
            ({**bot, **resource("get", "configmaps", ns, group="apps")}, {"allowed": False}),
            # resourceNames
            (
                {**bot, **resource("get", "secrets", ns, name="one")},
                {"allowed": True, "reason": by_bot},
            ),
            ({**bot, **resource("get", "secrets", ns, name="two")}, {"allowed": False}),
            ({**bot, **resource("get", "secrets", ns)}, {"allowed": False}),
            # subresources: */status, resource/subresource, not the resource itself
            (
                {
                    **bot,
                    **resource("update", "deployments", ns, group="apps", subresource="status"),
                },
                {"allowed": True, "reason": by_bot},
            ),
            (
                {
                    **bot,
                    **resource("update", "statefulsets", ns, group="apps", subresource="status"),
                },
                {"allowed": True, "reason": by_bot},
            ),
            ({**bot, **resource("update", "deployments", ns, group="apps")}, {"allowed": False}),
            (
                {**bot, **resource("patch", "deployments", ns, group="apps", subresource="scale")},
                {"allowed": True, "reason": by_bot},
            ),
            (
                {**bot, **resource("patch", "replicasets", ns, group="apps", subresource="scale")},
                {"allowed": False},
            ),
            # a ServiceAccount subject in another namespace; the same name elsewhere
            (
                {
                    "user": "system:serviceaccount:elsewhere:bot2",
                    **resource("list", "configmaps", ns),
                },
                {
                    "allowed": True,
                    "reason": allowed_by(
                        f'RoleBinding "other-bot/{ns}"',
                        'Role "reader"',
                        'ServiceAccount "bot2/elsewhere"',
                    ),
                },
            ),
            (
                {"user": f"system:serviceaccount:{ns}:bot2", **resource("list", "configmaps", ns)},
                {"allowed": False},
            ),
            # a ClusterRole through a RoleBinding: only in that namespace
            (
                {"user": "alice", **resource("list", "pods", ns)},
                {"allowed": True, "reason": by_alice},
            ),
            ({"user": "alice", **resource("list", "pods")}, {"allowed": False}),
            ({"user": "alice", **resource("list", "pods", "elsewhere")}, {"allowed": False}),
            (
                {"user": "alice", **resource("get", "namespaces", ns, name=ns)},
                {"allowed": True, "reason": by_alice},
            ),
            ({"user": "alice", **url("get", "/metrics")}, {"allowed": False}),
            # a ClusterRoleBinding to a group: everywhere; non-resource URLs with a *
            (
                {"user": "c", "groups": [f"team-{suffix}"], **resource("list", "pods")},
                {"allowed": True, "reason": by_team},
            ),
            (
                {"user": "c", "groups": [f"team-{suffix}"], **url("get", "/metrics")},
                {"allowed": True, "reason": by_team},
            ),
            (
                {"user": "c", "groups": [f"team-{suffix}"], **url("get", "/logs/kube.log")},
                {"allowed": True, "reason": by_team},
            ),
            (
                {"user": "c", "groups": [f"team-{suffix}"], **url("get", "/logs")},
                {"allowed": False},
            ),
            (
                {"user": "c", "groups": [f"team-{suffix}"], **url("post", "/metrics")},
                {"allowed": False},
            ),
            # a binding to a missing role says so in the reason of a denial
            (
                {"user": "bob", **resource("get", "configmaps", ns)},
                {
                    "allowed": False,
                    "reason": 'RBAC: role.rbac.authorization.k8s.io "nope" not found',
                },
            ),
            # the bootstrap policy: discovery for every authenticated user; masters
            (
                {"user": "d", "groups": ["system:authenticated"], **url("get", "/apis/apps/v1")},
                {
                    "allowed": True,
                    "reason": allowed_by(
                        'ClusterRoleBinding "system:discovery"',
                        'ClusterRole "system:discovery"',
                        'Group "system:authenticated"',
                    ),
                },
            ),
            # (either of two bootstrap bindings allows it: which one names is kube's order)
            ({**bot_groups, **url("get", "/version")}, {"allowed": True, "reason": ANY}),
            (
                {"user": "d", "groups": ["system:masters"], **resource("delete", "nodes")},
                {"allowed": True},
            ),
            (
                {"user": "d", "groups": ["system:authenticated"], **resource("list", "pods", ns)},
                {"allowed": False},
            ),
        ]
        for spec, want in cases:
            status = await review(target, spec)
            if want.get("reason") is ANY:
                status["reason"] = ANY
            assert status == want, spec


async def test_a_service_account_token_gets_what_its_roles_allow(target: Target) -> None:
    ns = target.namespace
    user = f"system:serviceaccount:{ns}:bot"
    async with policy(target):
        token = await mint_token(target, "bot")
        async with client_with_token(target, token) as bot:
            # (With a limit, kube-apiserver 1.28 lists from etcd: a list from its watch
            # cache may wait for the cache and time out on a busy server, with a 504
            # that has nothing to do with RBAC, which is decided before.)
            paged = {"limit": "500"}
            await bot.get(f"/api/v1/namespaces/{ns}/configmaps", params=paged)
            await bot.get(
                f"/api/v1/namespaces/{ns}/configmaps",
                params={**paged, "fieldSelector": "metadata.name=x"},
            )
            # a list narrowed to one name is a request for that name (resourceNames)
            await bot.get(
                f"/api/v1/namespaces/{ns}/secrets",
                params={**paged, "fieldSelector": "metadata.name=one"},
            )
            await bot.get("/apis")  # discovery, for every authenticated user
            refused = [
                ("GET", f"/api/v1/namespaces/{ns}/secrets", None, "list", "secrets", "", ""),
                (
                    "GET",
                    f"/api/v1/namespaces/{ns}/secrets",
                    {"watch": "1", "fieldSelector": "metadata.name=one"},
                    "watch",
                    "secrets",
                    "one",
                    "",
                ),
                (
                    "DELETE",
                    f"/api/v1/namespaces/{ns}/configmaps",
                    None,
                    "deletecollection",
                    "configmaps",
                    "",
                    "",
                ),
                ("GET", f"/api/v1/namespaces/{ns}", None, "get", "namespaces", ns, ""),
                ("GET", "/api/v1/configmaps", None, "list", "configmaps", "", ""),
                (
                    "GET",
                    f"/apis/apps/v1/namespaces/{ns}/deployments/d/status",
                    None,
                    "get",
                    "deployments/status",
                    "d",
                    "apps",
                ),
            ]
            for method, path, params, verb, what, name, group in refused:
                with pytest.raises(ApiError) as caught:
                    await bot.request(method, path, params=params)
                err = caught.value
                assert (err.status, err.reason) == (403, "Forbidden"), path
                plural = what.split("/")[0]
                qualified = f"{plural}.{group}" if group else plural
                subject = f'{qualified} "{name}"' if name else qualified
                where = (
                    f'in the namespace "{ns}"' if "/namespaces/" in path else "at the cluster scope"
                )
                assert err.message == (
                    f'{subject} is forbidden: User "{user}" cannot {verb} resource "{what}" '
                    f'in API group "{group}" {where}'
                ), path
                details = {"name": name} if name else {}
                if group:
                    details["group"] = group
                details["kind"] = plural
                assert err.details == details, path
            with pytest.raises(ApiError) as caught:
                await bot.get("/metrics")
            assert caught.value.status == 403
            assert caught.value.message == f'forbidden: User "{user}" cannot get path "/metrics"'
            assert caught.value.details == {}
        if target.emulator is not None:
            denied = target.emulator.denials()
            assert [(d.verb, d.resource, d.name) for d in denied][-2:] == [
                ("get", "deployments", "d"),
                ("get", "", ""),
            ]
            assert denied[-1].path == "/metrics"
            assert denied[-1].user == user


async def test_token_requests_are_checked_and_tokens_die_with_their_service_account(
    target: Target,
) -> None:
    ns = target.namespace
    base = f"/api/v1/namespaces/{ns}/serviceaccounts"
    with pytest.raises(ApiError) as caught:
        await target.client.create(f"{base}/ghost/token", {"spec": {}})
    assert (caught.value.status, caught.value.message) == (404, 'serviceaccounts "ghost" not found')
    await target.client.create(base, {"metadata": {"name": "short"}})
    with pytest.raises(ApiError) as caught:
        await target.client.create(f"{base}/short/token", {"spec": {"expirationSeconds": 60}})
    assert caught.value.status == 422
    assert caught.value.message == (
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: '
        "Invalid value: 60: may not specify a duration less than 10 minutes"
    )
    token = await mint_token(target, "short")
    async with client_with_token(target, token) as short:
        review_self = {
            "spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": ns}}
        }
        answer = await short.create(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review_self
        )
        assert answer["kind"] == "SelfSubjectAccessReview"
        assert answer["status"] == {"allowed": False}
        await target.client.delete(f"{base}/short")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TOKEN_CACHE + SETTLE
        while (code := await status_of(short.get("/apis"))) == 200:
            # a real server may see the deletion a moment later; the emulator at once
            assert target.emulator is None, "the emulator took the token after the deletion"
            assert loop.time() < deadline, "the token outlived its ServiceAccount"
            await asyncio.sleep(0.05)
        assert code == 401


async def test_rbac_objects_are_validated_as_kube_validates_them(target: Target) -> None:
    ns, client = target.namespace, target.client
    here = f"{RBAC}/namespaces/{ns}"
    with pytest.raises(ApiError) as caught:
        await client.create(
            f"{here}/roles",
            {
                "metadata": {"name": "a/b"},
                "rules": [{"verbs": []}, {"verbs": ["get"], "nonResourceURLs": ["/x"]}],
            },
        )
    assert caught.value.status == 422
    assert caught.value.message == (
        'Role.rbac.authorization.k8s.io "a/b" is invalid: [metadata.name: Invalid value: '
        "\"a/b\": may not contain '/', rules[0].verbs: Required value: verbs must contain at "
        "least one value, rules[0].apiGroups: Required value: resource rules must supply at "
        "least one api group, rules[0].resources: Required value: resource rules must supply "
        'at least one resource, rules[1].nonResourceURLs: Invalid value: []string{"/x"}: '
        "namespaced rules cannot apply to non-resource URLs]"
    )
    with pytest.raises(ApiError) as caught:
        await client.create(
            f"{RBAC}/clusterrolebindings",
            {
                "metadata": {"name": f"bad-{ns}"},
                "roleRef": {"apiGroup": "x", "kind": "Role", "name": "a/b"},
                "subjects": [
                    {"kind": "ServiceAccount", "name": "s", "apiGroup": "g"},
                    {"kind": "User", "name": "u", "apiGroup": "v1"},
                    {"kind": "Group"},
                ],
            },
        )
    assert caught.value.message == (
        f'ClusterRoleBinding.rbac.authorization.k8s.io "bad-{ns}" is invalid: ['
        'roleRef.apiGroup: Unsupported value: "x": supported values: "rbac.authorization.k8s.io", '
        'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole", '
        "roleRef.name: Invalid value: \"a/b\": may not contain '/', "
        'subjects[0].apiGroup: Unsupported value: "g": supported values: "", '
        "subjects[0].namespace: Required value, "
        'subjects[1].apiGroup: Unsupported value: "v1": supported values: '
        '"rbac.authorization.k8s.io", '
        "subjects[2].name: Required value]"
    )
    # Subjects' and roleRef's apiGroup default; roleRef never changes.
    created = await client.create(
        f"{here}/rolebindings",
        {
            "metadata": {"name": "ok"},
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}],
        },
    )
    assert created["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "r",
    }
    assert created["subjects"] == [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "u"},
        {"kind": "ServiceAccount", "name": "s"},
    ]
    with pytest.raises(ApiError) as caught:
        await client.patch(f"{here}/rolebindings/ok", {"roleRef": {"name": "r2"}})
    assert caught.value.message == (
        'RoleBinding.rbac.authorization.k8s.io "ok" is invalid: roleRef: Invalid value: '
        'rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"Role", Name:"r2"}: '
        "cannot change roleRef"
    )


async def test_the_bootstrap_policy_is_kubes(target: Target) -> None:
    discovery = await target.client.get(f"{RBAC}/clusterroles/system:discovery")
    assert discovery["rules"] == [
        {
            "verbs": ["get"],
            "nonResourceURLs": [
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ],
        }
    ]
    admin = await target.client.get(f"{RBAC}/clusterrolebindings/cluster-admin")
    assert admin["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:masters"}
    ]
    assert admin["metadata"]["labels"] == {"kubernetes.io/bootstrapping": "rbac-defaults"}


async def test_report_mode_serves_what_it_would_refuse_and_keeps_it(target: Target) -> None:
    target.faults()  # a switch of the emulator's: skipped on a real cluster
    async with ApiServerEmulator(rbac="report") as reporting:
        assert reporting.rbac == "report"
        token = reporting.add_user("eve", groups=["auditors"])
        config = dataclasses.replace(
            load_config(reporting.kubeconfig_path), auth=StaticAuth(token=token)
        )
        async with Client(config) as eve:
            listed = await eve.get("/api/v1/namespaces/default/configmaps")
            assert listed["items"] == []
        (denial,) = reporting.denials()
        assert (denial.user, denial.groups) == ("eve", ("auditors", "system:authenticated"))
        assert (denial.verb, denial.resource, denial.namespace) == ("list", "configmaps", "default")
        assert denial.message == (
            'configmaps is forbidden: User "eve" cannot list resource "configmaps" in API group "" '
            'in the namespace "default"'
        )
        reporting.clear_denials()
        assert reporting.denials() == []
