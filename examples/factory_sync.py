"""Follow the pods of a cluster with a SyncSharedInformerFactory, from plain threads.

    python examples/factory_sync.py [--kubeconfig PATH] [--namespace NS] [--once]

No ``async`` anywhere: the factory runs its event loop on a background thread,
handlers are plain functions (run on a worker thread of their own, in order),
and the waits block. A handler prints every pod added or deleted; after the
first sync the lister (a read of the local cache, no request) prints what the
cache holds. With ``--once`` the program stops there; otherwise it follows
changes until Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import threading

from kubereflector import (
    DeletedFinalStateUnknown,
    KubeObject,
    ResourceEventHandlerFuncs,
    SyncSharedInformerFactory,
    deletion_handling_meta_namespace_key_func,
)
from kubereflector.client import load_config


def key(pod: KubeObject | DeletedFinalStateUnknown[KubeObject]) -> str:
    """``namespace/name`` (also of the "final state unknown" of a missed delete)."""
    return deletion_handling_meta_namespace_key_func(pod)


def on_add(pod: KubeObject) -> None:
    print(f"added {key(pod)}", flush=True)


def on_delete(pod: KubeObject | DeletedFinalStateUnknown[KubeObject]) -> None:
    print(f"deleted {key(pod)}", flush=True)


def main(kubeconfig: str | None, namespace: str | None, once: bool) -> None:
    config = load_config(kubeconfig)
    # Leaving the block shuts the factory down: informers stopped, connections
    # closed, the background thread joined.
    with SyncSharedInformerFactory(config, namespace=namespace) as factory:
        pods = factory.informer_for("pods")
        handler = pods.add_event_handler(
            ResourceEventHandlerFuncs(on_add=on_add, on_delete=on_delete)
        )
        factory.start()
        # Blocks until the caches listed, and the handler went through its initial adds.
        synced = factory.wait_for_cache_sync(timeout=60, handlers=[handler])
        if not all(synced.values()):
            raise SystemExit(f"the caches did not sync: {synced}")
        cached = sorted(key(pod) for pod in factory.lister_for("pods").list())
        print(f"synced: {len(cached)} pods: {', '.join(cached)}", flush=True)
        if not once:
            threading.Event().wait()  # until Ctrl-C


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Follow pods with an informer (plain threads).")
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config or in-cluster")
    parser.add_argument("--namespace", help="default: every namespace")
    parser.add_argument("--once", action="store_true", help="exit after the first sync")
    args = parser.parse_args()
    # Ctrl-C: the factory shuts down on the way out of `with`.
    with contextlib.suppress(KeyboardInterrupt):
        main(args.kubeconfig, args.namespace, args.once)
