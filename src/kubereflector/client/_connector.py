"""The aiohttp connector of a Client, the same on every Python (private).

CPython 3.10's ``asyncio.sslproto`` never marks a TLS transport closed when the
peer closes an established connection (3.11's rewrite does), and aiohttp's
client protocol drops its transport on ``connection_lost`` without closing it.
Every TLS connection the server ends (a keep-alive connection the API server
times out, a server refusing the client certificate after the handshake) then
leaves a ``ResourceWarning: unclosed transport`` when it is collected: noise in
a long-running informer's logs, and an error under ``-W error``. On 3.10 the
connector's protocol closes its transport once the connection is lost (nothing
left to send: it only marks the transport closed); 3.11+ needs nothing.
"""

from __future__ import annotations

import functools
import ssl
import sys
from typing import cast

import aiohttp

__all__ = ["new_connector"]


def new_connector(tls: ssl.SSLContext | bool, limit: int) -> aiohttp.TCPConnector:
    """A TCPConnector with ``ssl=tls`` and at most ``limit`` connections."""
    connector = aiohttp.TCPConnector(ssl=tls, limit=limit)
    if sys.version_info < (3, 11):
        _close_lost_transports(connector)
    return connector


if sys.version_info < (3, 11):
    from aiohttp.client_proto import ResponseHandler

    class _ClosingResponseHandler(ResponseHandler):
        def connection_lost(self, exc: BaseException | None) -> None:
            transport = self.transport
            super().connection_lost(exc)
            if transport is not None and not transport.is_closing():
                transport.close()

    def _close_lost_transports(connector: aiohttp.TCPConnector) -> None:
        # aiohttp makes its protocols with this factory (a partial of
        # ResponseHandler); should that change, the connector stays as it is.
        factory = getattr(connector, "_factory", None)
        if isinstance(factory, functools.partial) and factory.func is ResponseHandler:
            closing = functools.partial(_ClosingResponseHandler, *factory.args, **factory.keywords)
            connector._factory = cast("functools.partial[ResponseHandler]", closing)
