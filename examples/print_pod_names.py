"""The seeds' first program: mirror every pod into a store and print their names every 30 s.

    python examples/print_pod_names.py [--kubeconfig PATH] [--every 30] [--rounds 0]

A Reflector lists and watches pods (all namespaces) into a thread-safe store;
the main loop only reads the store. ``--rounds 0`` runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from kubereflector import Reflector, new_store, run
from kubereflector.client import Client, ResourceListWatch, load_config


async def main(kubeconfig: str | None, every: float, rounds: int) -> None:
    async with Client(load_config(kubeconfig)) as client:
        store = new_store()
        reflector = Reflector(ResourceListWatch(client, "pods"), store, expected_kind="Pod")
        task = asyncio.create_task(reflector.run())
        try:
            done = 0
            while rounds == 0 or done < rounds:
                await asyncio.sleep(every)
                print(" ".join(sorted(store.list_keys())) or "(no pods)", flush=True)
                done += 1
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between prints")
    parser.add_argument("--rounds", type=int, default=0, help="prints before exiting (0: forever)")
    args = parser.parse_args()
    run(main(args.kubeconfig, args.every, args.rounds))  # Ctrl-C or SIGTERM: a quiet exit
