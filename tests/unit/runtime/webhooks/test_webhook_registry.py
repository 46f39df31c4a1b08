"""Registering webhooks (kubereflector.runtime.webhooks.registry) and what tells the API
server about them (configuration): names, paths, rules, options, the configurations by
URL and by Service, and the CRD conversion stanza."""

from __future__ import annotations

import base64
from typing import Any, TypedDict

import pytest

from kubereflector.models import ApiResource, ConfigMap, Pod, register
from kubereflector.runtime.webhooks import (
    AdmissionRequest,
    WebhookEndpoint,
    Webhooks,
)

GROUP = "registry.test.example.com"


class Sprocket(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


class SprocketV1alpha1(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


class Cluster(TypedDict, total=False):
    metadata: dict[str, Any]


register(Sprocket, ApiResource(GROUP, "v1", "Sprocket", "sprockets", True))
register(SprocketV1alpha1, ApiResource(GROUP, "v1alpha1", "Sprocket", "sprockets", True))
register(Cluster, ApiResource(GROUP, "v1", "Cluster", "clusters", False))


def nothing(obj: Any, request: AdmissionRequest[Any]) -> None:
    return None


def test_a_model_gives_the_name_path_and_rules() -> None:
    hooks = Webhooks()
    decorator = hooks.validator(Sprocket)
    assert decorator(nothing) is nothing
    hooks.defaulter(Sprocket)(nothing)
    hooks.validator(Cluster, operations=["DELETE"])(nothing)
    validate, default, cluster = hooks.admission
    assert (validate.type, validate.name, validate.path) == (
        "validating",
        f"vsprocket.{GROUP}",
        "/validate-registry-test-example-com-v1-sprocket",
    )
    assert (default.type, default.name, default.path) == (
        "mutating",
        f"msprocket.{GROUP}",
        "/mutate-registry-test-example-com-v1-sprocket",
    )
    assert validate.rules == (
        {
            "apiGroups": [GROUP],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["sprockets"],
            "scope": "Namespaced",
        },
    )
    assert cluster.rules[0]["scope"] == "Cluster"
    assert cluster.rules[0]["operations"] == ["DELETE"]
    assert validate.model is Sprocket
    assert (validate.failure_policy, validate.match_policy, validate.side_effects) == (
        "Fail",
        "Equivalent",
        "None",
    )
    assert validate.timeout_seconds == 10


def test_built_in_kinds_and_resources_by_name() -> None:
    hooks = Webhooks()
    hooks.defaulter(Pod)(nothing)
    hooks.validator(ConfigMap, subresources=["status"])(nothing)
    hooks.validator("deployments.apps", operations=["*"])(nothing)
    hooks.validator(ApiResource("batch", "v1", "Job", "jobs", True))(nothing)
    pod, configmap, deployments, jobs = hooks.admission
    assert (pod.name, pod.path) == ("mpod.core.kubereflector.io", "/mutate-core-v1-pod")
    assert configmap.rules[0]["resources"] == ["configmaps", "configmaps/status"]
    assert (deployments.name, deployments.path) == (
        "vdeployments.apps.kubereflector.io",
        "/validate-apps-all-deployments",
    )
    assert deployments.rules[0] == {
        "apiGroups": ["apps"],
        "apiVersions": ["*"],
        "operations": ["*"],
        "resources": ["deployments"],
        "scope": "*",
    }
    assert deployments.model is None
    assert jobs.rules[0]["apiVersions"] == ["v1"]


def test_options_are_kept() -> None:
    hooks = Webhooks()
    hooks.defaulter(
        Sprocket,
        name="defaults.sprockets.example.com",
        path="/sprockets/defaults",
        failure_policy="Ignore",
        match_policy="Exact",
        side_effects="NoneOnDryRun",
        timeout_seconds=3,
        namespace_selector={"matchLabels": {"team": "a"}},
        object_selector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
        reinvocation_policy="IfNeeded",
    )(nothing)
    (webhook,) = hooks.admission
    assert webhook.name == "defaults.sprockets.example.com"
    assert webhook.path == "/sprockets/defaults"
    assert (webhook.failure_policy, webhook.match_policy, webhook.side_effects) == (
        "Ignore",
        "Exact",
        "NoneOnDryRun",
    )
    assert webhook.timeout_seconds == 3
    assert webhook.namespace_selector == {"matchLabels": {"team": "a"}}
    assert webhook.reinvocation_policy == "IfNeeded"
    assert hooks.at("/sprockets/defaults") is webhook
    assert hooks.at("/elsewhere") is None


@pytest.mark.parametrize(
    ("for_", "options", "error", "message"),
    [
        (Sprocket, {"failure_policy": "Sometimes"}, ValueError, "failure_policy must be one of"),
        (Sprocket, {"match_policy": "Fuzzy"}, ValueError, "match_policy must be one of"),
        (Sprocket, {"side_effects": "Some"}, ValueError, "side_effects must be one of"),
        (Sprocket, {"timeout_seconds": 31}, ValueError, "timeout_seconds is 1 to 30"),
        (Sprocket, {"operations": ["PATCH"]}, ValueError, "an operation must be one of"),
        (Sprocket, {"operations": "CREATE"}, TypeError, "operations is a non-empty list"),
        (Sprocket, {"operations": []}, TypeError, "operations is a non-empty list"),
        (Sprocket, {"subresources": "status"}, TypeError, "subresources is a list"),
        (Sprocket, {"name": "short.name"}, ValueError, "three or more lowercase segments"),
        (Sprocket, {"path": "no-slash"}, ValueError, "a webhook path starts with /"),
        (Sprocket, {"path": "/convert"}, ValueError, "is not /convert"),
        (Sprocket, {"path": "/Upper_Case"}, ValueError, "DNS-1123"),
        (Sprocket, {"namespace_selector": "team=a"}, TypeError, "is a label selector"),
        (Sprocket, {"colour": "red"}, TypeError, "unknown webhook options: colour"),
        ("Deployments.apps", {}, ValueError, "plural and group"),
        (42, {}, TypeError, "a model class, a resource name or an ApiResource"),
        (dict, {}, LookupError, "is not a registered model"),
    ],
)
def test_bad_registrations_say_what_is_wrong(
    for_: Any, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        Webhooks().validator(for_, **options)(nothing)


def test_reinvocation_is_a_mutating_option_only() -> None:
    with pytest.raises(TypeError, match="unknown webhook options: reinvocation_policy"):
        Webhooks().validator(Sprocket, reinvocation_policy="IfNeeded")  # type: ignore[call-arg]


def test_a_path_or_name_is_served_once() -> None:
    hooks = Webhooks()
    hooks.validator(Sprocket)(nothing)
    with pytest.raises(
        ValueError, match="served at /validate-registry-test-example-com-v1-sprocket"
    ):
        hooks.validator(Sprocket)(nothing)
    with pytest.raises(ValueError, match=f"named vsprocket.{GROUP} already"):
        hooks.validator(Sprocket, path="/other")(nothing)
    hooks.validator(Sprocket, path="/other", name="other.sprockets.example.com")(nothing)
    assert len(hooks) == 2


def registry() -> Webhooks:
    hooks = Webhooks()
    hooks.validator(Sprocket)(nothing)
    hooks.defaulter(Sprocket, reinvocation_policy="IfNeeded")(nothing)
    hooks.defaulter(Pod, object_selector={"matchLabels": {"a": "b"}})(nothing)
    hooks.converter(Sprocket, SprocketV1alpha1, to_hub=lambda o: o, from_hub=lambda o: o)  # type: ignore[arg-type,return-value]
    return hooks


def test_configurations_by_url_carry_the_ca_bundle() -> None:
    endpoint = WebhookEndpoint.at_url("https://127.0.0.1:9443/")
    mutating, validating = registry().configurations("sprockets", endpoint, b"PEM")
    bundle = base64.b64encode(b"PEM").decode()
    assert mutating["kind"] == "MutatingWebhookConfiguration"
    assert mutating["metadata"] == {"name": "sprockets"}
    first, pods = mutating["webhooks"]
    assert first == {
        "name": f"msprocket.{GROUP}",
        "clientConfig": {
            "url": "https://127.0.0.1:9443/mutate-registry-test-example-com-v1-sprocket",
            "caBundle": bundle,
        },
        "rules": [
            {
                "apiGroups": [GROUP],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["sprockets"],
                "scope": "Namespaced",
            }
        ],
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "timeoutSeconds": 10,
        "reinvocationPolicy": "IfNeeded",
    }
    assert pods["objectSelector"] == {"matchLabels": {"a": "b"}}
    assert validating["kind"] == "ValidatingWebhookConfiguration"
    (check,) = validating["webhooks"]
    assert "reinvocationPolicy" not in check


def test_configurations_by_service() -> None:
    endpoint = WebhookEndpoint.service("operators", "sprocket-webhooks", port=8443)
    (_, validating) = registry().configurations("sprockets", endpoint)
    assert validating["webhooks"][0]["clientConfig"] == {
        "service": {
            "namespace": "operators",
            "name": "sprocket-webhooks",
            "path": "/validate-registry-test-example-com-v1-sprocket",
            "port": 8443,
        }
    }


def test_only_the_configurations_with_webhooks_are_made() -> None:
    hooks = Webhooks()
    hooks.validator(Sprocket)(nothing)
    endpoint = WebhookEndpoint.at_url("https://127.0.0.1:9443")
    assert [c["kind"] for c in hooks.configurations("x", endpoint)] == [
        "ValidatingWebhookConfiguration"
    ]
    assert Webhooks().configurations("x", endpoint) == []


def test_the_conversion_stanza() -> None:
    hooks = registry()
    endpoint = WebhookEndpoint.at_url("https://127.0.0.1:9443")
    stanza = hooks.conversion_stanza(f"sprockets.{GROUP}", endpoint, b"PEM")
    assert stanza == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "url": "https://127.0.0.1:9443/convert",
                "caBundle": base64.b64encode(b"PEM").decode(),
            },
            "conversionReviewVersions": ["v1"],
        },
    }
    assert hooks.conversion_stanza(SprocketV1alpha1, endpoint, b"PEM") == stanza
    with pytest.raises(LookupError, match="no conversion is registered"):
        hooks.conversion_stanza(Pod, endpoint)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: WebhookEndpoint.at_url("http://127.0.0.1:9443"), "is https://host"),
        (lambda: WebhookEndpoint.at_url("https://:9443"), "is https://host"),
        (lambda: WebhookEndpoint.at_url("https://h/x?a=b"), "no query, fragment or credentials"),
        (lambda: WebhookEndpoint.at_url("https://u:p@h/"), "no query, fragment or credentials"),
        (lambda: WebhookEndpoint.service("", "x"), "needs a namespace and a name"),
        (lambda: WebhookEndpoint.service("ns", "x", port=0), "port is 1..65535"),
        (lambda: WebhookEndpoint(), "exactly one of them"),
    ],
)
def test_endpoints_are_checked(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()
