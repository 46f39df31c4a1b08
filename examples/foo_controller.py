"""foo_controller: Kubernetes' sample-controller, typed end to end, with its webhooks.

A ``Foo`` asks for a Deployment of nginx named ``spec.deploymentName`` with
``spec.replicas`` replicas. The controller keeps that Deployment (controlled by the Foo,
so it goes when the Foo goes), scales and pauses it with the Foo, reports
``status.availableReplicas`` and a ``Ready`` condition, and leaves alone a Deployment of
that name that is not its Foo's, with a Warning Event ``ErrResourceExists``: the
semantics of k8s.io/sample-controller.

Foo is declared once, below, in two versions: ``v1alpha1`` (sample-controller's) and
``v1`` (the hub, stored), which adds ``paused``. Its CRD is generated from these
declarations (in examples/: ``kubereflector crd foo_controller:Foo``). With
``--webhook-port``, every replica also serves Foo's webhooks:

* a defaulter: ``spec.replicas`` defaults to 1;
* a validator: ``spec.deploymentName`` is a DNS-1123 label and never changes;
* the conversion between the versions: a v1alpha1 Foo keeps v1's ``paused`` in an
  annotation, so nothing is lost on the way back.

    python examples/foo_controller.py [--kubeconfig PATH] [--namespace NS] [--shards N]
        [--lease-name foo-controller] [--lease-namespace NS] [--workers 2]
        [--metrics-port 8080] [--health-port 8081]
        [--webhook-port 9443 [--cert-dir DIR]] [--install]

Its replicas elect a leader, or with ``--shards N`` split the Foos between them: each
reconciles and caches the Foos of its shards (a Foo's Deployment follows its Foo).
``--install`` is for local development: it creates or updates the CRD and, with
``--webhook-port``, makes a self-signed CA and writes the webhook configurations and the
CRD's conversion trusting it (the API server must reach ``https://127.0.0.1:PORT``).
``kubereflector manifests examples/foo_controller.py:deployed`` prints what deploys it
with its webhooks: the CRD (its conversion calling the webhook Service), a
ServiceAccount, its least-privilege RBAC, the webhook Service, a Deployment mounting the
serving certificate's Secret, and the webhook configurations (their CA bundle injected
by cert-manager: see :mod:`kubereflector.runtime.manifests`); ``...:build`` the same
without webhooks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import logging
import re
import sys
from collections.abc import Sequence
from typing import Annotated, Final

from msgspec import Meta
from typing_extensions import NotRequired, TypedDict

from kubereflector.client import Client, load_config
from kubereflector.clock import Clock
from kubereflector.errors import NotFoundError
from kubereflector.models import Condition, CustomResourceDefinition, Deployment, ObjectMeta
from kubereflector.models.crd import crd_manifest, custom_resource
from kubereflector.runtime import (
    AdmissionRequest,
    Cause,
    ControllerOptions,
    Denied,
    LeaderElection,
    LeaderElectionLostError,
    Manager,
    Permission,
    Request,
    Sharding,
    TerminalError,
    WebhookOptions,
    apply,
    is_condition_true,
    is_controlled_by,
    set_condition,
    set_controller_reference,
)

GROUP: Final = "samplecontroller.kubereflector.io"  # k8s.io's own is samplecontroller.k8s.io
NAME: Final = "foo-controller"
"""The controller's name: its Lease, Events, field manager and metrics label."""
PAUSED: Final = f"{GROUP}/paused"
"""Where a v1alpha1 Foo keeps v1's ``spec.paused``."""
DNS_1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
CERT_DIR: Final = "/tmp/k8s-webhook-server/serving-certs"  # controller-runtime's
"""Where the deployed operator reads its serving certificate (a Secret mounted there)."""

# -- the API: Foo, in two versions -----------------------------------------------------------


class FooStatus(TypedDict):
    availableReplicas: int
    conditions: NotRequired[list[Condition]]


class FooV1alpha1Spec(TypedDict):
    deploymentName: str
    replicas: NotRequired[Annotated[int, Meta(ge=0)]]


@custom_resource(group=GROUP, version="v1alpha1", kind="Foo")
class FooV1alpha1(TypedDict):
    """A Foo as k8s.io/sample-controller defines it."""

    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: FooV1alpha1Spec
    status: NotRequired[FooStatus]


class FooSpec(FooV1alpha1Spec):
    paused: NotRequired[bool]


@custom_resource(group=GROUP, version="v1", storage=True)
class Foo(TypedDict):
    """A Foo: a Deployment of nginx, wanted (v1, the hub and storage version)."""

    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: FooSpec
    status: NotRequired[FooStatus]


# -- the controller --------------------------------------------------------------------------


def deployment_for(foo: Foo) -> Deployment:
    """sample-controller's newDeployment: nginx, labelled for its Foo, controlled by it."""
    labels = {"app": "nginx", "controller": foo["metadata"]["name"]}
    deployment: Deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": foo["spec"]["deploymentName"],
            "namespace": foo["metadata"]["namespace"],
        },
        "spec": {
            "replicas": foo["spec"].get("replicas", 1),
            "paused": foo["spec"].get("paused", False),
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
            },
        },
    }
    return set_controller_reference(foo, deployment)


def add_controller(manager: Manager, options: ControllerOptions | None = None) -> None:
    """Reconcile the Foos of ``manager``'s cluster (two workers unless ``options`` say)."""
    events = manager.event_recorder(NAME)

    @manager.reconciler(
        Foo,
        owns=[Deployment],  # a change to a Foo's Deployment queues the Foo
        options=options or ControllerOptions(max_concurrent_reconciles=2),
        name=NAME,
        rbac=[Permission(f"foos.{GROUP}/status", "patch")],
    )
    async def reconcile(request: Request) -> None:
        foo = manager.lister_for(Foo).namespaced(request.namespace).get(request.name)
        if foo is None:
            return  # deleted: the garbage collector deletes its Deployment
        name = foo["spec"]["deploymentName"]
        deployments = manager.client.resource(Deployment, namespace=request.namespace)
        found = manager.lister_for(Deployment).namespaced(request.namespace).get(name)
        if found is None:  # (sharded, a Deployment no Foo owns is in no replica's cache)
            with contextlib.suppress(NotFoundError):
                found = await deployments.get(name)
        if found is not None and not is_controlled_by(found, foo):
            message = f"Resource {name!r} already exists and is not managed by Foo"
            events.record(foo, "Warning", "ErrResourceExists", message)
            raise TerminalError(message)  # tried again when the Foo changes
        if found is None:  # created (a Deployment made meanwhile: AlreadyExists, retried)
            deployment = await deployments.create(deployment_for(foo))
        else:  # its own: scaled and paused with it
            deployment = await apply(deployments, deployment_for(foo))

        available = deployment.get("status", {}).get("availableReplicas", 0)
        wanted = foo["spec"].get("replicas", 1)
        updated = copy.deepcopy(foo)  # never change the cache's own object
        updated.setdefault("status", {"availableReplicas": available})["availableReplicas"] = (
            available
        )
        set_condition(
            updated,
            "Ready",
            "True" if available >= wanted else "False",
            reason="DeploymentAvailable" if available >= wanted else "DeploymentUnavailable",
            message=f"{available} of {wanted} replicas available",
        )
        if updated["status"] != foo.get("status"):  # a patch: no conflict with other writes
            foos = manager.client.resource(Foo, namespace=request.namespace)
            await foos.patch(request.name, {"status": updated["status"]}, subresource="status")
        events.record(foo, "Normal", "Synced", "Foo synced successfully")


# -- the webhooks ----------------------------------------------------------------------------


def default_foo(foo: Foo, request: AdmissionRequest[Foo]) -> None:
    """``spec.replicas`` defaults to 1 (the server answers the JSON Patch of the change)."""
    if "spec" in foo:  # (the API server checks the schema after the defaulters)
        foo["spec"].setdefault("replicas", 1)


def validate_foo(foo: Foo, request: AdmissionRequest[Foo]) -> None:
    """``spec.deploymentName`` is a DNS-1123 label, and it does not change."""
    name = foo["spec"]["deploymentName"]
    if not DNS_1123_LABEL.match(name):
        why = "lowercase letters, digits and '-', at most 63, a letter or digit at each end"
        raise Denied(
            f"spec.deploymentName {name!r} is not a DNS-1123 label",
            causes=[Cause("spec.deploymentName", why)],
        )
    old = request.old_object
    if old is not None and old["spec"]["deploymentName"] != name:
        raise Denied(
            "spec.deploymentName cannot change",
            causes=[Cause("spec.deploymentName", "field is immutable", "FieldValueForbidden")],
        )


def _with_annotations(meta: ObjectMeta, annotations: dict[str, str]) -> ObjectMeta:
    """A copy of ``meta`` with ``annotations`` (none: no field, as kube drops an empty map)."""
    copied: ObjectMeta = {**meta}
    copied.pop("annotations", None)
    if annotations:
        copied["annotations"] = annotations
    return copied


def v1alpha1_to_v1(foo: FooV1alpha1) -> Foo:
    """To the hub: ``paused`` back from its annotation."""
    meta = foo.get("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    spec: FooSpec = {"deploymentName": foo["spec"]["deploymentName"]}
    if "replicas" in foo["spec"]:
        spec["replicas"] = foo["spec"]["replicas"]
    if annotations.pop(PAUSED, None) == "true":
        spec["paused"] = True
    hub: Foo = {"metadata": _with_annotations(meta, annotations), "spec": spec}
    if "status" in foo:
        hub["status"] = foo["status"]
    return hub


def v1_to_v1alpha1(foo: Foo) -> FooV1alpha1:
    """From the hub: ``paused``, which v1alpha1 lacks, kept in an annotation."""
    meta = foo.get("metadata", {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != PAUSED}
    if foo["spec"].get("paused"):
        annotations[PAUSED] = "true"
    spec: FooV1alpha1Spec = {"deploymentName": foo["spec"]["deploymentName"]}
    if "replicas" in foo["spec"]:
        spec["replicas"] = foo["spec"]["replicas"]
    spoke: FooV1alpha1 = {"metadata": _with_annotations(meta, annotations), "spec": spec}
    if "status" in foo:
        spoke["status"] = foo["status"]
    return spoke


def add_webhooks(manager: Manager) -> None:
    """Serve Foo's defaulter, validator and conversion from ``manager`` (which needs a
    ``webhook_port``)."""
    manager.defaulter(Foo)(default_foo)
    manager.validator(Foo)(validate_foo)
    manager.converter(Foo, FooV1alpha1, to_hub=v1alpha1_to_v1, from_hub=v1_to_v1alpha1)


# -- the program -----------------------------------------------------------------------------


async def install_crd(client: Client) -> None:
    """Create or update Foo's CRD (server-side apply) and wait until it is established.
    Raises ``TimeoutError`` if it is not within 30 s."""
    crds = client.resource(CustomResourceDefinition)
    crd = await crds.apply(crd_manifest(Foo), field_manager=NAME, force=True)
    for _ in range(150):
        if is_condition_true(crd, "Established"):
            return
        await asyncio.sleep(0.2)
        crd = await crds.get(crd["metadata"]["name"])
    raise TimeoutError(f"the CRD {crd['metadata']['name']} was not established within 30 s")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, in-cluster")
    parser.add_argument("--namespace", help="watch only this namespace (default: all)")
    parser.add_argument("--shards", type=int, default=0, help="split the Foos across replicas")
    parser.add_argument("--lease-name", default=NAME, help="its Leases' name (and shards')")
    parser.add_argument("--lease-namespace", help="default: --namespace, the pod's, default")
    parser.add_argument("--workers", type=int, default=2, help="reconciles at once")
    parser.add_argument("--metrics-port", type=int, default=8080, help="0: no /metrics")
    parser.add_argument("--health-port", type=int, default=8081, help="0: no /healthz, /readyz")
    parser.add_argument("--webhook-port", type=int, help="serve the webhooks (0: any port)")
    parser.add_argument("--cert-dir", help="the webhooks' tls.crt and tls.key (default: made)")
    parser.add_argument("--install", action="store_true", help="install the CRD (and webhooks)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if not 0 <= args.shards <= 1024:
        parser.error("--shards must be from 0 (not sharded) to 1024")
    return args


def build(args: argparse.Namespace | None = None, *, clock: Clock | None = None) -> Manager:
    """The operator's Manager as ``args`` say (default: no flags, as ``kubereflector
    manifests`` calls it); make it anywhere, it needs no event loop yet."""
    args = args if args is not None else parse_args([])
    webhooks = None
    if args.webhook_port is not None:
        install = args.lease_name if args.install else None
        webhooks = WebhookOptions(cert_dir=args.cert_dir, install=install)
    manager = Manager(
        load_config(args.kubeconfig),
        namespace=args.namespace,
        leader_election=(
            None if args.shards else LeaderElection(args.lease_name, namespace=args.lease_namespace)
        ),
        sharding=(
            Sharding(name=args.lease_name, shards=args.shards, namespace=args.lease_namespace)
            if args.shards
            else None
        ),
        metrics_port=args.metrics_port or None,
        health_port=args.health_port or None,
        webhook_port=args.webhook_port,
        webhook_options=webhooks,
        clock=clock,
    )
    add_controller(manager, ControllerOptions(max_concurrent_reconciles=args.workers))
    if webhooks is not None:
        add_webhooks(manager)
    return manager


def deployed() -> Manager:
    """The Manager as deployed in a cluster (``kubereflector manifests``): its webhooks on
    port 9443 with the certificate in :data:`CERT_DIR`."""
    return build(parse_args(["--webhook-port", "9443", "--cert-dir", CERT_DIR]))


async def run(args: argparse.Namespace) -> None:
    async with build(args) as manager:
        if args.install:
            await install_crd(manager.client)
        running = asyncio.create_task(manager.run())  # until SIGTERM or Ctrl-C
        if manager.webhook_server is not None:  # (installed first, with --install)
            serving = asyncio.create_task(manager.webhook_server.wait_serving())
            await asyncio.wait({running, serving}, return_when=asyncio.FIRST_COMPLETED)
            if serving.done():
                print(f"serving Foo webhooks at {manager.webhook_server.url}", flush=True)
            serving.cancel()
        await running


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(run(args))
    except LeaderElectionLostError as err:
        logging.getLogger(NAME).error("%s: exiting", err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
