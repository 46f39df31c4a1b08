"""The ApiServerEmulator in its own process, seeded with realistic Pods, for the benchmarks.

    python benchmarks/_emulator.py --port P --control-port C --pods 10000

Serves the emulator (plain HTTP, no token) on ``--port`` with ``--pods`` Pods
in namespace ``bench``, from :func:`_pods.make_pod` (~5.5 KB of JSON each,
managedFields included), created through the emulator's data API.

A control server on ``--control-port`` does what the emulator's own fault API
cannot do in one atomic step (it runs synchronously on the emulator's event
loop, so no request or watch is served in the middle of it):

- ``POST /expire?round=K``: once at least one watch of pods is open (waiting up
  to a minute), update the last Pod of ``bench`` (in key order) with the
  annotation ``bench/round=K``, then ``compact()`` and ``drop_watches()``. The
  update is never delivered on a watch, and every informer's re-watch gets a
  410, so it relists; the relist ends with the marked Pod, so its client knows
  the relist has been applied when its handler sees the mark.

Prints ``ready`` once serving (the parent waits for it). Stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _control import plain_emulator, serve_until_stopped
from _pods import make_pod

from kubereflector.testing import ApiServerEmulator

NAMESPACE = "bench"
MARKER_ANNOTATION = "bench/round"


def seed(emulator: ApiServerEmulator, pods: int) -> None:
    emulator.create("namespaces", {"metadata": {"name": NAMESPACE}})
    for i in range(pods):
        emulator.create("pods", make_pod(i, namespace=NAMESPACE), namespace=NAMESPACE)


def control_app(emulator: ApiServerEmulator) -> web.Application:
    pods = emulator.objects("pods", NAMESPACE)
    last_name = pods[-1]["metadata"]["name"] if pods else ""
    del pods

    async def expire(request: web.Request) -> web.Response:
        round_ = request.query["round"]
        await asyncio.wait_for(emulator.wait_for_watches(1, "pods"), 60)
        obj: dict[str, Any] = emulator.get("pods", last_name, NAMESPACE)
        meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
        meta["annotations"] = {**meta.get("annotations", {}), MARKER_ANNOTATION: round_}
        emulator.update("pods", {**obj, "metadata": meta})
        emulator.compact()
        emulator.drop_watches()
        return web.json_response({"name": last_name, "rv": emulator.resource_version})

    app = web.Application()
    app.router.add_post("/expire", expire)
    return app


async def serve(args: argparse.Namespace) -> None:
    emulator = plain_emulator(args.port)
    seed(emulator, args.pods)
    await serve_until_stopped(emulator, control_app(emulator), args.control_port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--control-port", type=int, required=True)
    parser.add_argument("--pods", type=int, default=10_000)
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
