"""A tiny HTTP(S) server for the client's tests: handlers by path, every request recorded.

It listens on 127.0.0.1 with a port the system picks. Handlers are aiohttp.web
handlers; an unrouted request gets a 404 ``Status``.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import CIMultiDictProxy, MultiDictProxy

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Seen:
    """One request as the server saw it."""

    method: str
    path: str
    query: MultiDictProxy[str]
    headers: CIMultiDictProxy[str]
    body: bytes
    peer_cert: dict[str, Any] | None


class FakeServer:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[Seen] = []
        self.url = ""
        self.port = 0

    def route(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method, path)] = handler

    def json(self, method: str, path: str, body: Any, status: int = 200) -> None:
        """Answer ``method path`` with a fixed JSON body."""

        async def handler(_request: web.Request) -> web.StreamResponse:
            return web.json_response(body, status=status)

        self.route(method, path, handler)

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        peer = ssl_object.getpeercert() if ssl_object is not None else None
        self.requests.append(
            Seen(
                request.method,
                request.path,
                request.query,
                request.headers,
                await request.read(),
                peer or None,
            )
        )
        handler = self.routes.get((request.method, request.path))
        if handler is None:
            return web.json_response(
                {"kind": "Status", "code": 404, "reason": "NotFound", "message": "no route"},
                status=404,
            )
        return await handler(request)


@contextlib.asynccontextmanager
async def serve(
    ssl_context: ssl.SSLContext | None = None, host_name: str = "127.0.0.1"
) -> AsyncIterator[FakeServer]:
    """Run a FakeServer until the block ends. ``host_name`` is what ``url`` names."""
    server = FakeServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server._dispatch)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    try:
        server.port = runner.addresses[0][1]
        scheme = "https" if ssl_context is not None else "http"
        server.url = f"{scheme}://{host_name}:{server.port}"
        yield server
    finally:
        await runner.cleanup()


def status(code: int, reason: str, message: str = "", **extra: Any) -> dict[str, Any]:
    """A Kubernetes ``Status`` body."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
        **extra,
    }


async def stream_lines(request: web.Request, *chunks: bytes) -> web.StreamResponse:
    """Answer with a chunked body written as ``chunks`` (one write each)."""
    response = web.StreamResponse()
    response.content_type = "application/json"
    await response.prepare(request)
    for chunk in chunks:
        await response.write(chunk)
    await response.write_eof()
    return response
