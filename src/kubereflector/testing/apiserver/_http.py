"""The emulator's HTTP side: routing, content negotiation, encoding, watch streams, faults.

Private to :mod:`kubereflector.testing.apiserver`. Everything runs on the event
loop that serves the emulator; the store is only touched between awaits.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec
import yaml
from aiohttp import web

from ...cache.listwatch import INITIAL_EVENTS_END_ANNOTATION
from ...clock import Clock
from ...errors import failure_status
from ...selectors import FieldSelector
from ._discovery import (
    AGGREGATED_V2,
    EMULATED_VERSION,
    aggregated_discovery,
    api_group,
    api_group_list,
    api_resource_list,
    api_versions,
)
from ._openapi import check_fields, openapi_response
from ._queries import Query, matching, parse_bool, parse_query
from ._records import ENCODER, Bucket, Event, Record, decode, event_line
from ._resources import ServedResource
from ._statuses import StatusError, bad_request, method_not_allowed, path_not_found
from ._store import Store, WriteRequest
from ._tables import table_columns, table_row
from ._timestamps import wall_now
from ._validation import validate_options
from ._watch_timer import run_watch_timer

log = logging.getLogger("kubereflector.testing.apiserver")

ADMIN_PATH: Final = "/_emulator/faults"
_PUBLIC_PATHS: Final = frozenset({"/healthz", "/livez", "/readyz", "/version"})
_HEALTH_PREFIXES: Final = ("/healthz/", "/livez/", "/readyz/")
_JSON: Final = "application/json"
_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_APPLY: Final = "application/apply-patch+yaml"
_PATCH_TYPES: Final = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    _APPLY: "apply",
}
_YAML_TYPES: Final = ("application/yaml", "application/x-yaml", _APPLY)
_MANAGER_MAX: Final = 128
_FAULT_REASONS: Final = {
    400: ("BadRequest", "injected fault: bad request"),
    401: ("Unauthorized", "Unauthorized"),
    403: ("Forbidden", "injected fault: forbidden"),
    404: ("NotFound", "injected fault: the server could not find the requested resource"),
    409: ("Conflict", "injected fault: conflict"),
    410: ("Expired", "injected fault: too old resource version"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: injected fault"),
    503: (
        "ServiceUnavailable",
        "injected fault: the server is currently unable to handle the request",
    ),
    504: ("Timeout", "injected fault: the server was unable to respond in time"),
}


@dataclass(slots=True)
class Faults:
    """Injected failures, shared by the Python API and the admin endpoint."""

    fail_count: int = 0
    fail_status: int = 500
    fail_retry_after: float | None = None
    fail_reason: str | None = None
    slow_delay: float | None = None
    corrupt_count: int = 0
    corrupt_value: Any = None

    def corrupt_resource_versions(self, count: int, value: Any) -> None:
        if count < 0:
            raise ValueError(f"count must be >= 0 (got {count})")
        ENCODER.encode(value)  # raises for what JSON cannot carry
        self.corrupt_count = count
        self.corrupt_value = value

    def corrupt(self, lines: list[bytes]) -> list[bytes]:
        """``lines`` (watch events), the first ``corrupt_count`` of them with
        ``corrupt_value`` as their ``metadata.resourceVersion``."""
        out = []
        for line in lines:
            if self.corrupt_count <= 0:
                out.append(line)
                continue
            self.corrupt_count -= 1
            event = decode(line)
            event["object"].setdefault("metadata", {})["resourceVersion"] = self.corrupt_value
            out.append(ENCODER.encode(event) + b"\n")
        return out

    def fail_next(
        self, count: int, status: int, retry_after: float | None, reason: str | None
    ) -> None:
        if count < 0:
            raise ValueError(f"count must be >= 0 (got {count})")
        if not 400 <= status <= 599:
            raise ValueError(f"status must be an HTTP error code (got {status})")
        if retry_after is not None and retry_after < 0:
            raise ValueError(f"retry_after must be >= 0 (got {retry_after})")
        self.fail_count = count
        self.fail_status = status
        self.fail_retry_after = retry_after
        self.fail_reason = reason

    def take_failure(self) -> dict[str, Any] | None:
        if self.fail_count <= 0:
            return None
        self.fail_count -= 1
        code = self.fail_status
        default_reason, message = _FAULT_REASONS.get(code, ("InternalError", "injected fault"))
        details: dict[str, Any] | None = None
        retry_after = self.fail_retry_after
        if retry_after is None and code == 429:
            retry_after = 1
        if retry_after is not None:
            details = {"retryAfterSeconds": math.ceil(retry_after)}
        return failure_status(code, self.fail_reason or default_reason, message, details)


# -- content negotiation ----------------------------------------------------------------------


def _media_ranges(header: str) -> list[tuple[str, dict[str, str]]]:
    ranges: list[tuple[str, dict[str, str]]] = []
    for part in header.split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        params: dict[str, str] = {}
        for piece in pieces[1:]:
            key, _, value = piece.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        ranges.append((pieces[0].lower(), params))
    return ranges or [("*/*", {})]


def negotiate(header: str, target: str) -> str | None:
    """``"json"``, ``"meta"`` (PartialObjectMetadata) or ``"table"`` for a request whose
    answer is an ``target`` (``"object"``, ``"list"`` or ``"watch"``); ``None``: 406."""
    for media_type, params in _media_ranges(header):
        if media_type not in (_JSON, "application/*", "*/*"):
            continue
        as_ = params.get("as")
        if not as_:
            return "json"
        if params.get("g") != "meta.k8s.io" or params.get("v") != "v1":
            continue
        if as_ == "Table":
            return "table"
        if as_ == "PartialObjectMetadata" and target in ("object", "watch"):
            return "meta"
        if as_ == "PartialObjectMetadataList" and target == "list":
            return "meta"
    return None


def wants_aggregated(header: str) -> bool:
    for media_type, params in _media_ranges(header):
        if media_type not in (_JSON, "application/*", "*/*"):
            continue
        if (
            params.get("as") == "APIGroupDiscoveryList"
            and params.get("g") == "apidiscovery.k8s.io"
            and params.get("v") == "v2"
        ):
            return True
        if not params.get("as"):
            return False
    return False


# -- responses --------------------------------------------------------------------------------


def json_response(body: bytes, status: int = 200, content_type: str = _JSON) -> web.Response:
    response = web.Response(body=body, status=status)
    response.headers["Content-Type"] = content_type
    response.headers["Cache-Control"] = "no-cache, private"
    return response


def status_response(status: Mapping[str, Any]) -> web.Response:
    response = json_response(ENCODER.encode(status), int(status.get("code") or 500))
    details = status.get("details") or {}
    retry = details.get("retryAfterSeconds")
    if retry:
        response.headers["Retry-After"] = str(retry)
    return response


# -- watch streams ----------------------------------------------------------------------------


class Watcher:
    """One open watch: a queue of encoded lines (shared bytes where possible) and the
    state the faults act on. Only the event loop touches it."""

    def __init__(
        self,
        *,
        bucket: Bucket,
        namespace: str | None,
        query: Query,
        mode: str,
        include_object: str,
        clock: Clock,
        faults: Faults,
        current_rv: Callable[[], int],
    ) -> None:
        self.bucket = bucket
        self.info: ServedResource = bucket.info
        self.namespace = namespace if bucket.info.namespaced else None
        self.query = query
        self.filtering = query.filtering
        self.mode = mode
        self.include_object = include_object
        self.clock = clock
        self.faults = faults
        self.current_rv = current_rv
        self.from_rv = 0
        self.queue: collections.deque[bytes] = collections.deque()
        self.ended = False
        self.dropped = False
        self.aborted = False
        self.stalled = False
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.Task[None] | None = None
        self._headers_sent = False

    # -- feeding (synchronous, from the store's writes) -----------------------------------

    def offer(self, event: Event) -> None:
        if self.stalled or self.ended or event.rv <= self.from_rv:
            return
        record = event.record
        if self.namespace is not None and record.namespace != self.namespace:
            return
        if not self.filtering:
            self._push(self._encode(event.type, record, event))
            return
        matches = self.query.matches
        now = matches(record.obj)
        if event.type == "MODIFIED" and event.prev is not None:
            before = matches(event.prev.obj)
            if now and not before:
                self._push(self._encode("ADDED", record, None))
            elif before and not now:
                # kube: the previous state, stamped with the event's resourceVersion.
                last = dict(event.prev.obj)
                last["metadata"] = {**last["metadata"], "resourceVersion": str(event.rv)}
                self._push(self._encode("DELETED", Record(last, record.prefix), None))
            elif now:
                self._push(self._encode("MODIFIED", record, event))
        elif now:
            self._push(self._encode(event.type, record, event))

    def offer_initial(self, record: Record) -> None:
        if self.namespace is not None and record.namespace != self.namespace:
            return
        if self.filtering and not self.query.matches(record.obj):
            return
        self._push(self._encode("ADDED", record, None))

    def offer_bookmark(self, rv: int, *, initial_events_end: bool = False) -> None:
        if self.stalled or self.ended:
            return
        meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END_ANNOTATION: "true"}
        if self.mode == "meta":
            obj: dict[str, Any] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta,
            }
        else:
            obj = {"kind": self.info.kind, "apiVersion": self.info.api_version, "metadata": meta}
        self._push(event_line("BOOKMARK", ENCODER.encode(obj)))

    def _encode(self, event_type: str, record: Record, event: Event | None) -> bytes:
        if self.mode == "json":
            if event is not None and event.type == event_type:
                return event.line()
            return event_line(event_type, record.full())
        if self.mode == "meta":
            if event is not None and event.type == event_type:
                return event.meta_line()
            return event_line(event_type, record.meta_json())
        table: dict[str, Any] = {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": record.obj["metadata"]["resourceVersion"]},
            # kube sends the column definitions with the first event only.
            "columnDefinitions": None if self._headers_sent else table_columns(self.info),
            "rows": [
                table_row(
                    self.info, record.obj, row_object(record, self.include_object), wall_now()
                )
            ],
        }
        self._headers_sent = True
        return event_line(event_type, ENCODER.encode(table))

    def _push(self, line: bytes) -> None:
        self.queue.append(line)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- faults and lifecycle ---------------------------------------------------------------

    def end(self, *, discard: bool) -> None:
        """Finish the stream normally (after what is queued, unless ``discard``)."""
        self.ended = True
        if discard:
            self.dropped = True
            self.queue.clear()
        self._stop_timer()
        self._wake()

    def abort(self) -> None:
        """Cut the connection without finishing the chunked stream."""
        self.aborted = True
        self.queue.clear()
        self._stop_timer()
        self._wake()

    def stall(self) -> None:
        """Deliver nothing more, and never end on our side (a dead connection)."""
        self.stalled = True
        self.queue.clear()
        self._stop_timer()

    def start_timer(self, bookmark_interval: float | None, timeout: float | None) -> None:
        if bookmark_interval is None and timeout is None:
            return
        self._timer = asyncio.get_running_loop().create_task(
            run_watch_timer(
                self.clock,
                bookmark_interval,
                timeout,
                on_bookmark=self._bookmark_due,
                on_timeout=lambda: self.end(discard=False),
            )
        )

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    async def close(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and not timer.done():
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer

    def _bookmark_due(self) -> None:
        """The timer's periodic bookmark: sent at the current resourceVersion, once
        the watch has reached the one it starts from."""
        rv = self.current_rv()
        if rv >= self.from_rv:
            self.offer_bookmark(rv)

    async def pump(self, response: web.StreamResponse) -> None:
        """Write queued lines until the stream ends, is aborted, or the client leaves."""
        loop = asyncio.get_running_loop()
        queue = self.queue
        while not self.aborted:
            if queue and not self.stalled:
                delay = self.faults.slow_delay
                if delay:
                    line = queue.popleft()
                    await self.clock.sleep(delay)
                    if self.aborted or self.stalled or self.dropped:
                        continue
                    if self.faults.corrupt_count:
                        (line,) = self.faults.corrupt([line])
                    await response.write(line)
                else:
                    if self.faults.corrupt_count:
                        lines = self.faults.corrupt(list(queue))
                        queue.clear()
                        queue.extend(lines)
                    data = queue[0] if len(queue) == 1 else b"".join(queue)
                    queue.clear()
                    await response.write(data)
                continue
            if self.ended:
                return
            self._waiter = loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None


def row_object(record: Record, include_object: str) -> Any:
    if include_object == "None":
        return None
    if include_object == "Object":
        return msgspec.Raw(record.full())
    return msgspec.Raw(record.meta_json())


# -- the request handler ----------------------------------------------------------------------


class ApiHandler:
    """Serves one emulator's store over HTTP (an aiohttp low-level handler)."""

    def __init__(
        self,
        *,
        store: Store,
        faults: Faults,
        clock: Clock,
        token: str | None,
        bookmark_interval: float | None,
        server_address: Callable[[], str],
        restart: Callable[[Any], Awaitable[None]],
    ) -> None:
        self.store = store
        self.faults = faults
        self.clock = clock
        self.token = token
        self.bookmark_interval = bookmark_interval
        self.server_address = server_address
        self.restart = restart
        self.watchers: set[Watcher] = set()
        self._watch_waiters: list[asyncio.Future[None]] = []
        self.requests: collections.deque[tuple[str, str]] = collections.deque(maxlen=10_000)

    # -- entry point -------------------------------------------------------------------------

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        if path == ADMIN_PATH or path.startswith("/_emulator/"):
            return await self._admin(request)
        self.requests.append((request.method, request.path_qs))
        injected = self.faults.take_failure()
        if injected is not None:
            return status_response(injected)
        denied = self._authenticate(request, path)
        if denied is not None:
            return denied
        try:
            return await self._dispatch(request, path)
        except StatusError as exc:
            return status_response(exc.status)

    def _authenticate(self, request: web.BaseRequest, path: str) -> web.Response | None:
        if self.token is None:
            return None
        header = request.headers.get("Authorization")
        if header is None and (path in _PUBLIC_PATHS or path.startswith(_HEALTH_PREFIXES)):
            return None  # anonymous may read health and version, as in kube's default RBAC
        scheme, _, credential = (header or "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            credential.strip().encode(), self.token.encode()
        ):
            return None
        return status_response(failure_status(401, "Unauthorized", "Unauthorized"))

    async def _admin(self, request: web.BaseRequest) -> web.StreamResponse:
        denied = self._authenticate(request, request.path)
        if denied is not None:
            return denied
        if request.path != ADMIN_PATH:
            return status_response(path_not_found().status)
        if request.method != "POST":
            return status_response(method_not_allowed(request.method, ADMIN_PATH).status)
        try:
            body = decode(await request.read())
            if not isinstance(body, dict) or not isinstance(body.get("op"), str):
                raise ValueError('the body must be a JSON object with an "op"')
            op = body["op"]
            if op == "restart":
                await self.restart(request.protocol)
                response = json_response(b'{"ok":true}')
                response.force_close()
                return response
            self.apply_fault(op, body)
        except (ValueError, TypeError, msgspec.DecodeError) as exc:
            return status_response(failure_status(400, "BadRequest", f"invalid fault: {exc}"))
        return json_response(b'{"ok":true}')

    def apply_fault(self, op: str, body: Mapping[str, Any]) -> None:
        log.debug("fault %r", op)
        if op == "drop_watches":
            self.drop_watches(abrupt=bool(body.get("abrupt", False)))
        elif op == "fail_next":
            retry = body.get("retry_after")
            self.faults.fail_next(
                int(body.get("count", 1)),
                int(body.get("status", 500)),
                None if retry is None else float(retry),
                body.get("reason"),
            )
        elif op == "stall_watches":
            self.stall_watches()
        elif op == "slow_streams":
            delay = body.get("delay_per_event")
            if delay is not None and float(delay) < 0:
                raise ValueError("delay_per_event must be >= 0")
            self.faults.slow_delay = None if delay is None else float(delay)
        elif op == "corrupt_resource_versions":
            self.faults.corrupt_resource_versions(int(body.get("count", 1)), body.get("value"))
        elif op == "compact":
            self.store.compact()
        elif op == "reset":
            self.faults.fail_count = 0
            self.faults.slow_delay = None
            self.faults.corrupt_count = 0
        else:
            raise ValueError(
                f"unknown op {op!r} (drop_watches, fail_next, stall_watches, slow_streams, "
                "corrupt_resource_versions, restart, compact, reset)"
            )

    # -- faults over watches ---------------------------------------------------------------

    def drop_watches(self, *, abrupt: bool = False) -> None:
        log.debug("dropping %d watches%s", len(self.watchers), " abruptly" if abrupt else "")
        for watcher in list(self.watchers):
            if abrupt:
                watcher.abort()
            else:
                watcher.end(discard=True)

    def stall_watches(self) -> None:
        log.debug("stalling %d watches", len(self.watchers))
        for watcher in list(self.watchers):
            watcher.stall()

    def open_watches(self, resource: str | None = None) -> int:
        bucket = None if resource is None else self.store.resolve(resource)
        return sum(
            1
            for w in self.watchers
            if not w.ended and not w.aborted and (bucket is None or w.bucket is bucket)
        )

    async def wait_for_watches(self, count: int, resource: str | None) -> None:
        loop = asyncio.get_running_loop()
        while self.open_watches(resource) < count:
            waiter = loop.create_future()
            self._watch_waiters.append(waiter)
            try:
                await waiter
            finally:
                with contextlib.suppress(ValueError):
                    self._watch_waiters.remove(waiter)

    def _watches_changed(self) -> None:
        for waiter in self._watch_waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- routing ---------------------------------------------------------------------------

    async def _dispatch(self, request: web.BaseRequest, path: str) -> web.StreamResponse:
        segments = [s for s in path.split("/") if s]
        method = request.method
        if not segments:
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]
            for info in self.store.resources():
                if info.group:
                    paths += [f"/apis/{info.group}", f"/apis/{info.group}/{info.version}"]
            return json_response(ENCODER.encode({"paths": sorted(set(paths))}))
        head = segments[0]
        if head in ("healthz", "livez", "readyz"):
            response = web.Response(text="ok")
            response.headers["Content-Type"] = "text/plain; charset=utf-8"
            return response
        if head == "openapi" and method == "GET":
            document, content_type = openapi_response(
                self.store.resources(), segments, request.headers.get("Accept", "")
            )
            return json_response(document, content_type=content_type)
        if head == "version" and len(segments) == 1:
            return json_response(ENCODER.encode(EMULATED_VERSION))
        resources = self.store.resources()
        accept = request.headers.get("Accept", "")
        if head == "api":
            if len(segments) == 1:
                if wants_aggregated(accept):
                    body = aggregated_discovery(resources, core=True)
                    return json_response(ENCODER.encode(body), content_type=AGGREGATED_V2)
                return json_response(ENCODER.encode(api_versions(self.server_address())))
            if segments[1] != "v1":
                raise path_not_found()
            if len(segments) == 2:
                return self._discovery(api_resource_list(resources, "", "v1"))
            return await self._resource(request, method, "", "v1", segments[2:])
        if head == "apis":
            if len(segments) == 1:
                if wants_aggregated(accept):
                    body = aggregated_discovery(resources, core=False)
                    return json_response(ENCODER.encode(body), content_type=AGGREGATED_V2)
                return json_response(ENCODER.encode(api_group_list(resources)))
            if len(segments) == 2:
                return self._discovery(api_group(resources, segments[1]))
            if len(segments) == 3:
                return self._discovery(api_resource_list(resources, segments[1], segments[2]))
            return await self._resource(request, method, segments[1], segments[2], segments[3:])
        raise path_not_found()

    @staticmethod
    def _discovery(document: dict[str, Any] | None) -> web.Response:
        if document is None:
            raise path_not_found()
        return json_response(ENCODER.encode(document))

    async def _resource(
        self, request: web.BaseRequest, method: str, group: str, version: str, rest: list[str]
    ) -> web.StreamResponse:
        watch = False
        if rest and rest[0] == "watch":  # the deprecated /watch/ paths
            watch = True
            rest = rest[1:]
        namespace: str | None = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (len(rest) == 3 and group == "" and rest[2] in ("status", "finalize"))
        ):
            namespace = rest[1]
            rest = rest[2:]
        if not rest or len(rest) > 3:
            raise path_not_found()
        bucket = self.store.by_gvr.get((group, version, rest[0]))
        if bucket is None:
            raise path_not_found()
        info = bucket.info
        if namespace is not None and not info.namespaced:
            raise path_not_found()
        name = rest[1] if len(rest) >= 2 else None
        subresource = rest[2] if len(rest) == 3 else None
        if name is not None and info.namespaced and namespace is None:
            raise path_not_found()
        if subresource is not None and subresource not in info.subresources:
            raise path_not_found()
        params = request.query
        if params.get("watch"):
            watch = parse_bool("watch", params["watch"]) or watch
        accept = request.headers.get("Accept", "")
        if name is None:
            if method == "GET":
                if watch:
                    return await self._watch(request, bucket, namespace, params, accept, None)
                return self._list(bucket, namespace, params, accept)
            if method == "POST":
                if info.namespaced and namespace is None:
                    raise method_not_allowed(method, info.group_resource)
                self._allow(info, "create", method)
                writer = _writer(request, "CreateOptions")
                body = await self._body(request)
                warnings = check_fields(info, body, params.get("fieldValidation", ""))
                record = self.store.create(bucket, body, namespace, request=writer)
                return _warn(json_response(record.full(), 201), warnings)
            if method == "DELETE":
                self._allow(info, "deletecollection", method)
                return await self._delete_collection(request, bucket, namespace, params)
            raise method_not_allowed(method, info.group_resource)
        if method == "GET":
            if watch:
                return await self._watch(request, bucket, namespace, params, accept, name)
            self._allow(info, "get", method)
            record = self.store.get(bucket, namespace, name)
            return self._one(record, accept, info)
        if method == "PUT":
            self._allow(info, "update", method)
            writer = _writer(request, "UpdateOptions")
            body = await self._body(request)
            warnings = check_fields(info, body, params.get("fieldValidation", ""))
            record = self.store.update(
                bucket, namespace, name, body, subresource=subresource, request=writer
            )
            return _warn(json_response(record.full()), warnings)
        if method == "PATCH":
            self._allow(info, "patch", method)
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
            patch_type = _PATCH_TYPES.get(content_type)
            if patch_type is None or (patch_type == "strategic" and not info.builtin):
                raise StatusError(
                    failure_status(
                        415,
                        "UnsupportedMediaType",
                        f"the body of the request was in an unknown format - accepted media "
                        f"types include: {', '.join(_PATCH_TYPES)}",
                    )
                )
            force = parse_bool("force", params["force"]) if "force" in params else None
            writer = _writer(request, "PatchOptions", apply=patch_type == "apply", force=force)
            patch = await self._body(request, raw_json=patch_type != "apply")
            warnings = []
            if patch_type != "json":  # merge, strategic and apply bodies have the object's shape
                warnings = check_fields(info, patch, params.get("fieldValidation", ""))
            if patch_type == "apply":
                existed = self.store.exists(bucket, namespace, name)
                record = self.store.apply(
                    bucket,
                    namespace,
                    name,
                    patch,
                    request=writer,
                    force=bool(force),
                    subresource=subresource,
                )
                return _warn(json_response(record.full(), 200 if existed else 201), warnings)
            record = self.store.patch(
                bucket, namespace, name, patch_type, patch, subresource=subresource, request=writer
            )
            return _warn(json_response(record.full()), warnings)
        if method == "DELETE" and subresource is None:
            self._allow(info, "delete", method)
            options = await self._delete_options(request)
            record, gone = self.store.delete(
                bucket,
                namespace,
                name,
                options.get("preconditions"),
                dry_run=bool(options.get("dryRun")),
            )
            if not gone or info.return_deleted_object:
                return json_response(record.full())
            details: dict[str, Any] = {"name": name}
            if info.group:
                details["group"] = info.group
            details["kind"] = info.plural
            details["uid"] = record.obj["metadata"].get("uid", "")
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
            return json_response(ENCODER.encode(status))
        raise method_not_allowed(method, info.group_resource)

    async def _delete_options(self, request: web.BaseRequest) -> dict[str, Any]:
        """The request's ``DeleteOptions`` (body and query), checked."""
        options = await self._body(request, optional=True)
        if not isinstance(options, dict):
            raise bad_request("the body of a delete is a DeleteOptions object")
        params = request.query
        dry_run = options.get("dryRun") or params.getall("dryRun", [])
        if not isinstance(dry_run, list) or not all(isinstance(v, str) for v in dry_run):
            raise bad_request("dryRun is a list of strings")
        options["dryRun"] = dry_run
        policy = options.get("propagationPolicy", params.get("propagationPolicy"))
        validate_options("DeleteOptions", dry_run=dry_run, propagation_policy=policy)
        preconditions = options.get("preconditions")
        if preconditions is not None and not isinstance(preconditions, dict):
            raise bad_request("preconditions must be an object")
        return options

    @staticmethod
    def _allow(info: ServedResource, verb: str, method: str) -> None:
        if verb not in info.verbs:
            raise method_not_allowed(method, info.group_resource)

    @staticmethod
    async def _body(
        request: web.BaseRequest, *, raw_json: bool = False, optional: bool = False
    ) -> Any:
        data = await request.read()
        if not data.strip():
            if optional:
                return {}
            raise bad_request("the request body is empty")
        content_type = request.headers.get("Content-Type", _JSON).split(";")[0].strip().lower()
        try:
            if content_type in _YAML_TYPES and not raw_json:
                return yaml.safe_load(data)
            if content_type == "application/vnd.kubernetes.protobuf":
                raise StatusError(
                    failure_status(
                        415,
                        "UnsupportedMediaType",
                        "the kubereflector emulator accepts JSON and YAML bodies, not protobuf "
                        "(which kubectl's generators such as 'kubectl create configmap' send): "
                        "write the object to a file and use 'kubectl create -f' or "
                        "'kubectl apply -f' (e.g. 'kubectl create configmap x "
                        "--from-literal=k=v --dry-run=client -o yaml | kubectl apply -f -')",
                    )
                )
            return decode(data)
        except (msgspec.DecodeError, yaml.YAMLError) as exc:
            raise bad_request(f"the request body could not be decoded: {exc}") from None

    def _one(self, record: Record, accept: str, info: ServedResource) -> web.Response:
        mode = negotiate(accept, "object")
        if mode is None:
            raise _not_acceptable()
        if mode == "json":
            return json_response(record.full())
        if mode == "meta":
            return json_response(record.meta_json())
        return json_response(ENCODER.encode(self._table(info, [record], record.rv, "", {})))

    def _table(
        self,
        info: ServedResource,
        records: list[Record],
        rv: int,
        continue_: str,
        params: Mapping[str, str],
    ) -> dict[str, Any]:
        include = params.get("includeObject", "Metadata")
        if include not in ("None", "Metadata", "Object"):
            raise bad_request(f"includeObject: Unsupported value: {include!r}")
        now = wall_now()
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if continue_:
            meta["continue"] = continue_
        return {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "columnDefinitions": table_columns(info),
            "rows": [table_row(info, r.obj, row_object(r, include), now) for r in records],
        }

    def _list(
        self, bucket: Bucket, namespace: str | None, params: Mapping[str, str], accept: str
    ) -> web.Response:
        info = bucket.info
        self._allow(info, "list", "GET")
        mode = negotiate(accept, "list")
        if mode is None:
            raise _not_acceptable()
        query = parse_query(params, watch=False)
        page = self.store.list_page(bucket, namespace, query)
        if mode == "table":
            table = self._table(info, page.records, page.rv, page.continue_, params)
            return json_response(ENCODER.encode(table))
        meta: dict[str, Any] = {"resourceVersion": str(page.rv)}
        if page.continue_:
            meta["continue"] = page.continue_
        if page.remaining is not None:
            meta["remainingItemCount"] = page.remaining
        if mode == "meta":
            head = b'{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":'
            items = b",".join([r.meta_json() for r in page.records])
        else:
            head = _list_head(info)
            if info.builtin:  # kube-apiserver sends built-in list items without kind/apiVersion
                items = b",".join([r.body for r in page.records])
            else:
                items = b",".join([r.full() for r in page.records])
        return json_response(head + ENCODER.encode(meta) + b',"items":[' + items + b"]}")

    async def _delete_collection(
        self,
        request: web.BaseRequest,
        bucket: Bucket,
        namespace: str | None,
        params: Mapping[str, str],
    ) -> web.Response:
        query = parse_query(params, watch=False)
        options = await self._delete_options(request)
        deleted = []
        for record in matching(bucket, namespace, query):
            final, _ = self.store.delete(
                bucket,
                record.namespace or None,
                record.name,
                options.get("preconditions"),
                dry_run=bool(options["dryRun"]),
            )
            deleted.append(final)
        info = bucket.info
        head = _list_head(info)
        meta = {"resourceVersion": str(self.store.rv)}
        items = b",".join([r.body if info.builtin else r.full() for r in deleted])
        return json_response(head + ENCODER.encode(meta) + b',"items":[' + items + b"]}")

    async def _watch(
        self,
        request: web.BaseRequest,
        bucket: Bucket,
        namespace: str | None,
        params: Mapping[str, str],
        accept: str,
        name: str | None,
    ) -> web.StreamResponse:
        info = bucket.info
        self._allow(info, "watch", "GET")
        mode = negotiate(accept, "watch")
        if mode is None:
            raise _not_acceptable()
        query = parse_query(params, watch=True)
        if name is not None:  # watching one object: kube adds a metadata.name field selector
            requirements = [*query.field_selector.requirements]
            query.field_selector = FieldSelector.parse(
                ",".join([*(str(r) for r in requirements), f"metadata.name={name}"])
            )
        include = params.get("includeObject", "Metadata")
        plan = self.store.plan_watch(bucket, namespace, query)
        response = web.StreamResponse(status=200)
        response.headers["Content-Type"] = _JSON
        response.headers["Cache-Control"] = "no-cache, private"
        response.enable_chunked_encoding()
        if plan.error is not None:
            await response.prepare(request)
            await response.write(event_line("ERROR", ENCODER.encode(plan.error)))
            await response.write_eof()
            return response
        watcher = Watcher(
            bucket=bucket,
            namespace=namespace,
            query=query,
            mode=mode,
            include_object=include,
            clock=self.clock,
            faults=self.faults,
            current_rv=lambda: self.store.rv,
        )
        watcher.from_rv = plan.from_rv
        for record in plan.initial:
            watcher.offer_initial(record)
        for event in plan.replay:
            watcher.offer(event)
        if plan.end_bookmark:
            watcher.offer_bookmark(plan.from_rv, initial_events_end=True)
        bucket.watchers.add(watcher)
        self.watchers.add(watcher)
        timeout = float(query.timeout_seconds) if query.timeout_seconds else None
        interval = self.bookmark_interval if query.allow_watch_bookmarks else None
        watcher.start_timer(interval, timeout)
        self._watches_changed()
        try:
            await response.prepare(request)
            await watcher.pump(response)
        except ConnectionError:
            watcher.aborted = True
        finally:
            bucket.watchers.discard(watcher)
            self.watchers.discard(watcher)
            await watcher.close()
        if watcher.aborted:
            transport = request.transport
            if transport is not None:
                transport.abort()
            return response
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response


def _writer(
    request: web.BaseRequest, kind: str, *, apply: bool = False, force: bool | None = None
) -> WriteRequest:
    """The field manager and dry-run of a write (``kind``: its options' kind), checked:
    ``fieldManager``, else the first word of the ``User-Agent`` (as kube does)."""
    params = request.query
    dry_run = params.getall("dryRun", [])
    manager = params.get("fieldManager")
    validate_options(kind, dry_run=dry_run, field_manager=manager, apply=apply, force=force)
    if not manager:
        agent = request.headers.get("User-Agent", "")
        manager = agent.split("/", 1)[0][:_MANAGER_MAX] or "unknown"
    return WriteRequest(manager, dry_run=bool(dry_run))


def _warn(response: web.Response, warnings: list[str]) -> web.Response:
    """Add kube's ``Warning: 299 - "..."`` headers (kubectl prints them)."""
    for text in warnings:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{escaped}"')
    return response


def _list_head(info: ServedResource) -> bytes:
    kind, api_version = info.list_kind, info.api_version
    return f'{{"kind":"{kind}","apiVersion":"{api_version}","metadata":'.encode()


def _not_acceptable() -> StatusError:
    return StatusError(
        failure_status(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, "
            "application/json;as=Table;g=meta.k8s.io;v=v1, "
            "application/json;as=PartialObjectMetadata(List);g=meta.k8s.io;v=v1",
        )
    )
