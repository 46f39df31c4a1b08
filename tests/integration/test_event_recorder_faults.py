"""EventRecorder when the server fails: retried, dropped, logged, never raised.

Emulator only (fault injection). The recorder's retries sleep on a FakeClock.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from kubereflector.client import Client, ClientConfig, EventRecorder, StaticAuth
from kubereflector.testing import ApiServerEmulator, FakeClock

pytestmark = pytest.mark.asyncio

COMPONENT = "example.com/test-controller"
SUBJECT: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "subject", "namespace": "default", "uid": "u-1"},
}


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ApiServerEmulator]:
    async with ApiServerEmulator() as emulator:
        yield emulator


@pytest_asyncio.fixture
async def client(server: ApiServerEmulator) -> AsyncIterator[Client]:
    config = ClientConfig(server=server.url, auth=StaticAuth(token=server.token))
    async with Client(config) as c:
        yield c


async def retry_until_done(clock: FakeClock, task: asyncio.Task[None]) -> None:
    """Move the clock past each retry's sleep until ``task`` ends."""
    while not task.done():
        sleeping = asyncio.ensure_future(clock.wait_for_sleepers())
        await asyncio.wait({sleeping, task}, return_when=asyncio.FIRST_COMPLETED)
        sleeping.cancel()
        if not task.done():
            await clock.advance(13)


async def test_connection_errors_are_retried_until_the_server_is_back(
    server: ApiServerEmulator, client: Client
) -> None:
    clock = FakeClock()
    recorder = EventRecorder(client, COMPONENT, clock=clock)
    await server.stop()
    recorder.record(SUBJECT, "Normal", "Synced", "while the server is down")
    flush = asyncio.create_task(recorder.flush())
    await clock.wait_for_sleepers()  # the first attempt failed; it waits to retry
    await server.start()
    await retry_until_done(clock, flush)
    (event,) = server.objects("events.events.k8s.io", namespace="default")
    assert event["reason"] == "Synced"
    assert recorder.dropped == 0


async def test_a_server_that_never_answers_costs_twelve_tries_then_the_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    clock = FakeClock()
    async with Client(ClientConfig(server=f"http://127.0.0.1:{port}")) as client:
        recorder = EventRecorder(client, COMPONENT, clock=clock)
        with caplog.at_level(logging.WARNING, logger="kubereflector.client.events"):
            recorder.record(SUBJECT, "Warning", "Failed", "nobody hears this")
            flush = asyncio.create_task(recorder.flush())
            await retry_until_done(clock, flush)
    assert recorder.dropped == 1
    assert caplog.text.count("will retry") == 11
    assert "no connection after 12 tries" in caplog.text


async def test_a_refused_write_is_dropped_and_the_next_occurrence_starts_afresh(
    server: ApiServerEmulator, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = EventRecorder(client, COMPONENT)
    server.fail_next(1, 500)
    with caplog.at_level(logging.ERROR, logger="kubereflector.client.events"):
        recorder.record(SUBJECT, "Normal", "Synced", "refused")
        await recorder.flush()
    assert recorder.dropped == 1
    assert "the server refused it" in caplog.text
    assert server.objects("events.events.k8s.io", namespace="default") == []
    recorder.record(SUBJECT, "Normal", "Synced", "accepted")
    await recorder.flush()
    (event,) = server.objects("events.events.k8s.io", namespace="default")
    assert (event["note"], event.get("series")) == ("accepted", None)


async def test_an_event_deleted_on_the_server_is_written_anew(
    server: ApiServerEmulator, client: Client
) -> None:
    recorder = EventRecorder(client, COMPONENT)
    recorder.record(SUBJECT, "Normal", "Synced", "one")
    await recorder.flush()
    (event,) = server.objects("events.events.k8s.io", namespace="default")
    server.delete("events.events.k8s.io", event["metadata"]["name"], namespace="default")
    recorder.record(SUBJECT, "Normal", "Synced", "two")
    await recorder.flush()
    (again,) = server.objects("events.events.k8s.io", namespace="default")
    assert again["metadata"]["name"] == event["metadata"]["name"]
    assert again["series"]["count"] == 2


async def test_an_async_client_recorder_needs_a_running_loop(client: Client) -> None:
    def outside() -> None:
        EventRecorder(client, COMPONENT)

    with pytest.raises(RuntimeError, match="created in a coroutine"):
        await asyncio.to_thread(outside)
    with pytest.raises(ValueError, match="component"):
        EventRecorder(client, "")
