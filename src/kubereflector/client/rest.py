"""The REST client: HTTP requests to one API server, with its errors mapped.

:class:`Client` wraps one aiohttp session (connection pooling, TLS verified by
default) and offers a small generic REST surface (``request``, ``get``,
``create``, ``update``, ``patch``, ``delete``), a paged ``list`` and a
streaming ``watch``, the two halves of the ListerWatcher contract. Failures
raise the classes of :mod:`kubereflector.errors`, each naming the request's URL
(never credentials, headers or object contents).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import ipaddress
import logging
import math
import os
import ssl
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import aiohttp
import msgspec
from yarl import URL

from .. import __version__
from ..errors import ApiError, DecodeError, TruncatedStreamError, error_from_status
from ..listwatch import ListOptions, ListResult, WatchEvent, WatchStream
from ._connector import new_connector
from ._lines import decode_watch_stream
from .config import ClientConfig

if TYPE_CHECKING:
    from .discovery import Discovery

__all__ = [
    "ACCEPT_JSON",
    "ACCEPT_METADATA",
    "ACCEPT_METADATA_LIST",
    "USER_AGENT",
    "Client",
    "JsonValue",
    "QueryParams",
    "list_params",
]

logger = logging.getLogger("kubereflector.client.rest")

USER_AGENT: Final = (
    f"kubereflector/{__version__} "
    f"(python {sys.version_info.major}.{sys.version_info.minor}; aiohttp {aiohttp.__version__})"
)
"""The ``User-Agent`` of every request."""

ACCEPT_JSON: Final = "application/json"
ACCEPT_METADATA_LIST: Final = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
"""``Accept`` of a metadata-only list (falls back to full objects if the server cannot)."""
ACCEPT_METADATA: Final = (
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
)
"""``Accept`` of a metadata-only watch or get."""

QueryParams = Mapping[str, "str | int | bool"]
"""Query parameters: booleans are sent as ``true``/``false``."""

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"
"""A decoded JSON document (what :meth:`Client.request` returns): objects are
``dict``, arrays ``list``; narrow it with ``isinstance`` before indexing."""

_ERROR_MESSAGE_CHARS: Final = 200


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")
    remainingItemCount: int | None = None


class _ListBody(msgspec.Struct):
    apiVersion: str = ""
    kind: str = ""
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[Any] | None = None


_LIST_DECODER: Final = msgspec.json.Decoder(_ListBody)
_ANY_DECODER: Final = msgspec.json.Decoder()
_encode: Final = msgspec.json.encode


def list_params(options: ListOptions, *, watch: bool = False) -> dict[str, str]:
    """The query parameters for ``options``: only the fields that are set.

    ``watch=True`` adds ``watch=1``. Selectors are sent as given.
    """
    params: dict[str, str] = {}
    if watch:
        params["watch"] = "1"
    if options.resource_version:
        params["resourceVersion"] = options.resource_version
    if options.resource_version_match:
        params["resourceVersionMatch"] = options.resource_version_match
    if options.limit is not None:
        params["limit"] = str(options.limit)
    if options.continue_:
        params["continue"] = options.continue_
    if options.label_selector:
        params["labelSelector"] = options.label_selector
    if options.field_selector:
        params["fieldSelector"] = options.field_selector
    if options.timeout_seconds is not None:
        params["timeoutSeconds"] = str(options.timeout_seconds)
    if options.allow_watch_bookmarks:
        params["allowWatchBookmarks"] = "true"
    if options.send_initial_events is not None:
        params["sendInitialEvents"] = "true" if options.send_initial_events else "false"
    return params


class _Transport:
    """One aiohttp session, for one client certificate, and its requests in flight."""

    __slots__ = ("active", "client_cert", "retired", "session")

    def __init__(self, session: aiohttp.ClientSession, client_cert: tuple[bytes, bytes] | None):
        self.session = session
        self.client_cert = client_cert
        self.active = 0
        self.retired = False


class Client:
    """An HTTP client for one Kubernetes API server (``ClientConfig``).

    Contracts:

    * **One event loop.** A Client belongs to the loop it is first used on
      (its session is created lazily there); using it from another loop raises
      ``RuntimeError``. It may be used by many tasks of that loop at once.
    * **Closing.** ``await client.close()`` (or ``async with Client(...)``)
      closes every connection; requests afterwards raise ``RuntimeError``.
    * **Credentials.** Every request calls ``config.auth.authorize()`` for its
      headers and client certificate; when the certificate changes, a new
      connection pool is made with it (streams on the old one run on). A 401
      calls ``config.auth.invalidate()`` once and repeats the request once
      (a watch only while it is being opened).
    * **TLS** is verified against ``ca_data`` (or the system store), with
      ``tls_server_name`` as SNI and the name checked, unless
      ``insecure_skip_tls_verify``. ``proxy_url`` (else ``HTTPS_PROXY``/
      ``HTTP_PROXY``/``NO_PROXY`` from the environment; never for loopback
      hosts) routes requests through a proxy. Redirects are not followed.
    * **Errors.** A non-2xx answer raises :func:`~kubereflector.errors.error_from_status`'s
      class for its ``Status`` body (``ApiError`` with the HTTP reason and the
      start of the body if it has none), naming the URL; a 2xx answer that does
      not decode raises :class:`~kubereflector.errors.DecodeError`. Network
      failures raise aiohttp's exceptions (``aiohttp.ClientError``,
      ``asyncio.TimeoutError``) unchanged.
    * **Ownership.** Decoded bodies, list items and watch objects are fresh
      ``dict``/``list`` trees that belong to the caller.

    ``timeout`` bounds a whole ordinary request (seconds, ``None``: no limit);
    ``connect_timeout`` bounds connecting (and waiting for a pooled
    connection), also for watches. Watch streams have no read timeout: the
    server ends them after ``timeoutSeconds``, and the Reflector's idle
    watchdog catches silent ones. ``max_connections`` caps the pool (``0``: no
    cap; every open watch holds a connection, so a cap below the number of
    watches would stall requests).
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
        max_connections: int = 0,
    ) -> None:
        self.config = config
        base = URL(config.server)
        if base.scheme not in ("http", "https") or not base.host:
            raise ValueError(f"server must be an http(s) URL with a host, got {_safe(base)!r}")
        if base.query_string or base.fragment:
            raise ValueError(f"server must not have a query or fragment: {_safe(base)!r}")
        self._prefix = str(base).rstrip("/")
        self._base = base
        self._proxy = _proxy_for(base, config.proxy_url)
        self._server_hostname = config.tls_server_name if base.scheme == "https" else None
        self._timeout = aiohttp.ClientTimeout(total=timeout, connect=connect_timeout)
        self._stream_timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout, sock_read=None
        )
        self._max_connections = max_connections
        self._current: _Transport | None = None
        self._retired: set[_Transport] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._discovery: Discovery | None = None

    # -- lifecycle --------------------------------------------------------------

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Close every connection (open watches end). Idempotent."""
        self._closed = True
        transports = list(self._retired)
        if self._current is not None:
            transports.append(self._current)
        self._current = None
        self._retired.clear()
        for transport in transports:
            await transport.session.close()

    @property
    def discovery(self) -> Discovery:
        """The Client's shared, cached :class:`~kubereflector.client.Discovery`."""
        if self._discovery is None:
            from .discovery import Discovery

            self._discovery = Discovery(self)
        return self._discovery

    @property
    def server(self) -> str:
        """The API server's base URL, without credentials."""
        return _safe(self._base)

    def url(self, path: str, params: QueryParams | None = None) -> URL:
        """The full URL for an absolute API ``path`` (``/api/v1/pods``) and query."""
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r}")
        url = URL(self._prefix + path)
        if params:
            url = url.update_query({k: _query_value(v) for k, v in params.items()})
        return url

    # -- generic REST -----------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: QueryParams | None = None,
        json: Any = None,
        content_type: str | None = None,
        accept: str | None = None,
    ) -> JsonValue:
        """Send a request and return its decoded JSON body (``None`` if empty).

        ``json`` is encoded with msgspec (``content_type`` defaults to
        ``application/json``). Raises the :mod:`~kubereflector.errors` classes
        for error answers and :class:`~kubereflector.errors.DecodeError` for an
        undecodable 2xx body.
        """
        url = self.url(path, params)
        body = None if json is None else _encode(json)
        data = await self._send(
            method, url, accept or ACCEPT_JSON, body, content_type or "application/json"
        )
        if not data.strip():
            return None
        try:
            decoded: JsonValue = _ANY_DECODER.decode(data)
        except msgspec.DecodeError as err:
            raise DecodeError(
                f"could not decode the response ({len(data)} bytes): {err}", url=_safe(url)
            ) from err
        return decoded

    async def _object(
        self, method: str, path: str, params: QueryParams | None, **kwargs: Any
    ) -> dict[str, Any]:
        """:meth:`request`, whose answer must be a JSON object (every Kubernetes
        object, list and Status is): raises :class:`~kubereflector.errors.DecodeError`
        for anything else, an empty body included."""
        body = await self.request(method, path, params=params, **kwargs)
        if not isinstance(body, dict):
            what = "an empty body" if body is None else f"a JSON {type(body).__name__}"
            raise DecodeError(
                f"expected a JSON object in answer to {method}, got {what}",
                url=_safe(self.url(path, params)),
            )
        return body

    async def get(self, path: str, *, params: QueryParams | None = None) -> dict[str, Any]:
        """``GET path``: the decoded object (a new ``dict``, the caller's own).
        Raises :class:`~kubereflector.errors.DecodeError` unless the answer is a
        JSON object."""
        return await self._object("GET", path, params)

    async def create(
        self, path: str, body: Any, *, params: QueryParams | None = None
    ) -> dict[str, Any]:
        """``POST path`` with ``body`` (a collection's path): the created object."""
        return await self._object("POST", path, params, json=body)

    async def update(
        self, path: str, body: Any, *, params: QueryParams | None = None
    ) -> dict[str, Any]:
        """``PUT path`` with ``body`` (an object's path): the replaced object."""
        return await self._object("PUT", path, params, json=body)

    async def patch(
        self,
        path: str,
        body: Any,
        *,
        content_type: str = "application/merge-patch+json",
        params: QueryParams | None = None,
    ) -> dict[str, Any]:
        """``PATCH path``; a JSON merge patch unless ``content_type`` says otherwise
        (``application/json-patch+json``, ``application/strategic-merge-patch+json``,
        ``application/apply-patch+yaml`` with ``params={"fieldManager": ...}``)."""
        return await self._object("PATCH", path, params, json=body, content_type=content_type)

    async def delete(
        self, path: str, *, body: Any = None, params: QueryParams | None = None
    ) -> dict[str, Any]:
        """``DELETE path`` (``body``: ``DeleteOptions``): the server's answer (the
        object, or a ``Status``)."""
        return await self._object("DELETE", path, params, json=body)

    # -- list and watch ---------------------------------------------------------

    async def list(
        self, path: str, options: ListOptions, *, metadata_only: bool = False
    ) -> ListResult:
        """One page of a list (``GET path`` with ``options`` as its query).

        Items that lack ``kind``/``apiVersion`` (the API server leaves them out
        in typed lists) get the list's, so listed and watched objects look
        alike. ``metadata_only`` asks for ``PartialObjectMetadataList``.
        """
        url = self.url(path, list_params(options))
        data = await self._send(
            "GET", url, ACCEPT_METADATA_LIST if metadata_only else ACCEPT_JSON, None, ""
        )
        try:
            body = _LIST_DECODER.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            raise DecodeError(
                f"could not decode the list response ({len(data)} bytes): {err}", url=_safe(url)
            ) from err
        items = body.items if body.items is not None else []
        if items and body.kind.endswith("List"):
            item_kind = body.kind[:-4]
            api_version = body.apiVersion
            for item in items:
                if type(item) is dict and "kind" not in item:
                    item["kind"] = item_kind
                    item.setdefault("apiVersion", api_version)
        meta = body.metadata
        return ListResult(items, meta.resourceVersion, meta.continue_, meta.remainingItemCount)

    def watch(self, path: str, options: ListOptions, *, metadata_only: bool = False) -> WatchStream:
        """A watch of ``path`` (``watch=1`` and ``options`` as its query).

        Entering the returned context opens the stream (raising the error
        classes for an error answer) and gives an async iterator of
        :class:`~kubereflector.WatchEvent`; leaving it closes the response.
        An ``ERROR`` event arrives as ``WatchEvent("ERROR", status_dict)`` with
        the Status untouched. A line that does not decode, or a stream cut
        inside a line, raises :class:`~kubereflector.errors.DecodeError` from
        the iterator after every complete event before it.
        """
        url = self.url(path, list_params(options, watch=True))
        return _WatchContext(self, url, ACCEPT_METADATA if metadata_only else ACCEPT_JSON)

    # -- internals --------------------------------------------------------------

    async def _send(
        self, method: str, url: URL, accept: str, body: bytes | None, content_type: str
    ) -> bytes:
        """Send an ordinary request; return the body of a 2xx answer, raise otherwise."""
        transport, resp = await self._open(method, url, accept, body, content_type, stream=False)
        try:
            try:
                data = await resp.read()
            except aiohttp.ClientPayloadError as err:
                raise DecodeError(f"truncated response body: {err}", url=_safe(url)) from err
            if not 200 <= resp.status < 300:
                raise _error_from_body(resp, data, url)
            return data
        finally:
            resp.release()
            await self._release(transport)

    async def _open(
        self,
        method: str,
        url: URL,
        accept: str,
        body: bytes | None,
        content_type: str,
        *,
        stream: bool,
    ) -> tuple[_Transport, aiohttp.ClientResponse]:
        """Send the request (again once after a 401); the caller releases both."""
        auth = self.config.auth
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        for attempt in (0, 1):
            info = await auth.authorize()
            transport = await self._transport(info.client_cert)
            transport.active += 1
            try:
                resp = await transport.session.request(
                    method,
                    url,
                    headers={**headers, **info.headers},
                    data=body,
                    proxy=self._proxy,
                    server_hostname=self._server_hostname,
                    allow_redirects=False,
                    timeout=self._stream_timeout if stream else self._timeout,
                )
            except BaseException:
                await self._release(transport)
                raise
            if resp.status == 401 and attempt == 0:
                logger.debug("401 from %s: refreshing credentials and retrying once", _safe(url))
                try:
                    await resp.read()
                finally:
                    resp.release()
                    await self._release(transport)
                auth.invalidate()
                continue
            return transport, resp
        raise AssertionError("unreachable")  # pragma: no cover

    async def _transport(self, client_cert: tuple[bytes, bytes] | None) -> _Transport:
        if self._closed:
            raise RuntimeError("the Client is closed")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError("a Client belongs to the event loop it was first used on")
        current = self._current
        if current is not None and current.client_cert == client_cert:
            return current
        transport = _Transport(self._new_session(client_cert), client_cert)
        self._current = transport
        if current is not None:
            logger.debug("client certificate changed: new connection pool for %s", self.server)
            current.retired = True
            if current.active:
                self._retired.add(current)
            else:
                await current.session.close()
        return transport

    async def _release(self, transport: _Transport) -> None:
        transport.active -= 1
        if transport.retired and not transport.active and transport in self._retired:
            self._retired.discard(transport)
            await transport.session.close()

    def _new_session(self, client_cert: tuple[bytes, bytes] | None) -> aiohttp.ClientSession:
        ssl_context: ssl.SSLContext | bool = (
            _ssl_context(self.config, client_cert) if self._base.scheme == "https" else False
        )
        return aiohttp.ClientSession(
            connector=new_connector(ssl_context, self._max_connections),
            headers={"User-Agent": USER_AGENT},
            timeout=self._timeout,
            trust_env=False,  # proxies are resolved once, above; no .netrc credentials
            read_bufsize=256 * 1024,
        )

    def __repr__(self) -> str:
        return f"<Client {self.server}{' closed' if self._closed else ''}>"


class _WatchContext(contextlib.AbstractAsyncContextManager[AsyncIterator[WatchEvent]]):
    """What :meth:`Client.watch` returns; single use."""

    __slots__ = ("_accept", "_client", "_events", "_response", "_transport", "_url")

    def __init__(self, client: Client, url: URL, accept: str) -> None:
        self._client = client
        self._url = url
        self._accept = accept
        self._transport: _Transport | None = None
        self._response: aiohttp.ClientResponse | None = None
        self._events: AsyncIterator[WatchEvent] | None = None

    async def __aenter__(self) -> AsyncIterator[WatchEvent]:
        if self._transport is not None:
            raise RuntimeError("a watch stream can be entered only once")
        url = self._url
        transport, resp = await self._client._open("GET", url, self._accept, None, "", stream=True)
        self._transport = transport
        self._response = resp
        safe_url = _safe(url)
        try:
            if resp.status != 200:
                raise _error_from_body(resp, await resp.read(), url)
        except BaseException:
            await self._finish()
            raise
        content = resp.content

        async def read() -> bytes:
            try:
                return await content.readany()
            except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as err:
                raise TruncatedStreamError(f"truncated watch stream: {err}", url=safe_url) from err

        self._events = decode_watch_stream(read, safe_url)
        return self._events

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._finish()

    async def _finish(self) -> None:
        events, self._events = self._events, None
        resp, self._response = self._response, None
        transport = self._transport
        try:
            if events is not None:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()
        finally:
            if resp is not None:
                if resp.content.at_eof():
                    resp.release()
                else:
                    resp.close()  # mid-stream: the connection cannot be reused
                if transport is not None:
                    await self._client._release(transport)


# -- errors ---------------------------------------------------------------------


def _error_from_body(resp: aiohttp.ClientResponse, body: bytes, url: URL) -> ApiError:
    """The error for a non-2xx answer: its Status, else its HTTP status and text."""
    retry_after = _parse_retry_after(resp.headers.get("Retry-After"))
    status: Any = None
    if body:
        try:
            status = _ANY_DECODER.decode(body)
        except msgspec.DecodeError:
            status = None
    if not (
        isinstance(status, dict)
        and (status.get("kind") == "Status" or "code" in status or "reason" in status)
    ):
        text = body[: _ERROR_MESSAGE_CHARS * 4].decode("utf-8", "replace")
        status = {
            "code": resp.status,
            "reason": resp.reason or "",
            "message": " ".join(text[:_ERROR_MESSAGE_CHARS].split()),
        }
    return error_from_status(
        status, http_status=resp.status, url=_safe(url), retry_after=retry_after
    )


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


# -- helpers --------------------------------------------------------------------


def _safe(url: URL) -> str:
    """``url`` without user info, for messages."""
    return str(url.with_user(None)) if url.user or url.password else str(url)


def _query_value(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _proxy_for(base: URL, explicit: str | None) -> str | None:
    """``proxy_url``, else the environment's proxy for ``base`` (as kubectl does)."""
    if explicit:
        return explicit
    host = base.host or ""
    if _is_loopback(host):
        return None
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(base.scheme)
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    return proxy


def _ssl_context(config: ClientConfig, client_cert: tuple[bytes, bytes] | None) -> ssl.SSLContext:
    """A client TLS context: verification on unless ``insecure_skip_tls_verify``."""
    if config.insecure_skip_tls_verify:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif config.ca_data:
        ca = config.ca_data
        try:
            if ca.lstrip().startswith(b"-----"):
                context = ssl.create_default_context(cadata=ca.decode("ascii", "replace"))
            else:
                context = ssl.create_default_context(cadata=ca)  # DER
        except (ssl.SSLError, ValueError) as err:
            raise ValueError(f"the certificate-authority data cannot be loaded: {err}") from None
    else:
        context = ssl.create_default_context()
    if client_cert is not None:
        _load_client_cert(context, *client_cert)
    return context


def _load_client_cert(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Load a PEM certificate and key via a private (0600) file deleted at once."""
    shm = "/dev/shm"
    directory = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    fd, path = tempfile.mkstemp(prefix="kubereflector-", suffix=".pem", dir=directory)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(cert_pem)
            if not cert_pem.endswith(b"\n"):
                file.write(b"\n")
            file.write(key_pem)
        context.load_cert_chain(path)
    except (ssl.SSLError, ValueError) as err:
        raise ValueError(f"the client certificate and key cannot be loaded: {err}") from None
    finally:
        os.unlink(path)
