"""The emulator's RBAC pieces without HTTP: kube's request attributes (the cases of
kube's own ``requestinfo_test.go``), rule matching and the 403 wording.

Against a real kube-apiserver, the same decisions are checked end to end in
``tests/integration/test_rbac.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubereflector.testing import FakeClock
from kubereflector.testing.apiserver._rbac import (
    Attributes,
    forbidden,
    request_attributes,
    rule_allows,
)
from kubereflector.testing.apiserver._users import ADMIN, UserInfo, Users

USER = UserInfo("u", ("system:authenticated",))


def info(method: str, url: str) -> tuple[str, str, str, str, str, str, str]:
    path, _, query_text = url.partition("?")
    query = dict(p.split("=", 1) for p in query_text.split("&") if p)
    a = request_attributes(method, path, query, USER)
    assert a.resource_request
    return (a.verb, a.api_group, a.api_version, a.namespace, a.resource, a.subresource, a.name)


@pytest.mark.parametrize(
    ("method", "url", "expected"),
    [
        ("GET", "/api/v1/namespaces", ("list", "", "v1", "", "namespaces", "", "")),
        ("GET", "/api/v1/namespaces/other", ("get", "", "v1", "other", "namespaces", "", "other")),
        ("GET", "/api/v1/namespaces/other/pods", ("list", "", "v1", "other", "pods", "", "")),
        ("GET", "/api/v1/namespaces/other/pods/foo", ("get", "", "v1", "other", "pods", "", "foo")),
        (
            "HEAD",
            "/api/v1/namespaces/other/pods/foo",
            ("get", "", "v1", "other", "pods", "", "foo"),
        ),
        ("GET", "/api/v1/pods", ("list", "", "v1", "", "pods", "", "")),
        ("HEAD", "/api/v1/pods", ("list", "", "v1", "", "pods", "", "")),
        (
            "GET",
            "/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource",
            ("proxy", "", "v1", "other", "pods", "", "foo"),
        ),
        ("GET", "/api/v1/watch/pods", ("watch", "", "v1", "", "pods", "", "")),
        ("GET", "/api/v1/pods?watch=true", ("watch", "", "v1", "", "pods", "", "")),
        ("GET", "/api/v1/pods?watch=false", ("list", "", "v1", "", "pods", "", "")),
        (
            "GET",
            "/api/v1/watch/namespaces/other/pods",
            ("watch", "", "v1", "other", "pods", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/other/pods?watch=1",
            ("watch", "", "v1", "other", "pods", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/other/pods?watch=0",
            ("list", "", "v1", "other", "pods", "", ""),
        ),
        ("GET", "/api/v1/pods?watch=maybe", ("watch", "", "v1", "", "pods", "", "")),
        (
            "GET",
            "/api/v1/namespaces/other/pods/foo/status",
            ("get", "", "v1", "other", "pods", "status", "foo"),
        ),
        (
            "GET",
            "/api/v1/namespaces/other/pods/foo/proxy/subpath",
            ("get", "", "v1", "other", "pods", "proxy", "foo"),
        ),
        (
            "PUT",
            "/api/v1/namespaces/other/finalize",
            ("update", "", "v1", "other", "namespaces", "finalize", "other"),
        ),
        (
            "PUT",
            "/api/v1/namespaces/other/status",
            ("update", "", "v1", "other", "namespaces", "status", "other"),
        ),
        (
            "PATCH",
            "/api/v1/namespaces/other/pods/foo",
            ("patch", "", "v1", "other", "pods", "", "foo"),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/other/pods/foo",
            ("delete", "", "v1", "other", "pods", "", "foo"),
        ),
        ("POST", "/api/v1/namespaces/other/pods", ("create", "", "v1", "other", "pods", "", "")),
        ("DELETE", "/api/v1/nodes", ("deletecollection", "", "v1", "", "nodes", "", "")),
        ("DELETE", "/api/v1/namespaces", ("deletecollection", "", "v1", "", "namespaces", "", "")),
        (
            "DELETE",
            "/apis/extensions/v1/namespaces/other/pods",
            ("deletecollection", "extensions", "v1", "other", "pods", "", ""),
        ),
        (
            "POST",
            "/apis/extensions/v1beta3/namespaces/other/pods",
            ("create", "extensions", "v1beta3", "other", "pods", "", ""),
        ),
        # a list or watch narrowed to one name by a field selector names it
        (
            "GET",
            "/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name=one",
            ("list", "", "v1", "ns", "secrets", "", "one"),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/secrets?watch=1&fieldSelector=type=x,metadata.name==one",
            ("watch", "", "v1", "ns", "secrets", "", "one"),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name!=one",
            ("list", "", "v1", "ns", "secrets", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name=a%b",
            ("list", "", "v1", "ns", "secrets", "", ""),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name=one",
            ("deletecollection", "", "v1", "ns", "secrets", "", ""),
        ),
    ],
)
def test_request_attributes_are_kubes(method: str, url: str, expected: tuple[str, ...]) -> None:
    assert info(method, url) == expected


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/api/version/",
        "/apis/group/version/",
        "/badprefix/version/resource",
        "/apis/v1/pods",
        "/healthz",
    ],
)
def test_other_paths_are_non_resource_requests(path: str) -> None:
    attrs = request_attributes("GET", path, {}, USER)
    assert not attrs.resource_request
    assert (attrs.verb, attrs.path) == ("get", path)


def resource(
    verb: str, resource: str, sub: str = "", name: str = "", group: str = ""
) -> Attributes:
    return Attributes(
        USER, verb, True, api_group=group, resource=resource, subresource=sub, name=name
    )


@pytest.mark.parametrize(
    ("rule", "attrs", "allowed"),
    [
        (
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            resource("delete", "pods"),
            True,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
            resource("list", "pods"),
            False,
        ),
        (
            {"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]},
            resource("get", "pods"),
            False,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
            resource("get", "pods", "log"),
            False,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]},
            resource("get", "pods", "log"),
            True,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]},
            resource("get", "pods", "log"),
            True,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]},
            resource("get", "pods"),
            False,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["*/og"]},
            resource("get", "pods", "log"),
            False,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods/*"]},
            resource("get", "pods", "log"),
            False,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
            resource("get", "pods", name="a"),
            True,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
            resource("get", "pods", name="b"),
            False,
        ),
        (
            {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
            resource("list", "pods"),
            False,
        ),
        ({"verbs": ["get"], "nonResourceURLs": ["/metrics"]}, resource("get", "metrics"), False),
    ],
)
def test_rule_matching_is_kubes(rule: dict[str, Any], attrs: Attributes, allowed: bool) -> None:
    assert rule_allows(attrs, rule) is allowed


@pytest.mark.parametrize(
    ("urls", "path", "allowed"),
    [
        (["*"], "/anything", True),
        (["/metrics"], "/metrics", True),
        (["/metrics"], "/metrics/", False),
        (["/logs/*"], "/logs/a/b", True),
        (["/logs/*"], "/logs", False),
        (["/logs*"], "/logsmore", True),
    ],
)
def test_non_resource_urls_match_exactly_or_by_a_trailing_star(
    urls: list[str], path: str, allowed: bool
) -> None:
    rule = {"verbs": ["get"], "nonResourceURLs": urls}
    assert rule_allows(Attributes(USER, "get", False, path=path), rule) is allowed
    assert not rule_allows(Attributes(USER, "post", False, path=path), rule)


def test_the_403_names_what_was_refused_and_escapes_html() -> None:
    attrs = Attributes(
        UserInfo("<script>&"),
        "get",
        True,
        api_group="apps",
        resource="deployments",
        subresource="status",
        namespace="ns",
        name="d",
    )
    status = forbidden(attrs, 'RBAC: role.rbac.authorization.k8s.io "r" not found')
    assert status["message"] == (
        'deployments.apps "d" is forbidden: User "&lt;script&gt;&amp;" cannot get resource '
        '"deployments/status" in API group "apps" in the namespace "ns": '
        'RBAC: role.rbac.authorization.k8s.io "r" not found'
    )
    assert status["details"] == {"name": "d", "group": "apps", "kind": "deployments"}
    cluster = forbidden(Attributes(USER, "list", True, resource="nodes"), "")
    assert cluster["message"] == (
        'nodes is forbidden: User "u" cannot list resource "nodes" in API group "" '
        "at the cluster scope"
    )
    path = forbidden(Attributes(USER, "get", False, path="/metrics"), "")
    assert (path["message"], path["details"]) == (
        'forbidden: User "u" cannot get path "/metrics"',
        {},
    )


def test_tokens_say_who_asks_until_they_expire_or_their_service_account_goes() -> None:
    clock = FakeClock()
    accounts = {("ns", "bot"): "uid-1"}
    users = Users(
        "admin-token", clock=clock, service_account_uid=lambda ns, n: accounts.get((ns, n))
    )
    assert users.required
    assert users.authenticate("admin-token") == ADMIN
    assert ADMIN.is_master()
    alice = users.add("alice-token", "alice", ["team"])
    assert alice == UserInfo("alice", ("team", "system:authenticated"))
    assert users.authenticate("alice-token") == alice
    assert users.authenticate("nobody") is None
    with pytest.raises(ValueError, match="in use"):
        users.add("admin-token", "mallory")
    with pytest.raises(TypeError, match="groups is a list"):
        users.add("t", "bob", "team")
    token = users.mint("ns", "bot", "uid-1", 600)
    bot = users.authenticate(token)
    assert bot == UserInfo(
        "system:serviceaccount:ns:bot",
        ("system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"),
        "uid-1",
    )
    assert bot is not None
    assert not bot.is_master()
    clock.step(599)
    assert users.authenticate(token) == bot
    clock.step(1)
    assert users.authenticate(token) is None  # expired, on the emulator's clock
    again = users.mint("ns", "bot", "uid-1", 600)
    accounts[("ns", "bot")] = "uid-2"  # deleted and made again: another ServiceAccount
    assert users.authenticate(again) is None
    assert repr(users) == "<Users static=1 minted=1>"  # (the expired one forgotten); no token


def test_without_a_token_everyone_is_the_admin() -> None:
    users = Users(None, clock=FakeClock(), service_account_uid=lambda ns, n: None)
    assert not users.required
