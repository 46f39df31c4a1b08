"""Stopping a listening asyncio server without leaving a just-accepted connection's
socket behind (private to kubereflector.testing): :func:`stop_accepting`.

asyncio accepts a connection in one turn of the event loop and makes its transport
in a task that runs in a later turn. A ``Server.close()`` between the two leaks that
socket on Python 3.11: the task's ``Server._attach`` asserts that the server is
open, the task swallows the error (logged only in debug mode), and the accepted
socket is never closed; the garbage collector reports it as ``ResourceWarning:
unclosed <socket.socket ... laddr=(the server's address) ...>``. (Python 3.12
changed ``_attach``; the servers here support 3.11.) A client that reconnects at
once, as a Reflector or a leader elector does, makes that turn likely in a test
that restarts or stops its server while clients run.

Thread-safety: none; call on the server's event loop.
"""

from __future__ import annotations

import asyncio
from typing import Final

__all__ = ["ACCEPT_TURNS", "stop_accepting"]

ACCEPT_TURNS: Final = 3
"""Turns of the event loop from a connection's accept to its callback's first step:
asyncio's accept task (which makes the transport), the protocol's
``connection_made``, a streams callback's task."""


async def stop_accepting(*servers: asyncio.AbstractServer) -> None:
    """Stop taking new connections on ``servers``, then let the event loop turn
    :data:`ACCEPT_TURNS` times so that every connection it has already accepted has
    its transport (attached to its server, closed by whoever closes its
    connections) before the caller closes the servers.

    Removing the listening sockets' readers stops further accepts, also one queued
    earlier in the current turn (its handle is cancelled); the servers stay open
    (``close()`` is the caller's next step). A server without listening sockets
    (not asyncio's ``Server``, or closed already) is left alone.
    """
    loop = asyncio.get_running_loop()
    listening = [
        sock for server in servers if isinstance(server, asyncio.Server) for sock in server.sockets
    ]
    if not listening:
        return
    for sock in listening:
        loop.remove_reader(sock.fileno())
    for _ in range(ACCEPT_TURNS):
        await asyncio.sleep(0)
