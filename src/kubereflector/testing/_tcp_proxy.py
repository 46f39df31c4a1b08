"""A loopback TCP proxy that misbehaves on request (private): :class:`TcpProxy`.

Put it between a client and a server (the emulator, or a real kube-apiserver) to
make the network fail the ways a real one does, which neither end can fake:

* :meth:`TcpProxy.black_hole`: bytes stop moving in both directions while every
  connection stays open, and new connections are accepted but carry nothing: a
  dead peer or a partition, where only a timeout (the Reflector's stall
  detection, a lease's renew deadline) notices anything. The bytes sent
  meanwhile are held back, as TCP would keep retransmitting them.
* :meth:`TcpProxy.restore`: bytes move again; what was held back arrives late.
* :meth:`TcpProxy.stall`: the connections open now go silent for good (bytes
  held back both ways, never delivered, sockets open: a peer that vanished, a
  NAT that forgot the connection); new connections are served as usual, so a
  client that notices (a timeout) and reconnects recovers.
* :meth:`TcpProxy.cut`: every connection is reset now (the client sees a
  connection reset mid-stream); new ones are served as usual.

It forwards bytes and knows nothing of HTTP or TLS: a TLS client checks the
server's certificate for the name it dialled, so dial ``127.0.0.1`` (or
``localhost``) where the server's certificate names it.

Thread-safety: none; use it on the event loop it was started on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from types import TracebackType

from ._listening import stop_accepting

__all__ = ["TcpProxy"]

logger = logging.getLogger("kubereflector.testing.tcp_proxy")

_CHUNK = 65536


class TcpProxy:
    """Forwards connections made to ``host:port`` (``port=0``: any free port, see
    :attr:`port`) to ``target_host:target_port``. Start it with ``async with`` or
    :meth:`start`; :meth:`stop` closes everything."""

    def __init__(
        self, target_host: str, target_port: int, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        if not 0 < target_port < 65536:
            raise ValueError(f"target_port must be a TCP port (1..65535), not {target_port!r}")
        self._target = (target_host, target_port)
        self._bind = (host, port)
        self._server: asyncio.Server | None = None
        self._open = asyncio.Event()
        self._open.set()
        self._connections: set[_Connection] = set()
        self._held: set[asyncio.StreamWriter] = set()  # accepted in a black hole, not forwarded
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self.connections_made = 0
        """Connections accepted since the start."""

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> TcpProxy:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Listen. Raises ``RuntimeError`` if it already listens, ``OSError`` if the
        address cannot be bound."""
        if self._server is not None:
            raise RuntimeError("the proxy is already listening")
        self._server = await asyncio.start_server(self._accepted, *self._bind)

    async def stop(self) -> None:
        """Stop listening and reset every connection; idempotent."""
        server, self._server = self._server, None
        self._closing = True
        self._open.set()  # what waits for the black hole to end sees the closing
        if server is not None:
            # A connection accepted just now reaches _accepted, which resets it.
            await stop_accepting(server)
            server.close()
        self.cut()
        # Each connection's task ends by itself once its sockets are reset (asyncio
        # reports a connection callback that was cancelled as an error).
        if self._tasks:
            await asyncio.wait(self._tasks)
        if server is not None:
            await server.wait_closed()

    @property
    def host(self) -> str:
        """The address it listens on."""
        return self._bind[0]

    @property
    def port(self) -> int:
        """The port it listens on (``RuntimeError`` before :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("the proxy does not listen")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def open_connections(self) -> int:
        """Connections forwarded now (held ones included)."""
        return len(self._connections)

    def is_black_hole(self) -> bool:
        """Whether bytes are held back now (see :meth:`black_hole`)."""
        return not self._open.is_set()

    # -- faults -----------------------------------------------------------------------

    def black_hole(self) -> None:
        """Stop moving bytes, in both directions and on every connection, without
        closing any (see the module documentation) until :meth:`restore`."""
        self._open.clear()
        for connection in self._connections:
            connection.open.clear()

    def restore(self) -> None:
        """Move bytes again (the held-back ones first), but on stalled connections."""
        self._open.set()
        for connection in self._connections:
            if not connection.stalled:
                connection.open.set()

    def stall(self) -> None:
        """Make the connections open now silent for good (see the module
        documentation); new connections are not affected."""
        for connection in self._connections:
            connection.stalled = True
            connection.open.clear()

    def cut(self) -> None:
        """Reset every open connection, both sides, now (also those accepted in a
        black hole and not forwarded yet)."""
        for connection in list(self._connections):
            connection.reset()
        self._connections.clear()
        for writer in list(self._held):
            _reset(writer)

    # -- forwarding -------------------------------------------------------------------

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections_made += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        connection: _Connection | None = None
        try:
            self._held.add(writer)
            try:
                await self._open.wait()  # a black hole answers nothing, not even a refusal
            finally:
                self._held.discard(writer)
            if self._closing or writer.is_closing():  # stopped, or cut while held
                _reset(writer)
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self._target)
            except OSError as err:
                logger.debug("proxy: cannot reach %s:%d: %s", *self._target, err)
                _reset(writer)
                return
            connection = _Connection(writer, up_writer, flowing=self._open.is_set())
            self._connections.add(connection)
            if self._closing:
                return
            pumps = [
                asyncio.create_task(self._pump(reader, up_writer, connection)),
                asyncio.create_task(self._pump(up_reader, writer, connection)),
            ]
            try:
                done, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
                if pending and all(pump.result() for pump in done):
                    await asyncio.wait(pending)  # one way ended cleanly: let the other finish
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.wait(pumps)
        finally:
            if connection is not None:
                self._connections.discard(connection)
                connection.close()
            else:
                writer.close()
            self._tasks.discard(task)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, connection: _Connection
    ) -> bool:
        """Copy ``source`` to ``sink`` while the proxy is open. At the end of
        ``source``, half-close ``sink`` as the peer did and return ``True``;
        ``False`` when either side failed."""
        try:
            while True:
                await connection.open.wait()
                data = await source.read(_CHUNK)
                await connection.open.wait()  # read just before a black hole: held back
                if self._closing or connection.closed:
                    return False
                if not data:
                    if sink.can_write_eof():
                        sink.write_eof()
                    return True
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            return False


class _Connection:
    """The two sockets of one forwarded connection. Its pumps move bytes while
    ``open`` is set (cleared in a black hole, and for good once ``stalled``);
    once ``closed`` (reset) they end, held or not."""

    __slots__ = ("_client", "_upstream", "closed", "open", "stalled")

    def __init__(
        self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter, *, flowing: bool
    ) -> None:
        self._client = client
        self._upstream = upstream
        self.open = asyncio.Event()
        if flowing:
            self.open.set()
        self.stalled = False
        self.closed = False

    def reset(self) -> None:
        self.closed = True
        self.open.set()  # what waits to move bytes sees the reset
        _reset(self._client)
        _reset(self._upstream)

    def close(self) -> None:
        for writer in (self._client, self._upstream):
            with contextlib.suppress(Exception):
                writer.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close ``writer``'s socket with an RST (SO_LINGER 0), not a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
