"""A recorded API server for the benchmarks: serves pre-encoded bytes, does no work.

It runs in its own process (the benchmarks spawn it), so the client under test
has a core to itself. It answers just what the measured clients ask:

- discovery: ``/api``, ``/api/v1``, ``/apis`` (pods only);
- ``GET /api/v1/namespaces/bench/pods?limit=&continue=``: ``--pods`` Pods in
  pages, at resourceVersion "1000000";
- ``GET /api/v1/namespaces/bench/pods?watch=1&sendInitialEvents=true``: a
  watch-list of the same Pods (an ADDED event each, 8 per write, then the
  ``k8s.io/initial-events-end`` BOOKMARK at "1000000"), then the stream stays
  open and silent (another watch of ``bench`` only stays open and silent);
- ``GET /api/v1/namespaces/stream/pods`` (list): empty, at resourceVersion "1";
- ``GET /api/v1/namespaces/stream/pods?watch=...``: the recorded stream of
  ``--events`` events (MODIFIED, resourceVersions 2..N+1), then the end. A
  watch-list (``sendInitialEvents=true``, as informers send first) gets the
  empty initial state first: the ``k8s.io/initial-events-end`` BOOKMARK at
  resourceVersion "1", then the same stream.

With ``--client-go BIN`` (benchmarks/client_go, built by ``_client_go.py``),
the ``stream`` namespace also speaks protobuf, as kube-apiserver does for
built-in kinds: a client that accepts ``application/vnd.kubernetes.protobuf``
first gets the empty list and the same events in it, encoded by Kubernetes'
own serializers (``BIN encode``).

Every response body is encoded once, at start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _pods import make_pod

LIST_RV = "1000000"
STREAM_BATCH = 8  # events per write: a busy server's flushes coalesce on the wire
PROTOBUF = "application/vnd.kubernetes.protobuf"


def _protobuf_frames(client_go: str, lines: list[bytes]) -> tuple[bytes, list[bytes]]:
    """The empty list at resourceVersion "1" and each watch event of ``lines`` in
    protobuf (each event's frame with its 4-byte length), encoded by ``client_go``."""
    encoded = subprocess.run(
        [client_go, "encode", "-list-rv", "1"],
        input=b"".join(lines),
        capture_output=True,
        check=True,
        timeout=600,
    ).stdout
    frames = []
    at = 0
    while at < len(encoded):
        end = at + 4 + int.from_bytes(encoded[at : at + 4], "big")
        frames.append(encoded[at:end])
        at = end
    if len(frames) != len(lines) + 1:
        raise SystemExit(f"{client_go} encode: {len(frames)} frames for {len(lines)} events")
    return frames[0][4:], frames[1:]


def _discovery() -> dict[str, bytes]:
    enc = msgspec.json.encode
    return {
        "/api": enc({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        "/api/v1": enc(
            {
                "kind": "APIResourceList",
                "groupVersion": "v1",
                "resources": [
                    {
                        "name": "pods",
                        "singularName": "pod",
                        "namespaced": True,
                        "kind": "Pod",
                        "verbs": ["get", "list", "watch"],
                        "shortNames": ["po"],
                    }
                ],
            }
        ),
        "/apis": enc({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}),
    }


def build(pods: int, events: int, page_size: int, client_go: str | None) -> web.Application:
    enc = msgspec.json.encode
    items = [make_pod(i, namespace="bench", rv=i + 1) for i in range(pods)]
    pages: dict[tuple[int, int], bytes] = {}

    def page(offset: int, limit: int) -> bytes:
        key = (offset, limit)
        if key not in pages:
            chunk = items[offset : offset + limit] if limit else items
            end = offset + len(chunk)
            meta: dict[str, Any] = {"resourceVersion": LIST_RV}
            if limit and end < len(items):
                meta["continue"] = str(end)
                meta["remainingItemCount"] = len(items) - end
            pages[key] = enc(
                {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": chunk}
            )
        return pages[key]

    page(0, page_size)
    for offset in range(0, pods, page_size):
        page(offset, page_size)
    stream_lines = [
        enc(
            {"type": "MODIFIED", "object": make_pod(i % max(pods, 1), namespace="stream", rv=i + 2)}
        )
        + b"\n"
        for i in range(events)
    ]
    stream_chunks = [
        b"".join(stream_lines[i : i + STREAM_BATCH])
        for i in range(0, len(stream_lines), STREAM_BATCH)
    ]
    protobuf_list, protobuf_chunks = b"", []
    if client_go:
        protobuf_list, frames = _protobuf_frames(client_go, stream_lines)
        protobuf_chunks = [
            b"".join(frames[i : i + STREAM_BATCH]) for i in range(0, len(frames), STREAM_BATCH)
        ]

    def initial_events_end(rv: str) -> bytes:
        bookmark = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "resourceVersion": rv,
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        }
        return enc({"type": "BOOKMARK", "object": bookmark}) + b"\n"

    bench_watch_list: list[bytes] = []  # made at the first watch-list of bench

    def watch_list_chunks() -> list[bytes]:
        if not bench_watch_list:
            lines = [enc({"type": "ADDED", "object": item}) + b"\n" for item in items]
            bench_watch_list.extend(
                b"".join(lines[i : i + STREAM_BATCH]) for i in range(0, len(lines), STREAM_BATCH)
            )
            bench_watch_list.append(initial_events_end(LIST_RV))
        return bench_watch_list

    empty_list = enc(
        {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []}
    )
    discovery = _discovery()

    async def handle_discovery(request: web.Request) -> web.Response:
        return web.Response(body=discovery[request.path], content_type="application/json")

    async def handle_pods(request: web.Request) -> web.StreamResponse:
        namespace = request.match_info["namespace"]
        watching = request.query.get("watch", "") not in ("", "0", "false")
        protobuf = bool(protobuf_chunks) and request.headers.get("Accept", "").startswith(PROTOBUF)
        if namespace == "stream" and watching:
            content_type = f"{PROTOBUF};stream=watch" if protobuf else "application/json"
            response = web.StreamResponse(headers={"Content-Type": content_type})
            response.enable_chunked_encoding()
            try:
                await response.prepare(request)
                if protobuf:
                    for chunk in protobuf_chunks:  # client-go sends no sendInitialEvents
                        await response.write(chunk)
                else:
                    if request.query.get("sendInitialEvents") == "true":
                        await response.write(initial_events_end("1"))
                    for chunk in stream_chunks:
                        await response.write(chunk)
                await response.write_eof()
            except ConnectionError:
                pass  # the client had what it needed and left mid-stream
            return response
        if namespace == "stream" and protobuf:
            return web.Response(body=protobuf_list, headers={"Content-Type": PROTOBUF})
        if namespace == "stream":
            return web.Response(body=empty_list, content_type="application/json")
        if watching:  # a watch-list's initial events, then: hold the stream until closed
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            response.enable_chunked_encoding()
            await response.prepare(request)
            if request.query.get("sendInitialEvents") == "true":
                with contextlib.suppress(ConnectionError):
                    for chunk in watch_list_chunks():
                        await response.write(chunk)
            await asyncio.Event().wait()
        limit = int(request.query.get("limit", "0") or 0)
        offset = int(request.query.get("continue", "0") or 0)
        return web.Response(body=page(offset, limit), content_type="application/json")

    app = web.Application()
    for path in discovery:
        app.router.add_get(path, handle_discovery)
    app.router.add_get("/api/v1/namespaces/{namespace}/pods", handle_pods)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--client-go", help="benchmarks/client_go's binary: serve protobuf too")
    args = parser.parse_args()
    app = build(args.pods, args.events, args.page_size, args.client_go)
    asyncio.run(_serve(app, args.port))


async def _serve(app: web.Application, port: int) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("ready", flush=True)  # the parent waits for this line
    await asyncio.Event().wait()


if __name__ == "__main__":
    main()
