"""The loopback TCP proxy of the fault schedules and the chaos scripts
(kubereflector.testing._tcp_proxy): it forwards, holds bytes back without closing
anything, resets connections, and stops cleanly."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from kubereflector.testing import settle
from kubereflector.testing._tcp_proxy import TcpProxy

pytestmark = pytest.mark.asyncio

WAIT = 10.0
"""Upper bound (seconds) on any wait; never reached when things work."""


class Echo:
    """A TCP server that echoes what it gets and keeps a copy."""

    def __init__(self) -> None:
        self.received = b""
        self.got = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(1024):
                self.received += data
                self.got.set()
                writer.write(data)
                await writer.drain()
        writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def echo_and_proxy() -> AsyncIterator[tuple[Echo, TcpProxy]]:
    echo = Echo()
    echo.server = await asyncio.start_server(echo._serve, "127.0.0.1", 0)
    try:
        async with TcpProxy("127.0.0.1", echo.port) as proxy:
            yield echo, proxy
    finally:
        echo.server.close()
        await echo.server.wait_closed()


async def connect(proxy: TcpProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def test_bytes_cross_both_ways() -> None:
    async with echo_and_proxy() as (echo, proxy):
        reader, writer = await connect(proxy)
        writer.write(b"ping")
        assert await asyncio.wait_for(reader.readexactly(4), WAIT) == b"ping"
        assert echo.received == b"ping"
        assert (proxy.connections_made, proxy.open_connections) == (1, 1)
        writer.close()


async def test_a_black_hole_holds_bytes_back_without_closing_until_restored() -> None:
    async with echo_and_proxy() as (echo, proxy):
        reader, writer = await connect(proxy)
        writer.write(b"a")
        assert await asyncio.wait_for(reader.readexactly(1), WAIT) == b"a"
        proxy.black_hole()
        assert proxy.is_black_hole()
        writer.write(b"b")
        await settle(200)
        assert echo.received == b"a"  # held back, and the connection stays open
        assert proxy.open_connections == 1
        late_reader, late_writer = await connect(proxy)  # accepted, then silent
        late_writer.write(b"c")
        await settle(200)
        assert echo.received == b"a"
        proxy.restore()
        assert await asyncio.wait_for(reader.readexactly(1), WAIT) == b"b"
        assert await asyncio.wait_for(late_reader.readexactly(1), WAIT) == b"c"
        writer.close()
        late_writer.close()


async def test_a_stalled_connection_stays_silent_and_new_ones_work() -> None:
    async with echo_and_proxy() as (echo, proxy):
        reader, writer = await connect(proxy)
        writer.write(b"a")
        assert await asyncio.wait_for(reader.readexactly(1), WAIT) == b"a"
        proxy.stall()
        writer.write(b"b")
        fresh_reader, fresh_writer = await connect(proxy)
        fresh_writer.write(b"c")
        assert await asyncio.wait_for(fresh_reader.readexactly(1), WAIT) == b"c"
        await settle(200)
        assert echo.received == b"ac"  # "b" never left the stalled connection
        assert proxy.open_connections == 2
        proxy.restore()  # ends a black hole, not a stall
        await settle(200)
        assert echo.received == b"ac"
        writer.close()
        fresh_writer.close()


async def test_held_connections_that_are_cut_end_and_stop_waits_for_nothing() -> None:
    """A stalled connection, and one in a black hole, when cut: their forwarding
    ends (found by the chaos runs: stop() waited for ever on a stalled connection
    that an earlier cut() had reset)."""
    async with echo_and_proxy() as (_echo, proxy):
        stalled_reader, stalled_writer = await connect(proxy)
        stalled_writer.write(b"a")
        assert await asyncio.wait_for(stalled_reader.readexactly(1), WAIT) == b"a"
        proxy.stall()
        proxy.black_hole()
        held_reader, held_writer = await connect(proxy)
        for _ in range(100):  # until the proxy has accepted it (and holds it)
            if proxy.connections_made == 2:
                break
            await settle(1)
        assert proxy.connections_made == 2
        proxy.cut()
        for reader in (stalled_reader, held_reader):
            with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
                await asyncio.wait_for(reader.readexactly(1), WAIT)
        await asyncio.wait_for(proxy.stop(), WAIT)
        stalled_writer.close()
        held_writer.close()


async def test_cut_resets_every_connection_and_new_ones_work() -> None:
    async with echo_and_proxy() as (_echo, proxy):
        reader, writer = await connect(proxy)
        writer.write(b"x")
        assert await asyncio.wait_for(reader.readexactly(1), WAIT) == b"x"
        proxy.cut()
        with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
            await asyncio.wait_for(reader.readexactly(1), WAIT)
        assert proxy.open_connections == 0
        writer.close()
        reader, writer = await connect(proxy)
        writer.write(b"y")
        assert await asyncio.wait_for(reader.readexactly(1), WAIT) == b"y"
        writer.close()


async def test_stop_ends_held_connections_too() -> None:
    async with echo_and_proxy() as (_echo, proxy):
        reader, writer = await connect(proxy)
        proxy.black_hole()
        await proxy.stop()
        with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
            await asyncio.wait_for(reader.readexactly(1), WAIT)
        with pytest.raises(RuntimeError, match="does not listen"):
            _ = proxy.port
        writer.close()


async def test_a_target_that_refuses_resets_the_client_and_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="target_port"):
        TcpProxy("127.0.0.1", 0)
    probe = await asyncio.start_server(lambda _r, _w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()  # nothing listens there any more
    async with TcpProxy("127.0.0.1", port) as proxy:
        reader, writer = await connect(proxy)
        with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
            await asyncio.wait_for(reader.readexactly(1), WAIT)
        writer.close()
