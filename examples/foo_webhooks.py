"""foo_webhooks: the sample-controller's Foo guarded and converted by webhooks the Manager
serves.

* a defaulter: ``spec.replicas`` defaults to 1;
* a validator: ``spec.deploymentName`` is a DNS-1123 label and never changes;
* a conversion between ``samplecontroller.k8s.io/v1alpha1`` (sample-controller's Foo:
  ``deploymentName``, ``replicas``) and ``v1`` (the hub and storage version, which adds
  ``paused``): a paused Foo read as v1alpha1 keeps ``paused`` in an annotation, so it
  comes back when read as v1 again.

    python examples/foo_webhooks.py [--kubeconfig PATH] [--webhook-port 9443]
        [--install foo-webhooks]

With ``--install NAME`` (local development: the API server must reach
``https://127.0.0.1:PORT``), it creates the Foo CRD if it is missing and writes the
webhook configurations ``NAME`` and the CRD's conversion, trusting the self-signed CA it
makes at the start. In a cluster, serve a certificate from cert-manager
(``WebhookOptions(cert_dir=...)``) and apply the configurations the Manager generates
with ``WebhookEndpoint.service(...)``.

Import ``add_webhooks`` to serve these webhooks from your own Manager.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import re
import sys
from collections.abc import Sequence
from typing import Final

from typing_extensions import NotRequired, TypedDict

from kubereflector.client import Client, load_config
from kubereflector.errors import AlreadyExistsError
from kubereflector.models.apiextensions_v1 import CustomResourceDefinition
from kubereflector.models.crd import API_APPROVED, crd_manifest, custom_resource
from kubereflector.models.meta_v1 import ObjectMeta
from kubereflector.runtime import (
    AdmissionRequest,
    Cause,
    Denied,
    Manager,
    WebhookOptions,
)

GROUP: Final = "samplecontroller.k8s.io"
PAUSED: Final = f"{GROUP}/paused"
"""Where a v1alpha1 Foo keeps v1's ``spec.paused`` (v1alpha1 has no such field)."""
DNS_1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


class FooSpec(TypedDict, total=False):
    deploymentName: str
    replicas: int
    paused: bool


class FooStatus(TypedDict, total=False):
    availableReplicas: int


APPROVAL: Final = {API_APPROVED: "unapproved, experimental-only (kubereflector's example)"}
"""A group under k8s.io needs this annotation on its CRD (kube-apiserver refuses it else)."""


@custom_resource(group=GROUP, version="v1", storage=True, annotations=APPROVAL)
class Foo(TypedDict):
    """A Foo in v1, the hub and storage version."""

    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: FooSpec
    status: NotRequired[FooStatus]


class FooV1alpha1Spec(TypedDict, total=False):
    deploymentName: str
    replicas: int


@custom_resource(group=GROUP, version="v1alpha1", kind="Foo")
class FooV1alpha1(TypedDict):
    """A Foo in v1alpha1, as sample-controller defines it."""

    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: FooV1alpha1Spec
    status: NotRequired[FooStatus]


# -- admission -----------------------------------------------------------------------------------


def default_foo(foo: Foo, request: AdmissionRequest[Foo]) -> None:
    """``spec.replicas`` defaults to 1 (the server answers the patch of this change)."""
    foo["spec"].setdefault("replicas", 1)


def validate_foo(foo: Foo, request: AdmissionRequest[Foo]) -> None:
    """``spec.deploymentName`` is a DNS-1123 label, and it does not change."""
    name = foo["spec"].get("deploymentName", "")
    if len(name) > 63 or not DNS_1123_LABEL.match(name):
        raise Denied(
            f"spec.deploymentName {name!r} is not a DNS-1123 label",
            causes=[
                Cause(
                    "spec.deploymentName",
                    "lowercase letters, digits and '-', at most 63, starting and ending "
                    "with a letter or digit",
                )
            ],
        )
    old = request.old_object
    if old is not None and old["spec"].get("deploymentName") != name:
        raise Denied(
            "spec.deploymentName cannot change",
            causes=[Cause("spec.deploymentName", "field is immutable", "FieldValueForbidden")],
        )


# -- conversion ----------------------------------------------------------------------------------


def _with_annotation(meta: ObjectMeta, key: str, value: str | None) -> ObjectMeta:
    """A copy of ``meta`` with the annotation ``key`` set to ``value`` (``None``: removed)."""
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != key}
    if value is not None:
        annotations[key] = value
    copy: ObjectMeta = {**meta}
    if annotations:
        copy["annotations"] = annotations
    else:
        copy.pop("annotations", None)
    return copy


def v1alpha1_to_v1(foo: FooV1alpha1) -> Foo:
    """v1alpha1 to the hub: ``paused`` back from its annotation."""
    meta = foo.get("metadata", {})
    spec: FooSpec = {}
    if "deploymentName" in foo["spec"]:
        spec["deploymentName"] = foo["spec"]["deploymentName"]
    if "replicas" in foo["spec"]:
        spec["replicas"] = foo["spec"]["replicas"]
    if (meta.get("annotations") or {}).get(PAUSED) == "true":
        spec["paused"] = True
    hub: Foo = {"metadata": _with_annotation(meta, PAUSED, None), "spec": spec}
    if "status" in foo:
        hub["status"] = foo["status"]
    return hub


def v1_to_v1alpha1(foo: Foo) -> FooV1alpha1:
    """The hub to v1alpha1: ``paused``, which v1alpha1 lacks, kept in an annotation."""
    spec: FooV1alpha1Spec = {}
    if "deploymentName" in foo["spec"]:
        spec["deploymentName"] = foo["spec"]["deploymentName"]
    if "replicas" in foo["spec"]:
        spec["replicas"] = foo["spec"]["replicas"]
    paused = "true" if foo["spec"].get("paused") else None
    spoke: FooV1alpha1 = {
        "metadata": _with_annotation(foo.get("metadata", {}), PAUSED, paused),
        "spec": spec,
    }
    if "status" in foo:
        spoke["status"] = foo["status"]
    return spoke


def add_webhooks(manager: Manager) -> None:
    """Serve Foo's defaulter, validator and conversion from ``manager`` (which needs a
    ``webhook_port``)."""
    manager.defaulter(Foo)(default_foo)
    manager.validator(Foo)(validate_foo)
    manager.converter(Foo, FooV1alpha1, to_hub=v1alpha1_to_v1, from_hub=v1_to_v1alpha1)


# -- the CustomResourceDefinition ----------------------------------------------------------------


def foo_crd() -> CustomResourceDefinition:
    """Foo's CustomResourceDefinition, generated from the declarations: v1alpha1 and v1
    served, v1 stored (the conversion is added by the Manager with
    ``WebhookOptions(install=...)``)."""
    return crd_manifest(Foo)


async def ensure_crd(client: Client) -> None:
    """Create Foo's CRD unless it exists."""
    with contextlib.suppress(AlreadyExistsError):
        await client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", foo_crd())


# -- the program ---------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, in-cluster")
    parser.add_argument("--webhook-port", type=int, default=9443)
    parser.add_argument(
        "--install",
        metavar="NAME",
        help="create the CRD if missing, and write the webhook configurations NAME",
    )
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    options = WebhookOptions(install=args.install) if args.install else None
    manager = Manager(
        load_config(args.kubeconfig), webhook_port=args.webhook_port, webhook_options=options
    )
    add_webhooks(manager)
    server = manager.webhook_server
    assert server is not None

    async def announce() -> None:
        await server.wait_serving()
        print(f"serving Foo webhooks at {server.url}", flush=True)

    async with manager:
        if args.install:
            await ensure_crd(manager.client)
        announcing = asyncio.create_task(announce())
        try:
            await manager.run()
        finally:
            announcing.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(serve(args))  # SIGINT and SIGTERM stop the manager gracefully
    return 0


if __name__ == "__main__":
    sys.exit(main())
