"""How the emulator calls webhooks (admission and CRD conversion), as kube-apiserver's
webhook client does: a ``POST`` of the review as JSON to the ``clientConfig``'s URL (with
``?timeout=<n>s`` for admission), over HTTPS trusting the ``caBundle`` (the system's CAs
without one), keeping connections alive, within the webhook's timeout on the emulator's
clock.

A ``clientConfig`` naming a Service is called at the URL the emulator was told for that
Service (:meth:`WebhookCaller.route_service`): the emulator has no cluster network.

Private to :mod:`kubereflector.testing.apiserver`. Event loop only.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import ssl
from collections.abc import Mapping
from typing import Any, Final

import aiohttp
import msgspec

from ..._aio.timeout import within
from ...clock import Clock

__all__ = ["CallFailed", "WebhookCaller"]

_decode: Final = msgspec.json.decode


class CallFailed(Exception):
    """The webhook could not be called or its answer was not a review (kube's
    ``ErrCallingWebhook``): ``reason`` says why, as kube words it (``Post "<url>":
    dial tcp ...: connect: connection refused``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WebhookCaller:
    """Calls webhooks for one emulator (one connection pool, closed by :meth:`close`)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[bytes, ssl.SSLContext] = {}
        self._routes: dict[tuple[str, str, int], str] = {}

    def route_service(self, namespace: str, name: str, port: int, url: str) -> None:
        """Call webhooks of the Service ``namespace/name`` on ``port`` at ``url``
        (``https://host:port``; the ``clientConfig``'s path is appended)."""
        self._routes[(namespace, name, port)] = url.rstrip("/")

    def url_of(self, config: Mapping[str, Any]) -> str:
        """The URL a ``clientConfig`` names (:class:`CallFailed` for a Service the emulator
        was not told where to reach)."""
        url = config.get("url")
        if isinstance(url, str):
            return url
        service = config.get("service")
        if not isinstance(service, Mapping):
            raise CallFailed("the clientConfig names neither a url nor a service")
        namespace, name = str(service.get("namespace")), str(service.get("name"))
        port = int(service.get("port") or 443)
        base = self._routes.get((namespace, name, port))
        if base is None:
            raise CallFailed(
                f'service "{name}" in namespace "{namespace}" (port {port}) is not reachable from '
                "the emulator: route it with ApiServerEmulator.route_webhook_service()"
            )
        path = str(service.get("path") or "")
        return base + (path if path.startswith("/") or not path else "/" + path)

    def _context(self, config: Mapping[str, Any]) -> ssl.SSLContext | bool:
        bundle = config.get("caBundle")
        if not bundle:
            return True  # the system's CAs
        try:
            pem = base64.b64decode(bundle, validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise CallFailed("the clientConfig's caBundle is not base64") from None
        context = self._contexts.get(pem)
        if context is None:
            try:
                context = ssl.create_default_context(cadata=pem.decode("ascii", "replace"))
            except (ssl.SSLError, ValueError) as exc:
                raise CallFailed(f"unable to load the caBundle: {exc}") from None
            self._contexts[pem] = context
        return context

    async def post(
        self,
        config: Mapping[str, Any],
        body: bytes,
        *,
        timeout: float,
        query: Mapping[str, str] | None = None,
    ) -> Any:
        """``POST`` ``body`` to the webhook of ``config`` and return its decoded JSON
        answer; :class:`CallFailed` when it cannot be reached in ``timeout`` seconds (on
        the emulator's clock) or answers anything but a 2xx JSON body."""
        url = self.url_of(config)
        context = self._context(config)
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), auto_decompress=True
            )
        shown = url if not query else url + "?" + "&".join(f"{k}={v}" for k, v in query.items())
        try:
            status, data = await within(self._clock, timeout, self._send(url, body, context, query))
        except TimeoutError:
            raise CallFailed(f'Post "{shown}": context deadline exceeded') from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise CallFailed(f'Post "{shown}": {_describe(exc)}') from None
        if not 200 <= status < 300:
            raise CallFailed(
                _status_message(data)
                or f"the server responded with the status code {status} but did not return "
                "more information"
            )
        try:
            return _decode(data)
        except msgspec.DecodeError as exc:
            raise CallFailed(f"the answer is not JSON: {exc}") from None

    async def _send(
        self,
        url: str,
        body: bytes,
        context: ssl.SSLContext | bool,
        query: Mapping[str, str] | None,
    ) -> tuple[int, bytes]:
        assert self._session is not None
        async with self._session.post(
            url,
            data=body,
            params=dict(query) if query else None,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            ssl=context,
        ) as response:
            return response.status, await response.read()

    async def close(self) -> None:
        """Close the connections (the next call opens new ones)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
            await asyncio.sleep(0)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"tls: failed to verify certificate: {exc.certificate_error}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        number = exc.os_error.errno
        why = os.strerror(number).lower() if number else str(exc.os_error)
        return f"dial tcp {exc.host}:{exc.port}: connect: {why}"
    return str(exc) or type(exc).__name__


def _status_message(data: bytes) -> str:
    try:
        status = _decode(data)
    except msgspec.DecodeError:
        return ""
    if isinstance(status, dict) and status.get("kind") == "Status":
        return str(status.get("message") or "")
    return ""
