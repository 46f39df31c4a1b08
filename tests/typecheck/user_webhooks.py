"""A user's webhooks on kubereflector.runtime, as mypy --strict sees them: typed defaulters
and validators (coroutines and plain functions) of a model and of a resource by name,
hub-and-spoke conversion, the configurations. Type-checked by test_typecheck.py (never
run: it would need a cluster)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypedDict

from typing_extensions import NotRequired, assert_type

from kubereflector.client import load_config
from kubereflector.models import ApiResource, Pod, register
from kubereflector.models.admissionregistration_v1 import (
    MutatingWebhookConfiguration,
    ValidatingWebhookConfiguration,
)
from kubereflector.models.apiextensions_v1 import CustomResourceConversion
from kubereflector.runtime import (
    AdmissionRequest,
    Cause,
    Conversion,
    Denied,
    Manager,
    UserInfo,
    WebhookEndpoint,
    WebhookOptions,
    WebhookServer,
)


class WidgetSpec(TypedDict, total=False):
    size: int
    colour: str


class Widget(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[dict[str, Any]]
    spec: WidgetSpec


class WidgetV1alpha1(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[dict[str, Any]]
    spec: dict[str, Any]


register(Widget, ApiResource("example.com", "v1", "Widget", "widgets", True))
register(WidgetV1alpha1, ApiResource("example.com", "v1alpha1", "Widget", "widgets", True))

manager = Manager(
    load_config(), webhook_port=9443, webhook_options=WebhookOptions(cert_dir="/certs")
)


@manager.defaulter(Widget, reinvocation_policy="IfNeeded")
def default_widget(widget: Widget, request: AdmissionRequest[Widget]) -> None:
    assert_type(widget, Widget)
    widget["spec"].setdefault("size", 1)


@manager.validator(Widget, operations=["CREATE", "UPDATE", "DELETE"], timeout_seconds=5)
async def validate_widget(widget: Widget, request: AdmissionRequest[Widget]) -> list[str]:
    assert_type(request.old_object, Widget | None)
    assert_type(request.user_info, UserInfo)
    assert_type(request.operation, Literal["CREATE", "UPDATE", "DELETE", "CONNECT"])
    if widget["spec"].get("size", 0) > 3:
        raise Denied("too big", causes=[Cause("spec.size", "at most 3")])
    return ["colour is ignored"] if "colour" in widget["spec"] else []


@manager.validator("deployments.apps", failure_policy="Ignore")
def check_deployment(deployment: dict[str, Any], request: AdmissionRequest[dict[str, Any]]) -> None:
    assert_type(deployment["spec"], Any)


@manager.defaulter(Pod, namespace_selector={"matchLabels": {"inject": "on"}})
async def label_pod(pod: Pod, request: AdmissionRequest[Pod]) -> None:
    pod.setdefault("metadata", {}).setdefault("labels", {})["injected"] = "yes"


def to_hub(old: WidgetV1alpha1) -> Widget:
    return {"spec": {"size": int(old["spec"].get("count", 1))}}


def from_hub(new: Widget) -> WidgetV1alpha1:
    return {"spec": {"count": new["spec"].get("size", 1)}}


conversion = manager.converter(Widget, WidgetV1alpha1, to_hub=to_hub, from_hub=from_hub)
assert_type(conversion, Conversion[Widget])

# The decorators give the functions back.
plain: Callable[[Widget, AdmissionRequest[Widget]], None] = default_widget
coroutine: Callable[[Widget, AdmissionRequest[Widget]], Awaitable[list[str]]] = validate_widget

endpoint = WebhookEndpoint.service("operators", "widget-webhooks")
configurations = manager.webhooks.configurations("widgets", endpoint, ca_bundle=b"PEM")
assert_type(configurations, list[MutatingWebhookConfiguration | ValidatingWebhookConfiguration])
stanza = manager.webhooks.conversion_stanza(Widget, endpoint)
assert_type(stanza, CustomResourceConversion)
server = manager.webhook_server
assert_type(server, WebhookServer | None)
warnings: Sequence[str] = ["a", "b"]
