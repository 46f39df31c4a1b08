"""The ApiServerEmulator in its own process, seeded with ConfigMaps, for benchmarks/runtime.py.

    python benchmarks/_configmaps.py --port P --control-port C --configmaps 10000

Serves the emulator (plain HTTP, no token) with ``--configmaps`` ConfigMaps in
namespace ``bench`` (~400 bytes of JSON each). A control server on
``--control-port``, running on the emulator's own event loop:

- ``POST /churn?updates=N&token=T``: updates N ConfigMaps (round-robin over
  all of them; each write changes ``data.round`` to a value of this call's
  own, so none is a no-op) as fast as the emulator writes, yielding to the
  loop every 16 writes so watches stream meanwhile; the last write sets
  ``data.final=T`` on ``bench/cm-0`` (the marker). Answers when every write is
  done, with the seconds the writes took.

Prints ``ready`` once serving. Stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _control import plain_emulator, serve_until_stopped

from kubereflector.testing import ApiServerEmulator

NAMESPACE = "bench"
MARKER = "cm-0"


def configmap(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"cm-{i}",
            "namespace": NAMESPACE,
            "labels": {"app": "bench", "shard": str(i % 16)},
        },
        "data": {"index": str(i), "payload": "x" * 200},
    }


def control_app(emulator: ApiServerEmulator, count: int) -> web.Application:
    async def churn(request: web.Request) -> web.Response:
        updates = int(request.query["updates"])
        token = request.query["token"]
        start = time.perf_counter()
        for n in range(updates):
            obj = configmap(n % count)
            obj["data"]["round"] = f"{token}-{n}"
            if n == updates - 1:
                obj = configmap(0)
                obj["data"]["final"] = token
            emulator.update("configmaps", obj)
            if n % 16 == 15:
                await asyncio.sleep(0)
        return web.json_response({"seconds": time.perf_counter() - start})

    app = web.Application()
    app.router.add_post("/churn", churn)
    return app


async def serve(args: argparse.Namespace) -> None:
    emulator = plain_emulator(args.port)
    emulator.create("namespaces", {"metadata": {"name": NAMESPACE}})
    for i in range(args.configmaps):
        emulator.create("configmaps", configmap(i), namespace=NAMESPACE)
    await serve_until_stopped(emulator, control_app(emulator, args.configmaps), args.control_port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--control-port", type=int, required=True)
    parser.add_argument("--configmaps", type=int, default=10_000)
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
