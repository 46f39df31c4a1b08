"""Admission webhooks (validating, mutating) and CRD conversion webhooks, served by the
Manager (controller-runtime's ``webhook`` package, for Python).

::

    manager = Manager(load_config(), webhook_port=9443)

    @manager.defaulter(Foo)
    def default_foo(foo: Foo, request: AdmissionRequest[Foo]) -> None:
        foo["spec"].setdefault("replicas", 1)

    @manager.validator(Foo)
    def validate_foo(foo: Foo, request: AdmissionRequest[Foo]) -> None:
        if not is_dns_label(foo["spec"]["deploymentName"]):
            raise Denied("spec.deploymentName must be a DNS-1123 label")

    manager.converter(Foo, FooV1alpha1, to_hub=alpha_to_v1, from_hub=v1_to_alpha)

The pieces, one module each: :mod:`~kubereflector.runtime.webhooks.admission` (what a
handler gets and answers, the ``AdmissionReview`` and the JSON Patch of its changes),
:mod:`~kubereflector.runtime.webhooks.conversion` (hub-and-spoke conversion, the
``ConversionReview``), :mod:`~kubereflector.runtime.webhooks.registry` (the registered
webhooks), :mod:`~kubereflector.runtime.webhooks.server` (the HTTPS server),
:mod:`~kubereflector.runtime.webhooks.configuration` (the webhook configurations and the
CRD conversion stanza) and :mod:`~kubereflector.runtime.webhooks.certificates`.
"""

from __future__ import annotations

from .admission import (
    ADMISSION_REVIEW_VERSION,
    OPERATIONS,
    AdmissionHandler,
    AdmissionRequest,
    AdmissionWebhook,
    Cause,
    Denied,
    GroupVersionKind,
    GroupVersionResource,
    Operation,
    ReviewError,
    UserInfo,
)
from .certificates import (
    CertificateFiles,
    CertificateProblem,
    SelfSignedCertificate,
    WebhookExtraMissing,
)
from .configuration import (
    CONVERSION_PATH,
    WebhookEndpoint,
    conversion_stanza,
    install_webhooks,
    webhook_configurations,
)
from .conversion import CONVERSION_REVIEW_VERSION, Conversion, ConversionError, review_conversion
from .registry import DefaulterOptions, HandlerDecorator, ValidatorOptions, Webhooks
from .server import WebhookOptions, WebhookServer

__all__ = [
    "ADMISSION_REVIEW_VERSION",
    "CONVERSION_PATH",
    "CONVERSION_REVIEW_VERSION",
    "OPERATIONS",
    "AdmissionHandler",
    "AdmissionRequest",
    "AdmissionWebhook",
    "Cause",
    "CertificateFiles",
    "CertificateProblem",
    "Conversion",
    "ConversionError",
    "DefaulterOptions",
    "Denied",
    "GroupVersionKind",
    "GroupVersionResource",
    "HandlerDecorator",
    "Operation",
    "ReviewError",
    "SelfSignedCertificate",
    "UserInfo",
    "ValidatorOptions",
    "WebhookEndpoint",
    "WebhookExtraMissing",
    "WebhookOptions",
    "WebhookServer",
    "Webhooks",
    "conversion_stanza",
    "install_webhooks",
    "review_conversion",
    "webhook_configurations",
]
