"""What tells the API server to call the webhooks: the
``ValidatingWebhookConfiguration`` and ``MutatingWebhookConfiguration`` of the registered
admission webhooks, and the ``spec.conversion`` stanza of a CRD with a conversion webhook,
reaching the server by URL (local development) or through a Service (in a cluster), with
the CA bundle the API server must trust; and :func:`install_webhooks`, which writes them to a
cluster.

The generated webhooks say ``sideEffects: None`` and ``admissionReviewVersions: [v1]``
(the server answers v1 reviews only), and carry each registration's ``failurePolicy``,
``matchPolicy``, ``timeoutSeconds``, selectors and (mutating) ``reinvocationPolicy``.
Pure functions but :func:`install_webhooks`.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import urlsplit

from .admission import AdmissionWebhook
from .conversion import Conversion

if TYPE_CHECKING:
    from ...client.rest import Client
    from ...models.admissionregistration_v1 import (
        MutatingWebhookConfiguration,
        ValidatingWebhookConfiguration,
    )
    from ...models.apiextensions_v1 import CustomResourceConversion

__all__ = [
    "CONVERSION_PATH",
    "FIELD_MANAGER",
    "WebhookEndpoint",
    "conversion_stanza",
    "install_webhooks",
    "mutating_configuration",
    "validating_configuration",
    "webhook_configurations",
]

CONVERSION_PATH: Final = "/convert"
"""Where the server answers ``ConversionReview`` requests (every kind's, as controller-runtime)."""

FIELD_MANAGER: Final = "kubereflector-webhooks"
"""The field manager :func:`install_webhooks` applies the configurations as."""

_ADMISSION_REGISTRATION: Final = "/apis/admissionregistration.k8s.io/v1"


@dataclass(frozen=True, slots=True)
class WebhookEndpoint:
    """How the API server reaches the webhook server: at ``url`` (``https://host:port``,
    for development and tests; the paths are appended), or through the Service
    ``service_name`` in ``service_namespace`` on ``service_port`` (in a cluster; the
    serving certificate must then name ``<service>.<namespace>.svc``).

    Make one with :meth:`at_url` or :meth:`service`. Raises ``ValueError`` for a URL that
    is not ``https`` or carries a query, a fragment or credentials (kube-apiserver
    refuses those), and for a Service without a name or namespace, or a bad port.
    """

    url: str | None = None
    service_namespace: str | None = None
    service_name: str | None = None
    service_port: int = 443

    def __post_init__(self) -> None:
        if (self.url is None) == (self.service_name is None):
            raise ValueError("a webhook endpoint is a URL or a Service, exactly one of them")
        if self.url is not None:
            parts = urlsplit(self.url)
            if parts.scheme != "https" or not parts.hostname:
                raise ValueError(f"a webhook URL is https://host[:port][/path], not {self.url!r}")
            if parts.query or parts.fragment or parts.username or parts.password:
                raise ValueError(
                    f"a webhook URL has no query, fragment or credentials: {self.url!r}"
                )
        else:
            if not self.service_namespace or not self.service_name:
                raise ValueError("a webhook Service needs a namespace and a name")
            if not 1 <= self.service_port <= 65535:
                raise ValueError(f"a Service port is 1..65535, not {self.service_port}")

    @classmethod
    def at_url(cls, url: str) -> WebhookEndpoint:
        """The server at ``url`` (``https://127.0.0.1:9443``)."""
        return cls(url=url)

    @classmethod
    def service(cls, namespace: str, name: str, port: int = 443) -> WebhookEndpoint:
        """The server behind the Service ``namespace/name`` on ``port``."""
        return cls(service_namespace=namespace, service_name=name, service_port=port)

    def client_config(self, path: str, ca_bundle: bytes | None) -> dict[str, Any]:
        """The ``clientConfig`` of the webhook served at ``path`` (``caBundle``: the PEM
        of the CA the API server must trust, if given)."""
        config: dict[str, Any]
        if self.url is not None:
            config = {"url": self.url.rstrip("/") + path}
        else:
            config = {
                "service": {
                    "namespace": self.service_namespace,
                    "name": self.service_name,
                    "path": path,
                    "port": self.service_port,
                }
            }
        if ca_bundle:
            config["caBundle"] = base64.b64encode(ca_bundle).decode()
        return config


def _webhook(
    webhook: AdmissionWebhook[Any], endpoint: WebhookEndpoint, ca_bundle: bytes | None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": webhook.name,
        "clientConfig": endpoint.client_config(webhook.path, ca_bundle),
        "rules": [dict(rule) for rule in webhook.rules],
        "admissionReviewVersions": ["v1"],
        "sideEffects": webhook.side_effects,
        "failurePolicy": webhook.failure_policy,
        "matchPolicy": webhook.match_policy,
        "timeoutSeconds": webhook.timeout_seconds,
    }
    if webhook.namespace_selector is not None:
        entry["namespaceSelector"] = dict(webhook.namespace_selector)
    if webhook.object_selector is not None:
        entry["objectSelector"] = dict(webhook.object_selector)
    if webhook.mutating:
        entry["reinvocationPolicy"] = webhook.reinvocation_policy
    return entry


def validating_configuration(
    name: str,
    webhooks: Iterable[AdmissionWebhook[Any]],
    endpoint: WebhookEndpoint,
    ca_bundle: bytes | None = None,
) -> ValidatingWebhookConfiguration | None:
    """The ``ValidatingWebhookConfiguration`` ``name`` of the validating ones of
    ``webhooks`` (``None`` when there are none), in registration order."""
    entries = [_webhook(w, endpoint, ca_bundle) for w in webhooks if not w.mutating]
    if not entries:
        return None
    return cast(
        "ValidatingWebhookConfiguration",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": entries,
        },
    )


def mutating_configuration(
    name: str,
    webhooks: Iterable[AdmissionWebhook[Any]],
    endpoint: WebhookEndpoint,
    ca_bundle: bytes | None = None,
) -> MutatingWebhookConfiguration | None:
    """The ``MutatingWebhookConfiguration`` ``name`` of the mutating ones of ``webhooks``
    (``None`` when there are none), in registration order (the order kube calls them)."""
    entries = [_webhook(w, endpoint, ca_bundle) for w in webhooks if w.mutating]
    if not entries:
        return None
    return cast(
        "MutatingWebhookConfiguration",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": entries,
        },
    )


def webhook_configurations(
    name: str,
    webhooks: Sequence[AdmissionWebhook[Any]],
    endpoint: WebhookEndpoint,
    ca_bundle: bytes | None = None,
) -> list[MutatingWebhookConfiguration | ValidatingWebhookConfiguration]:
    """The mutating configuration (if any mutating webhook) then the validating one (if
    any validating webhook), both named ``name``."""
    found: list[MutatingWebhookConfiguration | ValidatingWebhookConfiguration] = []
    mutating = mutating_configuration(name, webhooks, endpoint, ca_bundle)
    if mutating is not None:
        found.append(mutating)
    validating = validating_configuration(name, webhooks, endpoint, ca_bundle)
    if validating is not None:
        found.append(validating)
    return found


def conversion_stanza(
    conversion: Conversion[Any], endpoint: WebhookEndpoint, ca_bundle: bytes | None = None
) -> CustomResourceConversion:
    """The ``spec.conversion`` of ``conversion``'s CRD: strategy ``Webhook`` at
    :data:`CONVERSION_PATH`, ``conversionReviewVersions: [v1]``."""
    return cast(
        "CustomResourceConversion",
        {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": endpoint.client_config(CONVERSION_PATH, ca_bundle),
                "conversionReviewVersions": ["v1"],
            },
        },
    )


async def install_webhooks(
    client: Client,
    name: str,
    webhooks: Sequence[AdmissionWebhook[Any]],
    conversions: Iterable[Conversion[Any]],
    endpoint: WebhookEndpoint,
    ca_bundle: bytes | None = None,
) -> None:
    """Write the configurations (server-side apply as :data:`FIELD_MANAGER`, forced) and
    each conversion's stanza into its CRD (a merge patch of ``spec.conversion``) with
    ``client``. The CRDs must exist. Raises the client's errors
    (:class:`~kubereflector.errors.ApiError` and its subclasses)."""
    params = {"fieldManager": FIELD_MANAGER, "force": "true"}
    for configuration in webhook_configurations(name, webhooks, endpoint, ca_bundle):
        plural = configuration["kind"].lower() + "s"
        await client.patch(
            f"{_ADMISSION_REGISTRATION}/{plural}/{name}",
            configuration,
            content_type="application/apply-patch+yaml",
            params=params,
        )
    for conversion in conversions:
        stanza = conversion_stanza(conversion, endpoint, ca_bundle)
        await client.patch(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{conversion.crd_name}",
            {"spec": {"conversion": stanza}},
        )
