"""The emulator's watch streams: :class:`Watcher` (one open watch: what it selects,
its queue of encoded events, its timer, the faults acting on it) and
:class:`Watches` (every open watch of one emulator: opening one for a request,
dropping or stalling them all, counting them).

Private to :mod:`kubereflector.testing.apiserver`. Event loop only. The store
offers each event to its bucket's watchers synchronously, inside the write; a
watcher's ``pump`` writes what is queued to the HTTP response. A watch of a CRD's
resource in another version than an object's is sent the object converted (by
``convert``, awaited in ``pump``: the event waits in the queue until then).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias, cast

from aiohttp import web

from ...cache.listwatch import INITIAL_EVENTS_END_ANNOTATION
from ...clock import Clock
from ...selectors import FieldSelector
from ._faults import Faults
from ._negotiation import JSON, negotiate, not_acceptable
from ._queries import Query, parse_query
from ._records import ENCODER, Bucket, Event, Record, event_line
from ._resources import ServedResource
from ._statuses import StatusError
from ._store import Store
from ._tables import row_object, table_columns, table_row
from ._timestamps import wall_now
from ._watch_timer import run_watch_timer

__all__ = ["Watcher", "Watches"]

log = logging.getLogger("kubereflector.testing.apiserver")

Converter: TypeAlias = Callable[
    [ServedResource, Sequence[dict[str, Any]]], Awaitable[list[dict[str, Any]]]
]
"""Converts objects to a resource's version (``_conversion.Conversions.convert``)."""


class _Pending:
    """An event whose object must be converted before it is sent."""

    __slots__ = ("event_type", "record")

    def __init__(self, event_type: str, record: Record) -> None:
        self.event_type = event_type
        self.record = record


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
        info: ServedResource | None = None,
        convert: Converter | None = None,
    ) -> None:
        self.bucket = bucket
        self.info: ServedResource = info or bucket.info
        self.convert = convert if mode != "meta" else None
        self.namespace = namespace if bucket.info.namespaced else None
        self.query = query
        self.filtering = query.filtering
        self.mode = mode
        self.include_object = include_object
        self.clock = clock
        self.faults = faults
        self.current_rv = current_rv
        self.from_rv = 0
        self.queue: collections.deque[bytes | _Pending] = collections.deque()
        self._pending = 0
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

    def _encode(self, event_type: str, record: Record, event: Event | None) -> bytes | _Pending:
        if self.convert is not None and record.obj.get("apiVersion") != self.info.api_version:
            self._pending += 1
            return _Pending(event_type, record)
        return self._render(event_type, record, event)

    def _render(self, event_type: str, record: Record, event: Event | None) -> bytes:
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

    def _push(self, line: bytes | _Pending) -> None:
        self.queue.append(line)
        self._wake()

    async def _resolve(self) -> None:
        """Convert the objects of the queued events that need it (at once), in order; a
        failed conversion ends the watch with an ERROR event."""
        assert self.convert is not None
        items = list(self.queue)
        self.queue.clear()
        self._pending = 0
        waiting = [item for item in items if isinstance(item, _Pending)]
        try:
            objs = await self.convert(self.info, [item.record.obj for item in waiting])
        except StatusError as exc:
            log.warning("watch of %s ended: %s", self.info.group_resource, exc)
            self.queue.clear()
            self._pending = 0
            self.queue.append(event_line("ERROR", ENCODER.encode(exc.status)))
            self.ended = True
            return
        if self.aborted or self.stalled or self.dropped:
            return
        converted = iter(objs)
        resolved: list[bytes] = []
        for item in items:
            if isinstance(item, _Pending):
                record = Record(next(converted), self.info.typemeta_prefix)
                resolved.append(self._render(item.event_type, record, None))
            else:
                resolved.append(item)
        self.queue.extendleft(reversed(resolved))

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
            self._pending = 0
        self._stop_timer()
        self._wake()

    def abort(self) -> None:
        """Cut the connection without finishing the chunked stream."""
        self.aborted = True
        self.queue.clear()
        self._pending = 0
        self._stop_timer()
        self._wake()

    def stall(self) -> None:
        """Deliver nothing more, and never end on our side (a dead connection)."""
        self.stalled = True
        self.queue.clear()
        self._pending = 0
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
            if self._pending and not self.stalled:
                await self._resolve()
                continue
            if queue and not self.stalled:
                delay = self.faults.slow_delay
                if delay:
                    line = queue.popleft()
                    assert isinstance(line, bytes)
                    await self.clock.sleep(delay)
                    if self.aborted or self.stalled or self.dropped:
                        continue
                    if self.faults.corrupt_count:
                        (line,) = self.faults.corrupt([line])
                    await response.write(line)
                else:
                    lines = cast("collections.deque[bytes]", queue)  # resolved above
                    if self.faults.corrupt_count:
                        corrupted = self.faults.corrupt(list(lines))
                        lines.clear()
                        lines.extend(corrupted)
                    data = lines[0] if len(lines) == 1 else b"".join(lines)
                    lines.clear()
                    await response.write(data)
                continue
            if self.ended:
                return
            self._waiter = loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None


class Watches:
    """The open watches of one emulator. Event loop only.

    :meth:`serve` answers a watch request for as long as the stream lasts;
    :meth:`drop` and :meth:`stall` act on every open watch at once (faults);
    :meth:`count` and :meth:`wait_for` tell tests when watches are in place.
    ``bookmark_interval``: seconds of ``clock`` between the BOOKMARKs of watches
    that allow them.
    """

    def __init__(
        self, *, store: Store, clock: Clock, faults: Faults, bookmark_interval: float | None
    ) -> None:
        self.store = store
        self.clock = clock
        self.faults = faults
        self.bookmark_interval = bookmark_interval
        self.convert: Converter | None = None
        """Converts a CRD's objects between its versions (set by the emulator)."""
        self.converts: Callable[[Bucket], bool] = lambda _bucket: False
        """Whether a bucket's objects may need converting."""
        self._open: set[Watcher] = set()
        self._waiters: list[asyncio.Future[None]] = []

    def drop(self, *, abrupt: bool = False) -> None:
        """End every open watch now (queued events are lost); ``abrupt``: cut the
        connections without finishing the streams."""
        log.debug("dropping %d watches%s", len(self._open), " abruptly" if abrupt else "")
        for watcher in list(self._open):
            if abrupt:
                watcher.abort()
            else:
                watcher.end(discard=True)

    def stall(self) -> None:
        """Make every open watch deliver nothing more, its connection left open."""
        log.debug("stalling %d watches", len(self._open))
        for watcher in list(self._open):
            watcher.stall()

    def count(self, resource: str | None = None) -> int:
        """How many watches are open (of ``resource``, resolved by the store, or all),
        stalled ones included."""
        bucket = None if resource is None else self.store.resolve(resource)
        return sum(
            1
            for w in self._open
            if not w.ended and not w.aborted and (bucket is None or w.bucket is bucket)
        )

    async def wait_for(self, count: int, resource: str | None) -> None:
        """Return once at least ``count`` watches (of ``resource``) are open."""
        loop = asyncio.get_running_loop()
        while self.count(resource) < count:
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)

    def _changed(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def serve(
        self,
        request: web.BaseRequest,
        bucket: Bucket,
        namespace: str | None,
        name: str | None,
        *,
        info: ServedResource | None = None,
    ) -> web.StreamResponse:
        """Answer a watch of ``bucket`` (in ``namespace``; of the object ``name``, or
        all; in ``info``'s version, converting with :attr:`convert` where need be) until
        it ends, is dropped or aborted, or the client leaves. Raises
        :class:`~._statuses.StatusError` before the response starts (406, 400, 422);
        a watch that cannot start where asked (410, 504) gets an ERROR event."""
        params = request.query
        mode = negotiate(request.headers.get("Accept", ""), "watch")
        if mode is None:
            raise not_acceptable()
        query = parse_query(params, watch=True, sharding=self.store.sharded_list_watch)
        if name is not None:  # watching one object: kube adds a metadata.name field selector
            requirements = [*query.field_selector.requirements]
            query.field_selector = FieldSelector.parse(
                ",".join([*(str(r) for r in requirements), f"metadata.name={name}"])
            )
        include = params.get("includeObject", "Metadata")
        plan = self.store.plan_watch(bucket, namespace, query)
        response = web.StreamResponse(status=200)
        response.headers["Content-Type"] = JSON
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
            info=info,
            convert=self.convert if self.converts(bucket) else None,
        )
        watcher.from_rv = plan.from_rv
        for record in plan.initial:
            watcher.offer_initial(record)
        for event in plan.replay:
            watcher.offer(event)
        if plan.end_bookmark:
            watcher.offer_bookmark(plan.from_rv, initial_events_end=True)
        bucket.watchers.add(watcher)
        self._open.add(watcher)
        timeout = float(query.timeout_seconds) if query.timeout_seconds else None
        interval = self.bookmark_interval if query.allow_watch_bookmarks else None
        watcher.start_timer(interval, timeout)
        self._changed()
        try:
            await response.prepare(request)
            await watcher.pump(response)
        except ConnectionError:
            watcher.aborted = True
        finally:
            bucket.watchers.discard(watcher)
            self._open.discard(watcher)
            await watcher.close()
        if watcher.aborted:
            transport = request.transport
            if transport is not None:
                transport.abort()
            return response
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response
