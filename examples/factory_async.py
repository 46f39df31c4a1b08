"""Follow the pods of a cluster with a SharedInformerFactory, the asyncio way.

    python examples/factory_async.py [--kubeconfig PATH] [--namespace NS] [--once]

A handler prints every pod added or deleted; after the first sync the lister
(a read of the local cache, no request) prints what the cache holds. With
``--once`` the program stops there; otherwise it follows changes until Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio

from kubereflector import (
    DeletedFinalStateUnknown,
    KubeObject,
    ResourceEventHandlerFuncs,
    SharedInformerFactory,
    deletion_handling_meta_namespace_key_func,
    run,
)
from kubereflector.client import load_config


def key(pod: KubeObject | DeletedFinalStateUnknown[KubeObject]) -> str:
    """``namespace/name`` (also of the "final state unknown" of a missed delete)."""
    return deletion_handling_meta_namespace_key_func(pod)


async def on_add(pod: KubeObject) -> None:
    print(f"added {key(pod)}", flush=True)


async def on_delete(pod: KubeObject | DeletedFinalStateUnknown[KubeObject]) -> None:
    print(f"deleted {key(pod)}", flush=True)


async def main(kubeconfig: str | None, namespace: str | None, once: bool) -> None:
    config = load_config(kubeconfig)
    async with SharedInformerFactory(config, namespace=namespace) as factory:
        pods = factory.informer_for("pods")
        handler = pods.add_event_handler(
            ResourceEventHandlerFuncs(on_add=on_add, on_delete=on_delete)
        )
        factory.start()
        # Caches listed, and the handler through its initial adds.
        synced = await factory.wait_for_cache_sync(timeout=60, handlers=[handler])
        if not all(synced.values()):
            raise SystemExit(f"the caches did not sync: {synced}")
        cached = sorted(key(pod) for pod in factory.lister_for("pods").list())
        print(f"synced: {len(cached)} pods: {', '.join(cached)}", flush=True)
        if not once:
            await asyncio.Event().wait()  # until Ctrl-C


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Follow pods with an informer (asyncio).")
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config or in-cluster")
    parser.add_argument("--namespace", help="default: every namespace")
    parser.add_argument("--once", action="store_true", help="exit after the first sync")
    args = parser.parse_args()
    # Ctrl-C (or SIGTERM) cancels main(): the factory shuts down on the way out of
    # `async with`, and the program ends quietly, with status 0.
    run(main(args.kubeconfig, args.namespace, args.once))
