"""Namespaces, names and subresources are validated before they reach an API path."""

from __future__ import annotations

import pytest

from kubereflector.client import Client, ClientConfig, ResourceInfo, ResourceListWatch
from kubereflector.client.paths import (
    quote_segment,
    validate_api_path,
    validate_name,
    validate_namespace,
    validate_path_segment,
)

PODS = ResourceInfo("", "v1", "pods", "Pod", namespaced=True)
NODES = ResourceInfo("", "v1", "nodes", "Node", namespaced=False)
DEPLOYMENTS = ResourceInfo("apps", "v1", "deployments", "Deployment", namespaced=True)

INJECTIONS = [
    "kube-system/secrets?x=",
    "../kube-system",
    "..",
    ".",
    "a%2Fb",
    "a b",
    "a\nb",
    "",
]


@pytest.mark.parametrize("bad", INJECTIONS)
def test_a_namespace_that_would_rewrite_the_path_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="namespace") as info:
        validate_namespace(bad)
    if bad:
        assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", ["Bad NS!", "UPPER", "-lead", "trail-", "a" * 64, "a.b"])
def test_a_namespace_must_be_a_dns1123_label(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid namespace"):
        validate_namespace(bad)


@pytest.mark.parametrize("good", ["default", "kube-system", "a", "a" * 63, "0ns"])
def test_valid_namespaces_pass_unchanged(good: str) -> None:
    assert validate_namespace(good) == good


@pytest.mark.parametrize("bad", ["a/b", "..", ".", "x%2e", "", "a\tb"])
def test_a_name_must_be_one_path_segment(bad: str) -> None:
    with pytest.raises(ValueError, match="name"):
        validate_name(bad)


def test_a_value_that_is_not_a_string_is_refused_with_its_type() -> None:
    with pytest.raises(ValueError, match="must be a string, not int"):
        validate_path_segment(6443, "subresource")
    with pytest.raises(ValueError, match="must be a string, not dict"):
        validate_namespace({"a": 1})


@pytest.mark.parametrize("good", ["pod-1", "system:nodes", "a.b.c", "x@y", "UPPER_ok"])
def test_names_kubernetes_allows_pass(good: str) -> None:
    assert validate_name(good) == good


def test_quoting_leaves_query_and_fragment_characters_inert() -> None:
    assert quote_segment("a?b#c") == "a%3Fb%23c"
    assert quote_segment("system:nodes") == "system:nodes"


def test_api_path_validates_the_namespace() -> None:
    assert PODS.api_path("default") == "/api/v1/namespaces/default/pods"
    assert DEPLOYMENTS.api_path(None) == "/apis/apps/v1/deployments"
    with pytest.raises(ValueError, match="kube-system/secrets"):
        PODS.api_path("kube-system/secrets?x=")


def test_object_path_validates_name_and_subresource() -> None:
    assert PODS.object_path("ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert NODES.object_path(None, "node-1") == "/api/v1/nodes/node-1"
    with pytest.raises(ValueError, match="name may not contain '/'"):
        PODS.object_path("ns", "../secrets/x")
    with pytest.raises(ValueError, match="subresource"):
        PODS.object_path("ns", "p", "status/../../x")
    with pytest.raises(ValueError, match="namespaced"):
        PODS.object_path(None, "p")


def test_resource_listwatch_refuses_an_injected_namespace_at_construction() -> None:
    with pytest.raises(ValueError, match=r"'\.\./kube-system'"):
        ResourceListWatch(object(), "configmaps", namespace="../kube-system")  # type: ignore[arg-type]


# -- the whole path, as the REST client checks it -------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "api/v1/pods",  # not absolute
        "/api/v1/namespaces/x/configmaps?fieldSelector=a",  # a query
        "/api/v1/pods#frag",  # a fragment
        "/api/v1/namespaces/../secrets",  # a dot segment
        "/api/v1/namespaces/%2e%2e/secrets",  # percent-encoded: URL libraries resolve it
        "/api/v1/namespaces/%2E/pods",
        "/api/v1/namespaces/a%2Fb/pods",  # the API server decodes %2F into a separator
        "/api/v1//pods",  # an empty segment
        "/api/v1/pods/",  # a trailing empty segment
        "/api/v1/pods/a b",  # whitespace
        "/api/v1/pods/a%0Ab",  # an encoded newline
    ],
)
def test_validate_api_path_refuses_anything_but_a_plain_path(bad: str) -> None:
    with pytest.raises(ValueError, match="path") as info:
        validate_api_path(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize(
    "good", ["/", "/api", "/api/v1/namespaces/ns/pods/a%3Fb", "/apis/example.com/v1/x:y"]
)
def test_validate_api_path_passes_plain_and_quoted_paths(good: str) -> None:
    assert validate_api_path(good) == good


def test_client_url_never_lets_a_path_carry_a_query_or_leave_its_prefix() -> None:
    client = Client(ClientConfig(server="https://kube.example:6443/prefix"))
    url = client.url("/api/v1/namespaces/a%3Fb/pods", {"limit": 1})
    assert str(url) == "https://kube.example:6443/prefix/api/v1/namespaces/a%3Fb/pods?limit=1"
    for bad in ("/api/v1/pods?watch=1", "/../api/v1/secrets", "/%2e%2e/api/v1/secrets"):
        with pytest.raises(ValueError, match="path"):
            client.url(bad)


# -- what discovery puts into paths ----------------------------------------------------


@pytest.mark.parametrize(
    ("field", "bad"),
    [("group", "../x"), ("group", "a/b"), ("version", ".."), ("version", ""), ("resource", "..")],
)
def test_resource_info_refuses_a_group_version_or_resource_that_is_no_path_segment(
    field: str, bad: str
) -> None:
    fields = {"group": "apps", "version": "v1", "resource": "deployments", field: bad}
    with pytest.raises(ValueError, match=field):
        ResourceInfo(kind="Deployment", namespaced=True, **fields)  # type: ignore[arg-type]
