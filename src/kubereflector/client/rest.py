"""The REST client: HTTP requests to one API server, with its errors mapped.

:class:`Client` wraps one aiohttp session (connection pooling, TLS verified by
default) and offers a small generic REST surface (``request``, ``get``,
``create``, ``update``, ``patch``, ``delete``), a paged ``list`` and a
streaming ``watch``, the two halves of the ListerWatcher contract;
``client.resource("deploy", namespace="shop")`` gives the per-resource
:class:`~kubereflector.client.ResourceClient` built on them. Failures
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
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any, Final, Protocol, TypeAlias

import aiohttp
import msgspec
from typing_extensions import overload  # get_overloads() sees it on Python 3.10 too
from yarl import URL

from .._version import __version__
from ..cache.compact import ObjectMode
from ..cache.keys import KubeObject, ModelT
from ..cache.listwatch import ListOptions, ListResult, WatchEvent, WatchStream
from ..errors import ApiError, DecodeError, TruncatedStreamError, error_from_status
from ._compact_list import (
    ACCEPT_PROTOBUF,
    MAGIC,
    PROTOBUF_ERRORS,
    CompactListBody,
    ListMeta,
    RawListBody,
    compact_items,
    decode_body,
    decode_compact_list,
    has_protobuf,
    not_an_object,
    protobuf_list,
)
from ._connector import new_connector
from ._lines import BATCH_BYTES, MAX_LINE_BYTES, WatchEventStream, decode_watch_stream
from ._redact import Redactor, safe_url
from ._status import is_status, status_error
from .config import ClientConfig, ConfigError
from .discovery import Discovery, ResourceInfo
from .paths import validate_api_path
from .resource import ResourceClient, WriteObserver

__all__ = [
    "ACCEPT_JSON",
    "ACCEPT_METADATA",
    "ACCEPT_METADATA_LIST",
    "MAX_BODY_BYTES",
    "USER_AGENT",
    "Client",
    "JsonValue",
    "QueryParams",
    "RequestMetrics",
    "list_params",
]

logger = logging.getLogger("kubereflector.client.rest")

USER_AGENT: Final = (
    f"kubereflector/{__version__} "
    f"(python {sys.version_info.major}.{sys.version_info.minor}; aiohttp {aiohttp.__version__})"
)
"""The ``User-Agent`` of every request."""

ACCEPT_JSON: Final = "application/json"
"""``Accept`` of every request but the metadata-only ones: JSON."""
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
_ERROR_SCAN_BYTES: Final = 64 * 1024
MAX_BODY_BYTES: Final = 1024 * 1024 * 1024
"""The default limit of a response body other than a watch stream (see Client)."""
_CLOSE_WAIT: Final = 1.0
"""Seconds a watch closed mid-stream waits for its connection to close."""


class _ListBody(msgspec.Struct):
    apiVersion: str = ""
    kind: str = ""
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[Any] | msgspec.UnsetType | None = msgspec.UNSET


_LIST_DECODER: Final = msgspec.json.Decoder(_ListBody)
_DECODE_ERRORS: Final = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)
"""What decoding raises for bad JSON: msgspec's errors, and RecursionError for deep nesting."""
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
    if options.shard_selector:
        params["shardSelector"] = options.shard_selector
    return params


class RequestMetrics(Protocol):
    """Receives one observation per HTTP request a :class:`Client` sends (client-go's
    ``tools/metrics`` hooks): the method, the answer's status code (``"<error>"``
    when no answer came), the server's host and the seconds until the answer's
    headers. Called on the Client's event loop: it must be quick and must not
    raise. :meth:`kubereflector.metrics.Metrics.rest_client` makes one."""

    def observe(self, method: str, code: str, host: str, seconds: float) -> None:
        """One request: its HTTP ``method``, the status ``code`` (``"<error>"`` when no answer
        came), the server's ``host`` and the ``seconds`` until the answer's headers."""


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
      not decode, or an answer that is not valid HTTP, raises
      :class:`~kubereflector.errors.DecodeError`. Network failures raise
      aiohttp's connection errors (``aiohttp.ClientConnectionError``,
      ``asyncio.TimeoutError``) unchanged.
    * **Secrets.** The credentials of every request (token, basic-auth
      password, a plugin's token, the client key) are replaced by
      ``<redacted>`` in everything a server sent that goes into an error: a
      Status, an error page, an HTTP reason, a watch ERROR event, an
      aiohttp message quoting the answer.
    * **Ownership.** Decoded bodies, list items and watch objects are fresh
      ``dict``/``list`` trees that belong to the caller.

    ``timeout`` bounds a whole ordinary request (seconds, ``None``: no limit);
    ``connect_timeout`` bounds connecting (and waiting for a pooled
    connection), also for watches. Watch streams have no read timeout: the
    server ends them after ``timeoutSeconds``, and the Reflector's idle
    watchdog catches silent ones. ``max_connections`` caps the pool (``0``: no
    cap; every open watch holds a connection, so a cap below the number of
    watches would stall requests).

    **Size limits**, so that memory stays bounded whatever a server sends:
    ``max_event_bytes`` bounds one watch event (a line of the stream; default
    64 MiB, far above etcd's 1.5 MiB object limit; at least 4 KiB) and
    ``max_body_bytes`` any other response body (default 1 GiB: a list served
    whole from the watch cache holds every object of the resource, and a
    150,000-pod cluster's is most of that). Past a limit the response counts
    as broken: :class:`~kubereflector.errors.DecodeError` naming the URL and
    the limit (a watch delivers every event before it first).
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
        max_connections: int = 0,
        max_event_bytes: int = MAX_LINE_BYTES,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        if max_event_bytes < BATCH_BYTES or max_body_bytes <= 0:
            raise ValueError(
                f"max_event_bytes must be at least {BATCH_BYTES} and max_body_bytes positive "
                f"(got {max_event_bytes} and {max_body_bytes})"
            )
        self._max_event_bytes = max_event_bytes
        self._max_body_bytes = max_body_bytes
        self._redactor = Redactor()
        self.config = config
        base = URL(config.server)  # validated by ClientConfig: http(s), a host, no credentials
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
        self.request_metrics: RequestMetrics | None = None
        """Where each request is reported (``None``: nowhere); set it at any time."""
        self.write_observers: list[WriteObserver] = []
        """Told of each write the server accepted through this Client's
        :class:`~kubereflector.client.ResourceClient` s (a Manager's read-your-own-writes
        ledger); add and remove at any time."""

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
        """Whether :meth:`close` was called (a closed client sends nothing more)."""
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
            self._discovery = Discovery(self)
        return self._discovery

    @overload
    def resource(
        self, resource: type[ModelT], *, namespace: str | None = None
    ) -> ResourceClient[ModelT]: ...

    @overload
    def resource(
        self, resource: str | ResourceInfo, *, namespace: str | None = None
    ) -> ResourceClient[KubeObject]: ...

    def resource(
        self, resource: str | ResourceInfo | type[ModelT], *, namespace: str | None = None
    ) -> ResourceClient[Any]:
        """A :class:`~kubereflector.client.ResourceClient` for ``resource`` in
        ``namespace``: get, list, watch, create, update, patch, apply, delete.

        ``resource`` is a model class (``client.resource(Pod)`` is a
        ``ResourceClient[Pod]``, resolved here from the model's registration), or
        any name discovery resolves or a ResourceInfo (a
        ``ResourceClient[KubeObject]``; a name is resolved on its first call).
        Makes no request. Raises ``ValueError`` for an invalid namespace, or a
        namespace given with a cluster-scoped model, ``LookupError`` naming a
        class that is not a registered model, and ``TypeError`` for anything else."""
        return ResourceClient(self, resource, namespace)

    @property
    def server(self) -> str:
        """The API server's base URL, without credentials."""
        return safe_url(self._base)

    def url(self, path: str, params: QueryParams | None = None) -> URL:
        """The full URL for an absolute API ``path`` (``/api/v1/pods``) and query.

        ``path`` is only ever a path: it is refused (``ValueError`` naming it)
        when it carries a query or fragment (pass ``params``), an empty, ``.``
        or ``..`` segment (also percent-encoded: the URL library would resolve
        it), a percent-encoded ``/``, or whitespace and control characters, so
        that no data built into a path can reach another resource.
        """
        url = URL(self._prefix + validate_api_path(path))
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
        ``application/json``). An ``accept`` of
        :data:`kubereflector.protobuf.CONTENT_TYPE` asks for the server's
        protobuf, decoded into what its JSON would have decoded to (the built-in
        kinds). Raises the :mod:`~kubereflector.errors` classes for error
        answers and :class:`~kubereflector.errors.DecodeError` for an
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
            decoded: JsonValue = decode_body(data)
        except (*_DECODE_ERRORS, *PROTOBUF_ERRORS) as err:
            raise DecodeError(
                f"could not decode the response ({len(data)} bytes): {err}", url=safe_url(url)
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
                url=safe_url(self.url(path, params)),
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
        self,
        path: str,
        options: ListOptions,
        *,
        metadata_only: bool = False,
        object_mode: ObjectMode = "dict",
    ) -> ListResult:
        """One page of a list (``GET path`` with ``options`` as its query).

        Items that lack ``kind``/``apiVersion`` (the API server leaves them out
        in typed lists) get the list's, so listed and watched objects look
        alike. ``metadata_only`` asks for ``PartialObjectMetadataList``.
        ``object_mode="compact"`` decodes the items into
        :class:`~kubereflector.CompactObject` s (``"dict"``: plain dicts);
        ``"compact-protobuf"`` too, and asks for the server's protobuf for the
        built-in kinds :mod:`kubereflector.protobuf` knows (JSON when the server
        answers it, as kube-apiserver does for custom resources; a sharded list
        stays JSON).

        Only a real list is returned: a JSON object with ``items``, an array
        of objects (``null`` counts as empty when the kind ends in ``List``, as
        Go servers encode an empty slice), and a ``kind`` ending in ``List``
        when it has one. A ``Status`` in a 2xx answer raises its
        :func:`~kubereflector.errors.error_from_status` class (a Failure
        without an error code as a 500); anything else raises
        :class:`~kubereflector.errors.DecodeError` naming the URL. So a server
        that answers 200 with a Failure never empties a cache.
        """
        url = self.url(path, list_params(options))
        if metadata_only:
            accept = ACCEPT_METADATA_LIST
        elif (
            object_mode == "compact-protobuf" and not options.shard_selector and has_protobuf(path)
        ):
            # (A 1.28 ListMeta has no shardInfo in protobuf: a sharded list stays JSON.)
            accept = ACCEPT_PROTOBUF
        else:
            accept = ACCEPT_JSON
        data = await self._send("GET", url, accept, None, "")
        redactor = self._redactor
        if data[:4] == MAGIC and accept == ACCEPT_PROTOBUF:
            try:
                return protobuf_list(data)
            except PROTOBUF_ERRORS as err:
                problem = f"could not decode the protobuf list response ({len(data)} bytes): {err}"
            raise _not_a_list(data, url, problem, redactor)
        try:
            if object_mode != "dict":
                body: _ListBody | CompactListBody | RawListBody = decode_compact_list(data)
            else:
                body = _LIST_DECODER.decode(data)
        except _DECODE_ERRORS as err:
            problem = f"could not decode the list response ({len(data)} bytes): {err}"
            raise _not_a_list(data, url, problem, redactor) from err
        kind = body.kind
        items = body.items
        if kind and not kind.endswith("List"):
            problem = f"the list response is a {redactor.text(kind)[:64]!r}, not a list"
            raise _not_a_list(data, url, problem, redactor)
        if items is None and kind:
            items = []
        elif type(items) is not list:
            raise _not_a_list(data, url, "the list response has no items array", redactor)
        if not isinstance(body, _ListBody):
            items = compact_items(body, items, url)
        else:
            item_kind = kind[:-4]
            api_version = body.apiVersion
            for index, item in enumerate(items):
                if type(item) is not dict:
                    raise not_an_object(index, item, url)
                if item_kind and "kind" not in item:
                    item["kind"] = item_kind
                    item.setdefault("apiVersion", api_version)
        meta = body.metadata
        shard_info = meta.shardInfo.selector if meta.shardInfo is not None else None
        return ListResult(
            items, meta.resourceVersion, meta.continue_, meta.remainingItemCount, shard_info
        )

    def watch(
        self,
        path: str,
        options: ListOptions,
        *,
        metadata_only: bool = False,
        object_mode: ObjectMode = "dict",
        keep: Callable[[Any], bool] | None = None,
    ) -> WatchStream:
        """A watch of ``path`` (``watch=1`` and ``options`` as its query).

        Entering the returned context opens the stream (raising the error
        classes for an error answer) and gives an async iterator of
        :class:`~kubereflector.WatchEvent`; leaving it closes the response.
        An ``ERROR`` event arrives as ``WatchEvent("ERROR", status_dict)`` with
        the Status untouched. A line that does not decode, or a stream cut
        inside a line, raises :class:`~kubereflector.errors.DecodeError` from
        the iterator after every complete event before it.
        ``object_mode="compact"`` decodes the objects (``ERROR`` events aside)
        into :class:`~kubereflector.CompactObject` s. ``keep``: drop the added,
        modified and deleted events whose object it refuses as they are decoded
        (a shard's filter).
        """
        url = self.url(path, list_params(options, watch=True))
        accept = ACCEPT_METADATA if metadata_only else ACCEPT_JSON
        return _WatchContext(self, url, accept, object_mode, keep)

    # -- internals --------------------------------------------------------------

    async def _send(
        self, method: str, url: URL, accept: str, body: bytes | None, content_type: str
    ) -> bytes:
        """Send an ordinary request; return the body of a 2xx answer, raise otherwise."""
        transport, resp = await self._open(method, url, accept, body, content_type, stream=False)
        try:
            data = await self._read_body(resp, url)
            if not 200 <= resp.status < 300:
                raise _error_from_body(resp, data, url, self._redactor)
            return data
        finally:
            resp.release()
            await self._release(transport)

    async def _read_body(self, resp: aiohttp.ClientResponse, url: URL) -> bytes:
        """The whole body, unless it is longer than ``max_body_bytes`` (DecodeError)."""
        limit = self._max_body_bytes
        if (resp.content_length or 0) > limit:
            raise _too_long(limit, url)
        chunks: list[bytes] = []
        size = 0
        try:
            while chunk := await resp.content.readany():
                size += len(chunk)
                if size > limit:
                    raise _too_long(limit, url)
                chunks.append(chunk)
        except aiohttp.ClientPayloadError as err:  # its message may quote the server
            message = f"truncated response body: {self._redactor.text(str(err))}"
        else:
            return b"".join(chunks)
        # Raised outside the except block: nothing that saw the answer is chained to it.
        raise DecodeError(message, url=safe_url(url))

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
            self._redactor.learn(info)
            transport = await self._transport(info.client_cert)
            transport.active += 1
            invalid: str | None = None
            metrics = self.request_metrics
            started = time.perf_counter() if metrics is not None else 0.0
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
            except aiohttp.ClientResponseError as err:
                # Not valid HTTP (a bad status line or header). aiohttp quotes the
                # server's bytes in the message and our request headers in its repr:
                # raised below, outside this block, so that nothing chains it.
                invalid = " ".join(self._redactor.text(err.message).split())
            except BaseException as err:
                if metrics is not None and not isinstance(err, asyncio.CancelledError):
                    metrics.observe(
                        method, "<error>", url.host or "", time.perf_counter() - started
                    )
                await self._release(transport)
                raise
            if invalid is not None:
                if metrics is not None:
                    metrics.observe(
                        method, "<error>", url.host or "", time.perf_counter() - started
                    )
                await self._release(transport)
                raise DecodeError(f"the answer is not valid HTTP: {invalid}", url=safe_url(url))
            if metrics is not None:
                metrics.observe(
                    method, str(resp.status), url.host or "", time.perf_counter() - started
                )
            if resp.status == 401 and attempt == 0:
                logger.debug("401 from %s: refreshing credentials and retrying once", safe_url(url))
                resp.close()  # its body is not needed (and could be endless): drop it
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

    __slots__ = (
        "_accept",
        "_client",
        "_events",
        "_keep",
        "_mode",
        "_response",
        "_transport",
        "_url",
    )

    def __init__(
        self,
        client: Client,
        url: URL,
        accept: str,
        mode: ObjectMode,
        keep: Callable[[Any], bool] | None = None,
    ) -> None:
        self._client = client
        self._url = url
        self._accept = accept
        self._mode: ObjectMode = mode
        self._keep = keep
        self._transport: _Transport | None = None
        self._response: aiohttp.ClientResponse | None = None
        self._events: WatchEventStream | None = None

    async def __aenter__(self) -> AsyncIterator[WatchEvent]:
        if self._transport is not None:
            raise RuntimeError("a watch stream can be entered only once")
        url = self._url
        transport, resp = await self._client._open("GET", url, self._accept, None, "", stream=True)
        self._transport = transport
        self._response = resp
        shown_url = safe_url(url)
        try:
            if resp.status != 200:
                body = await self._client._read_body(resp, url)
                raise _error_from_body(resp, body, url, self._client._redactor)
        except BaseException:
            await self._finish()
            raise
        content = resp.content

        redact = self._client._redactor.text

        async def read() -> bytes:
            try:
                return await content.readany()
            except aiohttp.ClientConnectionError as err:
                raise TruncatedStreamError(f"truncated watch stream: {err}", url=shown_url) from err
            except aiohttp.ClientPayloadError as err:  # its message may quote the server
                message = f"truncated watch stream: {redact(str(err))}"
            raise TruncatedStreamError(message, url=shown_url)  # outside: nothing chained

        self._events = decode_watch_stream(
            read,
            shown_url,
            max_line=self._client._max_event_bytes,
            redact=self._client._redactor.value,
            object_mode=self._mode,
            keep=self._keep,
        )
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
                await events.aclose()
        finally:
            if resp is not None:
                if resp.content.at_eof():
                    resp.release()
                else:
                    closed = _closed_future(resp)
                    resp.close()  # mid-stream: the connection cannot be reused
                    if closed is not None:
                        # Let a TLS connection finish its shutdown before the loop may
                        # end (else its socket is left unclosed); bounded, for dead peers.
                        await asyncio.wait({closed}, timeout=_CLOSE_WAIT)
                if transport is not None:
                    await self._client._release(transport)


def _closed_future(resp: aiohttp.ClientResponse) -> asyncio.Future[None] | None:
    """The future aiohttp resolves when ``resp``'s connection is lost, if it has one
    (its exception, a shutdown the server cut short, is retrieved and dropped)."""
    connection = resp.connection
    closed = getattr(connection.protocol, "closed", None) if connection is not None else None
    if not isinstance(closed, asyncio.Future):
        return None
    closed.add_done_callback(_drop_exception)
    return closed


def _drop_exception(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


# -- errors ---------------------------------------------------------------------


def _error_from_body(
    resp: aiohttp.ClientResponse, body: bytes, url: URL, redactor: Redactor
) -> ApiError:
    """The error for a non-2xx answer: its Status, else its HTTP status and the start
    of its text; the client's credentials redacted from all of it."""
    retry_after = _parse_retry_after(resp.headers.get("Retry-After"))
    status: Any = None
    if body:
        try:
            status = decode_body(body)
        except (*_DECODE_ERRORS, *PROTOBUF_ERRORS):
            status = None
    if not is_status(status):
        # Redacted before it is cut short, so that no part of a credential survives.
        text = redactor.text(body[:_ERROR_SCAN_BYTES].decode("utf-8", "replace"))
        status = {
            "code": resp.status,
            "reason": resp.reason or "",
            "message": " ".join(text.split())[:_ERROR_MESSAGE_CHARS],
        }
    return error_from_status(
        redactor.value(status), http_status=resp.status, url=safe_url(url), retry_after=retry_after
    )


def _not_a_list(data: bytes, url: URL, problem: str, redactor: Redactor) -> ApiError:
    """The error for a 2xx list answer that is not a list: a Status' own error,
    else a DecodeError saying ``problem``."""
    status: Any = None
    with contextlib.suppress(*_DECODE_ERRORS, *PROTOBUF_ERRORS):
        status = decode_body(data)
    if isinstance(status, dict) and status.get("kind") == "Status":
        return status_error(redactor.value(status), safe_url(url))
    return DecodeError(problem, url=safe_url(url))


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


def _too_long(limit: int, url: URL) -> DecodeError:
    """The error of a response body longer than ``max_body_bytes``."""
    return DecodeError(
        f"response body longer than the limit of {limit} bytes (max_body_bytes): "
        "treating the response as broken",
        url=safe_url(url),
    )


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
            raise ConfigError(f"the certificate-authority data cannot be loaded: {err}") from None
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
        raise ConfigError(f"the client certificate and key cannot be loaded: {err}") from None
    finally:
        os.unlink(path)
