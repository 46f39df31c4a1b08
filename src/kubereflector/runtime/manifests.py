"""The Kubernetes objects that deploy an operator, from what its Manager describes
(:meth:`Manager.describe <kubereflector.runtime.Manager.describe>`): what
``kubereflector manifests MODULE:MANAGER`` prints.

:func:`manifests` returns, in the order ``kubectl apply -f`` needs them:

* the CustomResourceDefinitions of the operator's own kinds: those declared in Python
  that its manager names by their models (``ManagerDescription.custom_resources``),
  generated from the declarations, and those it is given;
* a ServiceAccount;
* the RBAC the manager needs and nothing more (see
  :mod:`kubereflector.runtime.permissions`): a ClusterRole and ClusterRoleBinding for
  what it does cluster-wide, a Role and RoleBinding in each namespace where it does
  more (a namespaced manager's namespace; the Lease's);
* a Deployment: the image, the replicas, the metrics and health ports with
  ``/healthz`` as liveness and ``/readyz`` as readiness probes, ``POD_NAME`` (the
  leader-election identity), a pod that runs as non-root with the runtime's default
  seccomp profile, a container with a read-only root filesystem (and a writable
  ``/tmp``), no privilege escalation and every capability dropped, resource
  requests and limits, and a termination grace period longer than the manager's
  graceful shutdown;
* with more than one replica, a PodDisruptionBudget (at most one replica down at a
  time);
* the webhook configurations it is given.

A manager that serves webhooks (``ManagerDescription.webhook_port``) gets what a
cluster needs to call them:

* a Service ``NAME-webhook`` (port 443 to the container's ``webhook`` port);
* the Deployment's ``webhook`` port, and the Secret ``NAME-webhook-cert`` (``tls.crt``,
  ``tls.key``, ``ca.crt``) mounted read-only at the manager's ``webhook_cert_dir``;
* its ``MutatingWebhookConfiguration`` (defaulters) and
  ``ValidatingWebhookConfiguration`` (validators), named ``NAME``, calling the Service;
* in the generated CRD of each kind it converts, the ``spec.conversion`` stanza calling
  the Service.

The CA bundle is left to cert-manager: the configurations and those CRDs carry
``cert-manager.io/inject-ca-from: NAMESPACE/NAME-webhook``, so that its CA injector
fills in the ``caBundle`` of the cert-manager ``Certificate`` ``NAME-webhook``, which
must write the Secret ``NAME-webhook-cert`` for ``NAME-webhook.NAMESPACE.svc`` (not
generated: apply it with your Issuer). Without cert-manager, set each ``caBundle`` to the
base64 of that CA's PEM yourself.

Every object is a plain dict typed with :mod:`kubereflector.models`' TypedDicts,
labelled ``app.kubernetes.io/name: NAME`` and ``app.kubernetes.io/managed-by:
kubereflector``. Pure: no I/O.
"""

from __future__ import annotations

import copy
import math
import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from .permissions import ManagerDescription, Rule
from .webhooks.configuration import WebhookEndpoint, conversion_stanza, webhook_configurations

if TYPE_CHECKING:
    from ..models.apps_v1 import Deployment
    from ..models.core_v1 import (
        Container,
        ContainerPort,
        ResourceRequirements,
        Service,
        ServiceAccount,
        Volume,
        VolumeMount,
    )
    from ..models.policy_v1 import PodDisruptionBudget
    from ..models.rbac_authorization_v1 import (
        ClusterRole,
        ClusterRoleBinding,
        Role,
        RoleBinding,
        Subject,
    )

__all__ = ["CA_INJECTION", "DEFAULT_RESOURCES", "Manifest", "manifests"]

Manifest: TypeAlias = (
    "ServiceAccount | ClusterRole | ClusterRoleBinding | Role | RoleBinding | Service "
    "| Deployment | PodDisruptionBudget | dict[str, Any]"
)
"""One object of :func:`manifests` (a CRD or a webhook configuration is a plain
``dict``)."""

CA_INJECTION: Final = "cert-manager.io/inject-ca-from"
"""The annotation that has cert-manager's CA injector fill in a webhook's ``caBundle``
from a ``Certificate`` (``NAMESPACE/NAME``)."""

DEFAULT_RESOURCES: Final[ResourceRequirements] = {
    "requests": {"cpu": "10m", "memory": "64Mi"},
    "limits": {"cpu": "500m", "memory": "256Mi"},
}
"""The container's resources unless told otherwise (kubebuilder's requests; a limit
that leaves room for the caches of a few thousand objects: measure yours)."""

_RBAC: Final = "rbac.authorization.k8s.io"
_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_SHUTDOWN_MARGIN: Final = 10
"""Seconds the pod is given beyond the manager's graceful shutdown before SIGKILL."""


def _labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "kubereflector"}


def _check_label(what: str, value: object) -> str:
    if not isinstance(value, str) or not _DNS_LABEL.match(value):
        raise ValueError(
            f"{what} must be a DNS-1123 label (lower-case letters, digits and '-', "
            f"at most 63), not {value!r}"
        )
    return value


def _port(what: str, port: int | None) -> int | None:
    if port == 0:
        raise ValueError(
            f"the manager's {what}=0 lets the system pick a port, which a Deployment cannot "
            f"name: give the Manager a fixed {what}"
        )
    return port


def manifests(
    description: ManagerDescription,
    *,
    name: str,
    image: str,
    namespace: str = "default",
    replicas: int = 1,
    resources: ResourceRequirements | None = None,
    custom_resource_definitions: Iterable[Mapping[str, Any]] = (),
    webhook_configurations: Iterable[Mapping[str, Any]] = (),
) -> list[Manifest]:
    """The objects that deploy the operator ``description`` describes as ``name`` in
    ``namespace`` (see the module documentation).

    ``image``: the container image (its entrypoint runs the operator); ``replicas``:
    how many pods (more than one only makes sense with leader election);
    ``resources``: the container's requests and limits (default
    :data:`DEFAULT_RESOURCES`). The CRDs generated from ``description.custom_resources``
    come first, then ``custom_resource_definitions`` as given (one given under the name
    of a generated one replaces it: one with a conversion webhook, say);
    ``webhook_configurations`` come last, as given.

    Raises ``ValueError`` for a ``name`` or ``namespace`` that is no DNS-1123 label,
    an empty ``image``, ``replicas`` below 1, a manager serving on port 0, or one serving
    webhooks with a self-signed certificate (no ``webhook_cert_dir``) or from a relative
    ``webhook_cert_dir``.
    """
    _check_label("name", name)
    _check_label("namespace", namespace)
    if not isinstance(image, str) or not image.strip():
        raise ValueError("image must name a container image")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ValueError(f"replicas must be an integer >= 1, not {replicas!r}")
    metrics_port = _port("metrics_port", description.metrics_port)
    health_port = _port("health_port", description.health_port)
    webhook_port = _port("webhook_port", description.webhook_port)
    serves_webhooks = webhook_port is not None and bool(
        description.admission_webhooks or description.conversions
    )
    cert_dir = _cert_dir(description.webhook_cert_dir) if serves_webhooks else None
    labels = _labels(name)
    endpoint = WebhookEndpoint.service(namespace, f"{name}-webhook")
    injection = {CA_INJECTION: f"{namespace}/{name}-webhook"}
    given = [dict(crd) for crd in custom_resource_definitions]
    named = {(crd.get("metadata") or {}).get("name") for crd in given}
    out: list[Manifest] = []
    for resource in description.custom_resources:
        if resource.name in named:
            continue
        crd: dict[str, Any] = copy.deepcopy(dict(resource.manifest()))
        converting = [c for c in description.conversions if c.crd_name == resource.name]
        if serves_webhooks and converting:
            crd["spec"]["conversion"] = dict(conversion_stanza(converting[0], endpoint))
            _annotate(crd, injection)
        out.append(crd)
    out.extend(given)
    account: ServiceAccount = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
    }
    out.append(account)
    out.extend(_rbac(description, name, namespace, labels))
    if serves_webhooks:
        service: Service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"{name}-webhook", "namespace": namespace, "labels": labels},
            "spec": {
                "selector": {"app.kubernetes.io/name": name},
                "ports": [
                    {"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}
                ],
            },
        }
        out.append(service)
    out.append(
        _deployment(
            description,
            name=name,
            namespace=namespace,
            image=image.strip(),
            replicas=replicas,
            resources=resources if resources is not None else DEFAULT_RESOURCES,
            metrics_port=metrics_port,
            health_port=health_port,
            webhook_port=webhook_port if serves_webhooks else None,
            cert_dir=cert_dir,
        )
    )
    if replicas > 1:
        budget: PodDisruptionBudget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "maxUnavailable": 1,
                "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            },
        }
        out.append(budget)
    if serves_webhooks:
        for configuration in _webhook_configurations(
            name, description.admission_webhooks, endpoint
        ):
            configuration["metadata"]["labels"] = labels
            _annotate(configuration, injection)
            out.append(configuration)
    out.extend(dict(config) for config in webhook_configurations)
    return out


def _webhook_configurations(
    name: str, webhooks: Iterable[Any], endpoint: WebhookEndpoint
) -> list[dict[str, Any]]:
    return [dict(c) for c in webhook_configurations(name, list(webhooks), endpoint)]


def _annotate(obj: dict[str, Any], annotations: Mapping[str, str]) -> None:
    metadata = obj.setdefault("metadata", {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}


def _cert_dir(cert_dir: str | None) -> str:
    if cert_dir is None:
        raise ValueError(
            "the manager serves webhooks with a self-signed certificate, which no API server "
            "in a cluster trusts: give it WebhookOptions(cert_dir=...) (where the Deployment "
            "mounts the serving certificate's Secret)"
        )
    if not posixpath.isabs(cert_dir):
        raise ValueError(f"the webhook cert_dir must be an absolute path, not {cert_dir!r}")
    return posixpath.normpath(cert_dir)


def _rbac(
    description: ManagerDescription, name: str, namespace: str, labels: dict[str, str]
) -> list[Manifest]:
    subject: Subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    out: list[Manifest] = []
    permissions = description.permissions
    if permissions.cluster:
        role: ClusterRole = {
            "apiVersion": f"{_RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "rules": [r.policy_rule() for r in permissions.cluster],
        }
        binding: ClusterRoleBinding = {
            "apiVersion": f"{_RBAC}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": name},
            "subjects": [subject],
        }
        out += [role, binding]
    by_namespace: dict[str, set[Rule]] = {}
    for where, rules in permissions.namespaced:
        by_namespace.setdefault(where or namespace, set()).update(rules)
    for where, scoped in sorted(by_namespace.items()):
        scoped_role: Role = {
            "apiVersion": f"{_RBAC}/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": where, "labels": labels},
            "rules": [r.policy_rule() for r in sorted(scoped)],
        }
        scoped_binding: RoleBinding = {
            "apiVersion": f"{_RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": where, "labels": labels},
            "roleRef": {"apiGroup": _RBAC, "kind": "Role", "name": name},
            "subjects": [subject],
        }
        out += [scoped_role, scoped_binding]
    return out


def _deployment(
    description: ManagerDescription,
    *,
    name: str,
    namespace: str,
    image: str,
    replicas: int,
    resources: ResourceRequirements,
    metrics_port: int | None,
    health_port: int | None,
    webhook_port: int | None,
    cert_dir: str | None,
) -> Deployment:
    ports: list[ContainerPort] = []
    if metrics_port is not None:
        port_name = "http" if metrics_port == health_port else "metrics"
        ports.append({"name": port_name, "containerPort": metrics_port, "protocol": "TCP"})
    if health_port is not None and health_port != metrics_port:
        ports.append({"name": "health", "containerPort": health_port, "protocol": "TCP"})
    mounts: list[VolumeMount] = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[Volume] = [{"name": "tmp", "emptyDir": {}}]
    if webhook_port is not None and cert_dir is not None:
        ports.append({"name": "webhook", "containerPort": webhook_port, "protocol": "TCP"})
        mounts.append({"name": "webhook-cert", "mountPath": cert_dir, "readOnly": True})
        volumes.append({"name": "webhook-cert", "secret": {"secretName": f"{name}-webhook-cert"}})
    container: Container = {
        "name": "operator",
        "image": image,
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "resources": resources,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }
    if ports:
        container["ports"] = ports
    if health_port is not None:
        probe_port = "http" if health_port == metrics_port else "health"
        container["livenessProbe"] = {
            "httpGet": {"path": "/healthz", "port": probe_port},
            "initialDelaySeconds": 15,
            "periodSeconds": 20,
        }
        container["readinessProbe"] = {
            "httpGet": {"path": "/readyz", "port": probe_port},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
        }
    selector = {"app.kubernetes.io/name": name}
    grace = math.ceil(description.graceful_shutdown_timeout) + _SHUTDOWN_MARGIN
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels(name)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": _labels(name)},
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "terminationGracePeriodSeconds": grace,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }
