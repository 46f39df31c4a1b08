"""An asyncio controller that finds pods by node through an index.

    python examples/pods_by_node.py [--kubeconfig PATH] [--once]

The informer's cache carries a ``node`` index (``spec.nodeName``). Handlers put
the nodes whose pods changed on a work queue; the controller's loop takes a
node and reads its pods from the index: a dictionary lookup, no API request.
With ``--once`` it prints every node's pods after the first sync and exits.
"""

from __future__ import annotations

import argparse
import asyncio

from kubereflector import (
    DeletedFinalStateUnknown,
    KubeObject,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    SharedInformerFactory,
    run,
)
from kubereflector.client import load_config


def by_node(pod: KubeObject) -> list[str]:
    node = pod.get("spec", {}).get("nodeName")
    return [node] if node else []


def report(pods: SharedIndexInformer, node: str) -> None:
    names = sorted(p["metadata"]["name"] for p in pods.indexer.by_index("node", node))
    print(f"{node}: {len(names)} pods: {', '.join(names)}", flush=True)


async def main(kubeconfig: str | None, once: bool) -> None:
    async with SharedInformerFactory(load_config(kubeconfig)) as factory:
        pods = factory.informer_for("pods")
        pods.add_indexers({"node": by_node})
        work: asyncio.Queue[str] = asyncio.Queue()

        async def changed(*objs: KubeObject | DeletedFinalStateUnknown[KubeObject]) -> None:
            for obj in objs:
                if isinstance(obj, DeletedFinalStateUnknown):  # a delete we missed
                    obj = obj.obj or {}
                for node in by_node(obj):
                    work.put_nowait(node)

        pods.add_event_handler(
            ResourceEventHandlerFuncs(on_add=changed, on_update=changed, on_delete=changed)
        )
        factory.start()
        await factory.wait_for_cache_sync(timeout=60)
        for node in sorted(pods.indexer.list_index_func_values("node")):
            report(pods, node)
        if once:
            return
        while True:  # the controller: one node at a time, read from the index
            report(pods, await work.get())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Pods by node, from an informer's index.")
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config or in-cluster")
    parser.add_argument("--once", action="store_true", help="report every node once and exit")
    args = parser.parse_args()
    run(main(args.kubeconfig, args.once))  # until Ctrl-C or SIGTERM, then exit quietly
