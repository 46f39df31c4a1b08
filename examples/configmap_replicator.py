"""configmap_replicator: an operator on kubereflector.runtime.

For every ConfigMap labelled ``replicator.kubereflector.io/replicas=N`` it keeps N
ConfigMaps named ``<name>-<i>`` (i = 0..N-1) in the same namespace with the same
``data``, each owned by the parent (a controller ownerReference). A deleted or
edited copy is restored; raising or lowering N adds or deletes copies; the
finalizer ``replicator.kubereflector.io/cleanup`` on the parent deletes the copies
when the parent is deleted (so it works even where no garbage collector runs);
removing the label deletes the copies too. Each change is recorded as a
``Normal`` Event ``Replicated`` on the parent.

    python examples/configmap_replicator.py [--kubeconfig PATH] [--namespace NS]
        [--leader-elect | --shards N] [--lease-name NAME] [--lease-namespace NS]
        [--metrics-port 8080] [--health-port 8081] [--concurrency 1]

Run two replicas with ``--leader-elect``: exactly one reconciles; kill it and the
other takes over within the lease duration (15 s); stop it with SIGTERM and it
releases the lease, so the other takes over at once.

Run several with ``--shards 32`` instead: the ConfigMaps are split into 32 virtual
shards and each replica reconciles (and caches) only those of its shards, a
parent's copies following their parent; a replica that joins takes its share
from the others, one stopped with SIGTERM hands its shards over at once, one
killed has them taken over within the lease duration (``--lease-name`` names the
sharded controller, and its Leases).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Sequence

from kubereflector.client import ResourceClient, load_config
from kubereflector.clock import Clock
from kubereflector.errors import NotFoundError
from kubereflector.models import ConfigMap
from kubereflector.runtime import (
    ControllerOptions,
    LeaderElection,
    LeaderElectionLostError,
    Manager,
    OperationResult,
    Predicate,
    Request,
    Sharding,
    TerminalError,
    create_or_update,
    finalizer,
    is_controlled_by,
    label_selector,
    or_,
    remove_finalizer_patch,
    set_controller_reference,
)

REPLICAS = "replicator.kubereflector.io/replicas"
PARENT = "replicator.kubereflector.io/parent"
FINALIZER = "replicator.kubereflector.io/cleanup"

logger = logging.getLogger("configmap-replicator")


def replicas_of(parent: ConfigMap) -> int | None:
    """N from the label (``None`` without it); a bad value is a TerminalError:
    retrying cannot fix it, a new label value queues the parent again."""
    value = parent["metadata"].get("labels", {}).get(REPLICAS)
    if value is None:
        return None
    if not value.isdigit() or int(value) > 100:
        raise TerminalError(f"label {REPLICAS}={value!r} is not a number from 0 to 100")
    return int(value)


def build(args: argparse.Namespace, *, clock: Clock | None = None) -> Manager:
    """The operator's Manager (make it anywhere: it needs no event loop yet)."""
    election = None
    if args.leader_elect:
        election = LeaderElection(args.lease_name, namespace=args.lease_namespace)
    sharding = None
    if args.shards:
        sharding = Sharding(
            name=args.lease_name, shards=args.shards, namespace=args.lease_namespace
        )
    manager = Manager(
        load_config(args.kubeconfig),
        namespace=args.namespace,
        leader_election=election,
        sharding=sharding,
        metrics_port=args.metrics_port or None,
        health_port=args.health_port or None,
        clock=clock,
    )
    events = manager.event_recorder("configmap-replicator")
    has_finalizer = Predicate.from_filter(
        lambda cm: FINALIZER in (cm or {}).get("metadata", {}).get("finalizers", ())
    )

    async def replicate(api: ResourceClient[ConfigMap], parent: ConfigMap, n: int) -> None:
        cache = manager.lister_for(ConfigMap).namespaced(parent["metadata"]["namespace"])
        changed = 0
        for i in range(n):

            def copy(cm: ConfigMap) -> None:
                if "uid" in cm["metadata"] and not is_controlled_by(cm, parent):
                    raise RuntimeError(f"{cm['metadata']['name']} exists and is not a copy")
                set_controller_reference(parent, cm)
                cm["metadata"]["labels"] = {PARENT: parent["metadata"]["name"]}
                cm["data"] = dict(parent.get("data") or {})

            name, namespace = f"{parent['metadata']['name']}-{i}", parent["metadata"]["namespace"]
            wanted: ConfigMap = {"metadata": {"name": name, "namespace": namespace}}
            result, _ = await create_or_update(api, wanted, copy, cache=cache)
            changed += result is not OperationResult.NONE  # a stale cache: a 409, retried
        changed += await delete_copies(api, parent, keep=n)
        if changed:
            message = f"{n} copies in sync ({changed} created, updated or deleted)"
            events.record(parent, "Normal", "Replicated", message)

    async def delete_copies(
        api: ResourceClient[ConfigMap], parent: ConfigMap, keep: int = 0
    ) -> int:
        """Delete the parent's copies numbered ``keep`` and above (listed from the API
        server, not the cache: a copy created a moment ago must not survive)."""
        name = parent["metadata"]["name"]
        copies = (await api.list(label_selector=f"{PARENT}={name}")).items
        wanted = {f"{name}-{i}" for i in range(keep)}
        deleted = 0
        for copy in copies:
            if is_controlled_by(copy, parent) and copy["metadata"]["name"] not in wanted:
                with contextlib.suppress(NotFoundError):  # deleted meanwhile: fine
                    await api.delete(copy["metadata"]["name"])
                deleted += 1
        return deleted

    @manager.reconciler(
        "configmaps",
        owns=["configmaps"],
        predicates=[or_(label_selector(REPLICAS), has_finalizer)],
        options=ControllerOptions(max_concurrent_reconciles=args.concurrency),
    )
    async def reconcile(request: Request) -> None:
        parent = manager.lister_for(ConfigMap).namespaced(request.namespace).get(request.name)
        if parent is None or PARENT in parent["metadata"].get("labels", {}):
            return None  # gone (its finalizer ran), or a copy
        api = manager.client.resource(ConfigMap, namespace=request.namespace)
        try:
            n = replicas_of(parent)
        except TerminalError as err:
            events.record(parent, "Warning", "InvalidReplicas", str(err))
            raise
        if n is None:  # the label was removed: undo, then let go of the object
            await delete_copies(api, parent)
            patch = remove_finalizer_patch(parent, FINALIZER)
            if patch is not None:
                await api.patch(request.name, patch, type="json")
            return None

        async def apply(cm: ConfigMap) -> None:
            await replicate(api, cm, n)

        async def cleanup(cm: ConfigMap) -> None:
            await delete_copies(api, cm)

        try:
            return await finalizer(api, FINALIZER, parent, apply=apply, cleanup=cleanup)
        except NotFoundError as err:
            if err.name != request.name:
                raise
            # The parent was deleted since the cache was read (the cache is a moment
            # behind the server): its delete event queues it again.
            return None

    return manager


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, in-cluster")
    parser.add_argument("--namespace", help="watch only this namespace (default: all)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--leader-elect", action="store_true", help="campaign for a Lease")
    mode.add_argument(
        "--shards", type=int, default=0, help="split the work across replicas (0: do not)"
    )
    parser.add_argument("--lease-name", default="configmap-replicator")
    parser.add_argument(
        "--lease-namespace", help="default: --namespace, else the pod's, else default"
    )
    parser.add_argument("--metrics-port", type=int, default=8080, help="0: no /metrics")
    parser.add_argument("--health-port", type=int, default=8081, help="0: no /healthz, /readyz")
    parser.add_argument("--concurrency", type=int, default=1, help="reconciles at once")
    args = parser.parse_args(argv)
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    if not 0 <= args.shards <= 1024:
        parser.error("--shards must be from 0 to 1024")
    return args


async def run(args: argparse.Namespace) -> None:
    async with build(args) as manager:
        await manager.run()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(run(args))
    except LeaderElectionLostError as err:
        logger.error("%s: exiting", err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
