"""sample_controller: Kubernetes' sample-controller on kubereflector.runtime.

A ``Foo`` (sample-controller's, in a group of ours:
``samplecontroller.kubereflector.io/v1alpha1``) asks for a Deployment of nginx named
``spec.deploymentName`` with ``spec.replicas`` replicas; the controller creates it
(owned by the Foo), scales it when the replicas differ, refuses a Deployment of that
name it does not control, writes ``status.availableReplicas`` and records a ``Synced``
Event, as k8s.io/sample-controller does (its status write too: an update conditional
on the resourceVersion read from the cache). Plain threads, no ``async``: a blocking
reconciler on the Manager's worker threads, and ``run_sync()``.

    python examples/sample_controller.py [--kubeconfig PATH] [--namespace NS]
        [--create-crd] [--workers 2] [--metrics-port 8080] [--health-port 8081]

``--create-crd`` creates the Foo CRD first (if missing), as ``crd_manifest`` makes it
from the ``Foo`` declared below. ``tools/reconcile_backlog.py``
runs it on thousands of Foos and counts what the initial backlog costs.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import logging
import sys
import time
from collections.abc import Sequence
from typing import Annotated

from msgspec import Meta
from typing_extensions import NotRequired, TypedDict

from kubereflector.client import SyncClient, load_config
from kubereflector.errors import AlreadyExistsError
from kubereflector.models import Deployment
from kubereflector.models.crd import crd_manifest, custom_resource
from kubereflector.models.meta_v1 import ObjectMeta
from kubereflector.runtime import (
    ControllerOptions,
    Manager,
    Request,
    TerminalError,
    is_condition_true,
    is_controlled_by,
    set_controller_reference,
)

GROUP = "samplecontroller.kubereflector.io"  # k8s.io's own is samplecontroller.k8s.io
FOOS = f"foos.{GROUP}"


class FooSpec(TypedDict):
    deploymentName: str
    replicas: NotRequired[Annotated[int, Meta(ge=0)]]


class FooStatus(TypedDict):
    availableReplicas: int


@custom_resource(group=GROUP, version="v1alpha1")
class Foo(TypedDict):
    """A Foo: a Deployment of nginx, wanted."""

    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: FooSpec
    status: NotRequired[FooStatus]


FOO_CRD = crd_manifest(Foo)
"""The CustomResourceDefinition of Foo (in examples/, ``kubereflector crd
sample_controller:Foo`` prints it as YAML)."""

logger = logging.getLogger("sample-controller")


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
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
            },
        },
    }
    return set_controller_reference(foo, deployment)


def add_to(manager: Manager, *, options: ControllerOptions | None = None) -> None:
    """Add the Foo reconciler to ``manager`` (two workers unless ``options`` say)."""
    events = manager.event_recorder("sample-controller")
    options = options or ControllerOptions(max_concurrent_reconciles=2)

    @manager.reconciler(Foo, owns=[Deployment], options=options, name="foo")
    def sync(request: Request) -> None:
        foo = manager.lister_for(Foo).namespaced(request.namespace).get(request.name)
        if foo is None:
            return  # deleted: its Deployment goes with it (garbage collection)
        name = foo["spec"].get("deploymentName")
        if not name:
            raise TerminalError(f"{request}: spec.deploymentName must be set")
        client = manager.sync_client
        deployments = client.resource(Deployment, namespace=request.namespace)
        deployment = manager.lister_for(Deployment).namespaced(request.namespace).get(name)
        if deployment is None:
            deployment = deployments.create(deployment_for(foo))
        if not is_controlled_by(deployment, foo):
            events.record(foo, "Warning", "ErrResourceExists", f"{name} is not managed by Foo")
            raise TerminalError(f"Resource {name!r} already exists and is not managed by Foo")
        if deployment["spec"].get("replicas") != foo["spec"].get("replicas", 1):
            deployment = deployments.update(deployment_for(foo))
        updated = copy.deepcopy(foo)
        available = deployment.get("status", {}).get("availableReplicas", 0)
        updated["status"] = {"availableReplicas": available}
        client.resource(Foo, namespace=request.namespace).update_status(updated)
        events.record(foo, "Normal", "Synced", "Foo synced successfully")


def create_crd(client: SyncClient, *, wait: float = 30.0) -> None:
    """Create the Foo CRD if it is missing, and wait (at most ``wait`` seconds) until the
    API server serves it. Raises ``TimeoutError`` if it does not."""
    crds = client.resource("customresourcedefinitions.apiextensions.k8s.io")
    with contextlib.suppress(AlreadyExistsError):
        crds.create(FOO_CRD)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        conditions = (crds.get(FOOS).get("status") or {}).get("conditions") or []
        if is_condition_true(conditions, "Established"):
            return
        time.sleep(0.2)
    raise TimeoutError(f"the CRD {FOOS} was not established within {wait:g}s")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, in-cluster")
    parser.add_argument("--namespace", help="watch only this namespace (default: all)")
    parser.add_argument("--create-crd", action="store_true", help="create the Foo CRD first")
    parser.add_argument("--workers", type=int, default=2, help="reconciles at once")
    parser.add_argument("--metrics-port", type=int, default=8080, help="0: no /metrics")
    parser.add_argument("--health-port", type=int, default=8081, help="0: no /healthz, /readyz")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    config = load_config(args.kubeconfig)
    if args.create_crd:
        with SyncClient(config) as client:
            create_crd(client)
    manager = Manager(
        config,
        namespace=args.namespace,
        metrics_port=args.metrics_port or None,
        health_port=args.health_port or None,
    )
    add_to(manager, options=ControllerOptions(max_concurrent_reconciles=args.workers))
    manager.run_sync()
    return 0


if __name__ == "__main__":
    sys.exit(main())
