"""The usual controller loop: informer -> work queue -> workers.

    python examples/workqueue_controller.py [--kubeconfig PATH] [--namespace NS] [--workers 2]

An informer follows the pods; its handler only puts their ``namespace/name``
keys on a work queue (``EnqueueHandler``, the initial list at low priority, so
that a live change never waits behind a restart's backlog). Workers take a key,
read the pod from the informer's cache and reconcile it: here, print
``reconciled <key>``, or ``gone <key>`` once the pod is deleted. A key is never
worked on by two workers at once, and a burst of changes to one pod is one
piece of work.

A pod labelled ``example.com/fail=true`` fails its reconcile: the worker puts
its key back with ``add_rate_limited`` (5 ms, 10 ms, 20 ms, ... per key) and
prints ``retry <key> (attempt n)``, until the label changes. Ctrl-C stops.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from kubereflector import SharedInformerFactory, get_labels, run
from kubereflector.client import load_config
from kubereflector.workqueue import LOW_PRIORITY, EnqueueHandler, QueueShutDown, RateLimitingQueue


class ReconcileError(Exception):
    pass


def reconcile(key: str, pod: Any) -> None:
    """Make the world match ``pod`` (``None``: it is gone). Level-based: only the
    key travels on the queue; the state is read from the cache when it is worked on."""
    if pod is None:
        print(f"gone {key}", flush=True)
        return
    if get_labels(pod).get("example.com/fail") == "true":
        raise ReconcileError("labelled to fail")
    print(f"reconciled {key}", flush=True)


async def worker(queue: RateLimitingQueue[str], pods: Any) -> None:
    while True:
        try:
            key = await queue.get()
        except QueueShutDown:
            return
        try:
            reconcile(key, pods.get_by_key(key))
        except ReconcileError:
            print(f"retry {key} (attempt {queue.num_requeues(key) + 1})", flush=True)
            queue.add_rate_limited(key)  # back off, per key
        else:
            queue.forget(key)  # success: its next failure starts from 5 ms again
        finally:
            queue.done(key)  # always: the key may be handed out again from now on


async def main(kubeconfig: str | None, namespace: str | None, workers: int) -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(name="pods")
    async with SharedInformerFactory(load_config(kubeconfig), namespace=namespace) as factory:
        pods = factory.informer_for("pods")
        pods.add_event_handler(EnqueueHandler(queue, low_priority=LOW_PRIORITY))
        factory.start()
        await factory.wait_for_cache_sync(timeout=60)
        try:
            await asyncio.gather(*(worker(queue, pods.indexer) for _ in range(workers)))
        finally:
            queue.shut_down()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A controller: informer, work queue, workers.")
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config or in-cluster")
    parser.add_argument("--namespace", help="default: every namespace")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    # Ctrl-C or SIGTERM cancels main(): the workers stop, the factory shuts down.
    run(main(args.kubeconfig, args.namespace, args.workers))
