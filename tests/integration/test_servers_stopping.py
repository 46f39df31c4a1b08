"""A connection the test servers (the emulator, the TCP proxy of the fault
schedules) accept just as they stop or restart is closed with the others, not
left to the garbage collector (Python 3.11's asyncio leaks the socket of a
connection accepted in the turn of the event loop before ``Server.close()``:
``ResourceWarning: unclosed <socket ...>``, as 2 of some 3,500 fault schedules saw)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator

import pytest

from kubereflector.testing import ApiServerEmulator
from kubereflector.testing._tcp_proxy import TcpProxy

pytestmark = pytest.mark.asyncio


@contextlib.contextmanager
def unraisable_exceptions() -> Iterator[list[sys.UnraisableHookArgs]]:
    """What reaches ``sys.unraisablehook`` meanwhile (a ResourceWarning from a
    ``__del__`` included), collected after a garbage collection at the end."""
    seen: list[sys.UnraisableHookArgs] = []
    previous = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        yield seen
        gc.collect()
    finally:
        sys.unraisablehook = previous


async def connect_and_stop_in_the_accepting_turn(
    port: int, stop: Callable[[], Awaitable[None]]
) -> None:
    """Connect to ``port`` (the kernel completes it in the listen backlog), let the
    event loop accept it but not yet make its transport, then ``stop()``: the first
    turn only returns here (the listening socket's readiness is queued behind), in
    the second the loop accepts before this resumes and queues the transport's
    task behind it."""
    client = socket.create_connection(("127.0.0.1", port))
    try:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        await stop()
        for _ in range(5):  # what the stop left to run (nothing, when it closed all)
            await asyncio.sleep(0)
    finally:
        client.close()


async def test_the_tcp_proxy_stopping_closes_a_connection_it_just_accepted() -> None:
    target = await asyncio.start_server(lambda _r, writer: writer.close(), "127.0.0.1", 0)
    try:
        with unraisable_exceptions() as seen:
            proxy = TcpProxy("127.0.0.1", target.sockets[0].getsockname()[1])
            await proxy.start()
            await connect_and_stop_in_the_accepting_turn(proxy.port, proxy.stop)
            assert proxy.open_connections == 0
        assert [str(u.exc_value) for u in seen] == []
    finally:
        target.close()
        await target.wait_closed()


@pytest.mark.parametrize("how", ["restart", "stop"])
async def test_the_emulator_stopping_or_restarting_closes_a_connection_it_just_accepted(
    how: str,
) -> None:
    with unraisable_exceptions() as seen:
        async with ApiServerEmulator() as emulator:
            stop = emulator.restart if how == "restart" else emulator.stop
            await connect_and_stop_in_the_accepting_turn(emulator.port, stop)
    assert [str(u.exc_value) for u in seen] == []
