"""EventRecorder's writes in flight: several at once, up to a bound; one at a time per series.

The events API here is a fake over HTTP (tests/fake_http.py) that holds every write
until the test answers it, so the test sees which writes are in flight at once (the
emulator answers at once). The exact counts against the emulator and kube-apiserver
are in test_events.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from fake_http import FakeServer, serve, status
from kubereflector.client import Client, ClientConfig, EventRecorder
from kubereflector.testing import FakeClock

pytestmark = pytest.mark.asyncio

COMPONENT = "example.com/test-controller"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
CUT = 0
"""An answer: the connection is cut instead (a connection error, retried)."""


def subject(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
    }


@dataclass
class Write:
    """One write the recorder sent: a create (POST) or a series update (PATCH)."""

    method: str
    name: str
    about: str  # the regarding object's name
    count: int  # the series.count sent (1 without a series)
    answer: asyncio.Future[int] = field(repr=False)  # the HTTP status to answer with


class HeldEvents:
    """The events API of the namespace ``default``: every write waits for :meth:`answer`.

    ``held`` are the writes not answered yet, oldest first; ``writes`` every write
    that arrived; ``max_in_flight`` the most writes held at once."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.held: list[Write] = []
        self.writes: list[Write] = []
        self.max_in_flight = 0
        self._events: dict[str, dict[str, Any]] = {}
        self._arrived = asyncio.Condition()
        server.route("POST", EVENTS, self._create)

    async def _create(self, request: web.Request) -> web.StreamResponse:
        body: dict[str, Any] = await request.json()
        name = body["metadata"]["name"]
        self.server.route("PATCH", f"{EVENTS}/{name}", self._patch)
        answer = await self._hold(request, "POST", name, body)
        if answer == 201:
            self._events[name] = body
        return self._respond(answer, body)

    async def _patch(self, request: web.Request) -> web.StreamResponse:
        patch: dict[str, Any] = await request.json()
        name = request.path.rsplit("/", 1)[1]
        event = {**self._events[name], **patch}
        answer = await self._hold(request, "PATCH", name, event)
        if answer == 200:
            self._events[name] = event
        return self._respond(answer, event)

    async def _hold(self, request: web.Request, method: str, name: str, event: Any) -> int:
        count = event.get("series", {}).get("count", 1)
        answer = asyncio.get_running_loop().create_future()
        write = Write(method, name, event["regarding"]["name"], count, answer)
        self.writes.append(write)
        self.held.append(write)
        self.max_in_flight = max(self.max_in_flight, len(self.held))
        async with self._arrived:
            self._arrived.notify_all()
        code: int = await answer
        if code == CUT:
            assert request.transport is not None
            request.transport.abort()
        return code

    @staticmethod
    def _respond(code: int, event: dict[str, Any]) -> web.StreamResponse:
        if code >= 400:
            return web.json_response(status(code, "InternalError", "refused"), status=code)
        return web.json_response(event, status=code or 200)

    def answer(self, write: Write, code: int | None = None) -> None:
        """Let ``write`` be answered: 201 or 200 (created, patched) unless ``code``."""
        self.held.remove(write)
        write.answer.set_result(
            code if code is not None else 201 if write.method == "POST" else 200
        )

    async def wait_held(self, count: int) -> list[Write]:
        """Wait until ``count`` writes are held; the held writes."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.held) >= count)
        return list(self.held)

    async def settle(self) -> None:
        """Two round trips of the test's own to the server, on new connections: writes
        the recorder had begun by now have arrived by then."""
        async with aiohttp.ClientSession() as session:
            for _ in range(2):
                async with session.get(f"{self.server.url}/settle") as response:
                    await response.read()

    def counts(self, about: str) -> list[int]:
        """The series counts written about the object ``about``, in order."""
        return [w.count for w in self.writes if w.about == about]


@pytest_asyncio.fixture
async def api() -> AsyncIterator[HeldEvents]:
    async with serve() as server:
        held = HeldEvents(server)
        try:
            yield held
        finally:
            for write in list(held.held):  # a failed test: let the server stop
                held.answer(write, 500)


@pytest_asyncio.fixture
async def client(api: HeldEvents) -> AsyncIterator[Client]:
    async with Client(ClientConfig(server=api.server.url)) as c:
        yield c


@pytest.mark.parametrize("bound", [None, 3])
async def test_writes_in_flight_reach_the_bound_and_never_exceed_it(
    api: HeldEvents, client: Client, bound: int | None
) -> None:
    if bound is None:
        recorder = EventRecorder(client, COMPONENT, clock=FakeClock())
        limit = 8  # the default
    else:
        recorder = EventRecorder(client, COMPONENT, clock=FakeClock(), max_concurrent_sends=bound)
        limit = bound
    total = limit + 5
    for i in range(total):
        recorder.record(subject(f"object-{i}"), "Normal", "Synced", "in sync")
    flush = asyncio.create_task(recorder.flush())
    for answered in range(total):
        in_flight = min(limit, total - answered)
        await api.wait_held(in_flight)
        await api.settle()
        assert len(api.held) == in_flight
        api.answer(api.held[0])
    await flush
    assert api.max_in_flight == limit
    assert [(w.method, w.about) for w in api.writes] == [
        ("POST", f"object-{i}") for i in range(total)
    ]  # in the order recorded
    assert recorder.dropped == 0


async def test_a_series_waits_for_the_answer_to_its_own_write_and_no_other(
    api: HeldEvents, client: Client
) -> None:
    recorder = EventRecorder(client, COMPONENT, clock=FakeClock(), max_concurrent_sends=4)
    recorder.record(subject("a"), "Normal", "Synced", "first")
    (create_a,) = await api.wait_held(1)
    recorder.record(subject("a"), "Normal", "Synced", "again")  # while a's create is in flight
    recorder.record(subject("a"), "Normal", "Synced", "and again")
    recorder.record(subject("b"), "Normal", "Synced", "another series goes ahead")
    await api.wait_held(2)
    await api.settle()
    assert [(w.method, w.about) for w in api.held] == [("POST", "a"), ("POST", "b")]
    api.answer(create_a)
    patch = (await api.wait_held(2))[-1]  # a's update, after its create's answer
    assert (patch.method, patch.name, patch.count) == ("PATCH", create_a.name, 3)
    recorder.record(subject("a"), "Normal", "Synced", "while the update is in flight")
    recorder.record(subject("a"), "Normal", "Synced", "twice")
    await api.settle()
    assert [(w.method, w.about) for w in api.held] == [("POST", "b"), ("PATCH", "a")]
    api.answer(patch)
    latest = (await api.wait_held(2))[-1]
    assert (latest.method, latest.count) == ("PATCH", 5)
    for write in list(api.held):
        api.answer(write)
    await recorder.flush()
    assert api.counts("a") == [1, 3, 5]
    assert api.counts("b") == [1]


async def test_flush_waits_for_the_writes_in_flight(api: HeldEvents, client: Client) -> None:
    recorder = EventRecorder(client, COMPONENT, clock=FakeClock())
    recorder.record(subject("a"), "Normal", "Synced", "in sync")
    flush = asyncio.create_task(recorder.flush())
    blocking = asyncio.ensure_future(asyncio.to_thread(recorder.flush_blocking))
    (create,) = await api.wait_held(1)
    await api.settle()
    assert not flush.done()
    assert not blocking.done()
    api.answer(create)
    await flush
    assert await blocking is True


async def test_a_refused_write_frees_its_place_for_the_next(
    api: HeldEvents, client: Client
) -> None:
    recorder = EventRecorder(client, COMPONENT, clock=FakeClock(), max_concurrent_sends=2)
    for name in ("a", "b", "c"):
        recorder.record(subject(name), "Normal", "Synced", "in sync")
    flush = asyncio.create_task(recorder.flush())
    a, b = await api.wait_held(2)
    assert (a.about, b.about) == ("a", "b")
    api.answer(a, 500)
    assert [w.about for w in await api.wait_held(2)] == ["b", "c"]
    for write in list(api.held):
        api.answer(write)
    await flush
    assert recorder.dropped == 1
    assert [w.about for w in api.writes] == ["a", "b", "c"]


async def test_a_write_waiting_to_retry_does_not_hold_up_the_others(
    api: HeldEvents, client: Client
) -> None:
    clock = FakeClock()
    recorder = EventRecorder(client, COMPONENT, clock=clock, max_concurrent_sends=2)
    for name in ("a", "b", "c"):
        recorder.record(subject(name), "Normal", "Synced", "in sync")
    flush = asyncio.create_task(recorder.flush())
    a, b = await api.wait_held(2)
    api.answer(a, CUT)
    await clock.wait_for_sleepers()  # a waits 10 s (on the clock) to try again
    api.answer(b)  # its place goes to c; a keeps its own
    (c,) = await api.wait_held(1)
    assert c.about == "c"
    api.answer(c)
    await api.settle()
    assert not flush.done()  # a is still to be written
    assert api.held == []
    await clock.advance(13)
    (again,) = await api.wait_held(1)
    assert (again.method, again.name) == ("POST", a.name)
    api.answer(again)
    await flush
    assert recorder.dropped == 0
    assert [w.about for w in api.writes] == ["a", "b", "c", "a"]


async def test_the_bound_is_a_positive_integer(client: Client) -> None:
    for wrong in (0, -1, 1.5, True, "8", None):
        with pytest.raises(ValueError, match="max_concurrent_sends must be a positive integer"):
            EventRecorder(client, COMPONENT, max_concurrent_sends=wrong)  # type: ignore[arg-type]
    EventRecorder(client, COMPONENT, max_concurrent_sends=1)  # one at a time, as before
