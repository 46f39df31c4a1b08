"""A raw HTTP server on loopback that serves Pods like an API server, and misbehaves on command.

It speaks just enough HTTP/1.1 (asyncio streams, one request per connection,
``Connection: close``) to serve ``GET /api/v1/namespaces/{ns}/pods`` as a list
and as a watch, and nothing in it goes through an HTTP library that would
refuse to send a malformed answer. Between faults it behaves: a list returns
every pod at the current resourceVersion; a watch replays the history after
the requested resourceVersion, then streams changes until the client leaves.
It refuses watch-list (``sendInitialEvents``) with a 400, as an older server
does, so that informers list.

A test queues faults with :meth:`HostileServer.fail_next_list` and
:meth:`HostileServer.fail_next_watch`: each is a coroutine that answers one
request (writing whatever it likes, however it likes) instead of the server.
The module's fault functions cover malformed, oversized and truncated bodies
and lines, wrong shapes, Status bodies with 200, echoed credentials, and slow
and silent streams. :attr:`HostileServer.activity` counts requests and
completed answers, so a test can wait for progress instead of time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubereflector.errors import failure_status
from kubereflector.testing import settle

NAMESPACE = "hostile"
PODS_PATH = f"/api/v1/namespaces/{NAMESPACE}/pods"


@dataclass
class Request:
    """One request as the server read it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch") in ("1", "true")

    @property
    def authorization(self) -> str:
        return self.headers.get("authorization", "")


Fault = Callable[["HostileServer", Request, asyncio.StreamWriter], Awaitable[None]]
"""Answers one request in place of the server (the connection is closed afterwards)."""


@dataclass
class HostileServer:
    host: str = "127.0.0.1"
    port: int = 0
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    rv: int = 100
    history: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    activity: int = 0
    list_faults: deque[Fault] = field(default_factory=deque)
    watch_faults: deque[Fault] = field(default_factory=deque)
    _changed: asyncio.Condition | None = None
    _server: asyncio.AbstractServer | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    watch_generation: int = 0

    # -- state ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def put(self, name: str, **spec: Any) -> dict[str, Any]:
        """Create or update a pod: a new resourceVersion and a watch event."""
        self.rv += 1
        etype = "MODIFIED" if name in self.pods else "ADDED"
        obj = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": NAMESPACE, "resourceVersion": str(self.rv)},
            "spec": spec,
        }
        self.pods[name] = obj
        self._record(etype, obj)
        return obj

    def delete(self, name: str) -> None:
        self.rv += 1
        obj = self.pods.pop(name)
        gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        self._record("DELETED", gone)

    def keys(self) -> dict[str, str]:
        """``namespace/name`` -> resourceVersion of every pod, as a cache should hold them."""
        return {
            f"{NAMESPACE}/{name}": obj["metadata"]["resourceVersion"]
            for name, obj in self.pods.items()
        }

    def close_watches(self) -> None:
        """End every open watch (the clients see the stream end normally)."""
        self.watch_generation += 1
        self._poke()

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Until ``predicate()`` holds (checked whenever the server's state changes)."""
        assert self._changed is not None
        async with self._changed:
            await self._changed.wait_for(predicate)

    def fail_next_list(self, *faults: Fault) -> None:
        self.list_faults.extend(faults)

    def fail_next_watch(self, *faults: Fault) -> None:
        self.watch_faults.extend(faults)

    def _record(self, etype: str, obj: dict[str, Any]) -> None:
        self.history.append((self.rv, etype, obj))
        self._poke()

    def _poke(self) -> None:
        self.activity += 1
        if self._changed is not None:
            changed = self._changed

            async def notify() -> None:
                async with changed:
                    changed.notify_all()

            self._spawn(notify())

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- serving ----------------------------------------------------------------------

    async def start(self) -> None:
        self._changed = asyncio.Condition()
        self._server = await asyncio.start_server(self._connection, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop serving: open watches end, other answers are cut short."""
        assert self._server is not None
        self._server.close()
        self.close_watches()
        await settle()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            request = await _read_request(reader)
            if request is None:
                return
            self.requests.append(request)
            self._poke()
            await self._answer(request, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()
            self._poke()

    async def _answer(self, request: Request, writer: asyncio.StreamWriter) -> None:
        if request.path != PODS_PATH or request.method != "GET":
            await send_json(writer, 404, status_body(404, "NotFound", "no such path"))
        elif request.is_watch and request.query.get("sendInitialEvents") == "true":
            message = "sendInitialEvents is not supported"
            await send_json(writer, 400, status_body(400, "BadRequest", message))
        elif request.is_watch:
            fault = self.watch_faults.popleft() if self.watch_faults else None
            await (fault or _serve_watch)(self, request, writer)
        else:
            fault = self.list_faults.popleft() if self.list_faults else None
            await (fault or _serve_list)(self, request, writer)

    async def events_after(
        self, rv: int, *, follow: bool = True
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """The history after ``rv``, then (``follow``) every change as it happens,
        until :meth:`close_watches`."""
        generation = self.watch_generation
        index = 0
        while True:
            while index < len(self.history):
                event_rv, etype, obj = self.history[index]
                index += 1
                if event_rv > rv:
                    yield etype, obj
            if not follow:
                return
            if not await self._next_event_or_close(index, generation):
                return

    async def _next_event_or_close(self, index: int, generation: int) -> bool:
        """Wait for a change past ``history[index]``: True, or watches closed: False."""
        await self.wait_until(
            lambda: index < len(self.history) or self.watch_generation != generation
        )
        return self.watch_generation == generation

    async def hold(self) -> None:
        """Until :meth:`close_watches` (a stream that stays open and silent)."""
        generation = self.watch_generation
        await self.wait_until(lambda: self.watch_generation != generation)


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    parts = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    return Request(method, parts.path, query, headers)


# -- well-behaved answers -------------------------------------------------------------


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return failure_status(code, reason, message)


def event_line(etype: str, obj: Any) -> bytes:
    return json.dumps({"type": etype, "object": obj}).encode() + b"\n"


async def send(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes,
    *,
    reason: str = "OK",
    content_type: str = "application/json",
    length: int | None = None,
) -> None:
    """A whole answer; ``length`` overrides the Content-Length sent (a lie, if you like)."""
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\nConnection: close\r\n\r\n"
    )
    writer.write(head.encode("latin-1") + body)
    await writer.drain()


async def send_json(writer: asyncio.StreamWriter, status: int, doc: Any) -> None:
    await send(writer, status, json.dumps(doc).encode(), reason="OK" if status == 200 else "Error")


async def start_stream(writer: asyncio.StreamWriter) -> None:
    """The head of a watch answer: no length, the body ends when the connection does."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
    await writer.drain()


async def _serve_list(
    server: HostileServer, request: Request, writer: asyncio.StreamWriter
) -> None:
    await send_json(writer, 200, list_body(server))


def list_body(server: HostileServer) -> dict[str, Any]:
    return {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(server.rv)},
        "items": list(server.pods.values()),
    }


async def _serve_watch(
    server: HostileServer, request: Request, writer: asyncio.StreamWriter
) -> None:
    rv = int(request.query.get("resourceVersion") or 0)
    await start_stream(writer)
    async for etype, obj in server.events_after(rv):
        writer.write(event_line(etype, obj))
        await writer.drain()


async def serve_watch(
    server: HostileServer, request: Request, writer: asyncio.StreamWriter
) -> None:
    """Behave (for faults that misbehave only part of the time)."""
    await _serve_watch(server, request, writer)


@contextlib.asynccontextmanager
async def running() -> AsyncIterator[HostileServer]:
    server = HostileServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


# -- faults -----------------------------------------------------------------------------
#
# Each answers one request in place of the server. List faults answer a list
# request; watch faults a watch request. ``Request.authorization`` is what the
# client sent, for the faults that echo it back.


def list_answer(status: int, doc: Any) -> Fault:
    """A list answered with ``doc`` (any JSON) and ``status``."""

    async def fault(server: HostileServer, request: Request, writer: asyncio.StreamWriter) -> None:
        await send_json(writer, status, doc)

    return fault


def list_bytes(body: bytes, *, length: int | None = None) -> Fault:
    """A list answered with raw ``body`` (and a Content-Length of ``length``, if given)."""

    async def fault(server: HostileServer, request: Request, writer: asyncio.StreamWriter) -> None:
        await send(writer, 200, body, length=length)

    return fault


async def list_truncated(
    server: HostileServer, request: Request, writer: asyncio.StreamWriter
) -> None:
    """The real list, cut off halfway (the Content-Length promises all of it)."""
    body = json.dumps(list_body(server)).encode()
    await send(writer, 200, body[: len(body) // 2], length=len(body))


async def list_oversized(
    server: HostileServer, request: Request, writer: asyncio.StreamWriter
) -> None:
    """A valid list of 1 MiB of padding, without a Content-Length (read until closed)."""
    doc = {**list_body(server), "padding": "x" * (1 << 20)}
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
        + json.dumps(doc).encode()
    )
    await writer.drain()


async def echo_error_page(
    server: HostileServer, request: Request, writer: asyncio.StreamWriter
) -> None:
    """A proxy's 502 page that shows the request's headers, credentials included."""
    headers = "\n".join(f"{k}: {v}" for k, v in request.headers.items())
    page = f"<html><body><h1>502 Bad Gateway</h1><pre>{headers}</pre></body></html>"
    await send(writer, 502, page.encode(), reason="Bad Gateway", content_type="text/html")


async def echo_status_line(
    server: HostileServer, request: Request, writer: asyncio.StreamWriter
) -> None:
    """Not HTTP at all: a status line that echoes the Authorization header."""
    writer.write(f"NOPE {request.authorization}\r\n\r\n".encode("latin-1"))
    await writer.drain()


def watch_then(*lines: bytes, close: bool = True) -> Fault:
    """A watch that replays the history after the requested resourceVersion, then
    writes ``lines`` (raw bytes: events, garbage, half a line), then ends (or, if
    not ``close``, stays open and silent)."""

    async def fault(server: HostileServer, request: Request, writer: asyncio.StreamWriter) -> None:
        rv = int(request.query.get("resourceVersion") or 0)
        await start_stream(writer)
        async for etype, obj in server.events_after(rv, follow=False):
            writer.write(event_line(etype, obj))
        for line in lines:
            writer.write(line)
            await writer.drain()
        if not close:
            await server.hold()

    return fault


def echo_error_event(code: int) -> Fault:
    """A watch whose first event is an ERROR Status echoing the Authorization header."""

    async def fault(server: HostileServer, request: Request, writer: asyncio.StreamWriter) -> None:
        await start_stream(writer)
        message = f"upstream rejected {request.authorization}"
        writer.write(event_line("ERROR", status_body(code, "InternalError", message)))
        await writer.drain()

    return fault


async def watch_oversized_line(
    server: HostileServer, request: Request, writer: asyncio.StreamWriter
) -> None:
    """A line that never ends: 16 KiB pieces without a newline, until the client leaves."""
    await start_stream(writer)
    piece = b"x" * 16384
    while True:
        writer.write(piece)
        await writer.drain()


async def watch_silent(
    server: HostileServer, request: Request, writer: asyncio.StreamWriter
) -> None:
    """A watch that opens and then says nothing, ever."""
    await start_stream(writer)
    await server.hold()


async def watch_trickle(
    server: HostileServer, request: Request, writer: asyncio.StreamWriter
) -> None:
    """A slow watch: the history one byte per write, then every change the same way."""
    rv = int(request.query.get("resourceVersion") or 0)
    await start_stream(writer)
    async for etype, obj in server.events_after(rv):
        for byte in event_line(etype, obj):
            writer.write(bytes([byte]))
            await writer.drain()
