"""Decoding a watch stream: newline-delimited JSON events from raw byte chunks.

This is the hot path of every informer, so it is written for throughput:

* complete lines inside a chunk are decoded straight from the chunk (a
  ``memoryview`` slice, no copy), many at a time with msgspec's
  ``decode_lines``, in batches of at most :data:`BATCH_BYTES`;
* only a line that spans chunks is gathered in a ``bytearray``, and each new
  chunk is scanned once, so a 1.5 MB object arriving in 1,000 pieces costs
  linear time (no quadratic buffering); a line longer than ``max_line``
  bytes ends the stream (checked once per chunk, and for lines longer than
  a batch), so memory stays bounded whatever the server sends;
* the event loop gets a turn (``await asyncio.sleep(0)``) after roughly
  :data:`YIELD_COST` bytes' worth of events (a few Pods), so a multi-megabyte
  chunk does not hold it and the handlers on other tasks keep up (which keeps
  the garbage collector's work small, see :data:`YIELD_COST`); otherwise there
  is no ``await`` per event. A consumer that asks for them gets a ``None``
  before each of those turns (:meth:`WatchEventStream.with_turn_marks`), to
  apply the events in between with one call.

A line that does not decode (a deeply nested one included), a line that is too
long, or a stream that ends inside a line, raises
:class:`~kubereflector.errors.DecodeError` naming the URL, the byte offset and
length in the stream and msgspec's message (never the line's content). A line
that is a ``Status`` instead of a watch event (a server answering the watch
request with one) raises that Status' error. Events before the bad line are
still delivered, in order; no event is ever delivered half-decoded.

A stream may be given a ``keep`` predicate (a shard's filter, see
:class:`~kubereflector.ShardedListWatch`): the added, modified and deleted events
whose object it refuses are dropped as each batch is decoded, before they become
:class:`WatchEvent` s; the decoding loop itself is the same (the predicate is
composed into the batch decoder once, when the stream starts).

The object of an ``ERROR`` event must be a ``Status`` (a JSON object whose
``kind`` is ``Status``, or that has a ``code`` or ``reason``): anything else
raises :class:`~kubereflector.errors.DecodeError`. The one comparison per
event this costs is all the check adds. The Status, and whatever else the
server sent that goes into an error, passes through the caller's ``redact``
first (the REST client cuts its credentials out there).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, Final, cast

import msgspec

from ..cache.compact import CompactObject, ObjectMode, _decode_generic, _detach
from ..cache.listwatch import WatchEvent
from ..errors import ApiError, DecodeError, TruncatedStreamError
from ._status import is_status, status_error

__all__ = [
    "BATCH_BYTES",
    "MAX_LINE_BYTES",
    "YIELD_COST",
    "WatchEventStream",
    "WireEvent",
    "decode_watch_stream",
]

BATCH_BYTES: Final = 4 * 1024
"""Complete lines are decoded in batches of about this many bytes (at least one line).

Measured against a bare split-and-decode loop: small batches keep the freshly
decoded objects in the CPU cache while they are consumed. With ~5 KB Pods,
4-8 KiB batches (one line each) ran at 0.97-1.00 of the bare loop and 16 KiB
at 0.81-0.85; with ~2 KB metadata-only objects 4 KiB gave 0.94, 8 KiB 0.89;
with 100-byte events any batch of 4 KiB or more gave ~0.73 (per-event
``WatchEvent`` and async-iteration costs) and one line at a time 0.45.
"""

YIELD_COST: Final = 16 * 1024
"""The loop is yielded to after this much work: bytes decoded + EVENT_COST per event.

Small on purpose (every 2-3 Pods of ~5 KB, every ~14 small events): an
informer applies a turn's events to its cache at the turn's end (see
:meth:`WatchEventStream.with_turn_marks`), but its handlers run on other
tasks (or threads), and the objects those notifications hold stay alive
until they run. With 256 KiB (~45 Pods ahead) enough of them survived
young collections that CPython ran 27 full collections over the cache during
20,000 MODIFIED events into a SharedIndexInformer with an ``async def``
handler; with 16 KiB it ran one. The price: a Reflector writing straight into
a store, with nothing to hand over, is 5-9% slower on ~5 KB events (one more
loop turn per 2-3 events). See ``benchmarks/informers.py`` and
``benchmarks/watch_stream.py``.
"""

EVENT_COST: Final = 1024
"""Work charged per event (its consumer's share), in bytes-equivalent."""

MAX_LINE_BYTES: Final = 64 * 1024 * 1024
"""The default limit of one watch event: far above any object etcd stores
(1.5 MiB by default), far below what would exhaust a controller's memory."""


class WireEvent(msgspec.Struct, gc=False):
    """One line of a watch stream as it is on the wire (``metav1.WatchEvent``)."""

    type: str
    object: Any


class _CompactEvent(msgspec.Struct, gc=False):
    type: str
    object: CompactObject


class _RawEvent(msgspec.Struct, gc=False):
    type: str
    object: msgspec.Raw


_DECODER: Final = msgspec.json.Decoder(WireEvent)
_ANY_DECODER: Final = msgspec.json.Decoder()
_COMPACT_EVENTS: Final = msgspec.json.Decoder(_CompactEvent)
_RAW_EVENTS: Final = msgspec.json.Decoder(_RawEvent)
_MSGSPEC_ERRORS: Final = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def _decode_compact_lines(buf: Any) -> list[Any]:
    """Decode lines of events, their objects compact (events with ``.type`` and
    ``.object``); raises msgspec's errors (and RecursionError) for a line that
    is not an event."""
    try:
        events: list[Any] = _COMPACT_EVENTS.decode_lines(buf)
    except msgspec.ValidationError:
        # An ERROR event's Status, or an object with a field a typed compact
        # object has no place for (a ConfigMap's data, ...): the generic way.
        return [WireEvent(ev.type, _compact_or_plain(ev)) for ev in _RAW_EVENTS.decode_lines(buf)]
    for ev in events:
        _detach(ev.object)
    return events


def _compact_or_plain(event: _RawEvent) -> Any:
    """The object of an event: compact, but an ERROR's Status (or anything that
    is not a JSON object) decoded as it is, as in dict mode."""
    if event.type != "ERROR":
        try:
            return _decode_generic(event.object)
        except msgspec.ValidationError:
            pass
    return _ANY_DECODER.decode(event.object)


_new_tuple: Final = tuple.__new__

_ALWAYS_KEPT: Final = frozenset(("BOOKMARK", "ERROR"))
"""Event types a ``keep`` predicate never drops."""


def _keeping(
    decode_lines: Callable[[Any], list[Any]], keep: Callable[[Any], bool]
) -> Callable[[Any], list[Any]]:
    """``decode_lines``, then only the events whose object ``keep`` keeps (bookmarks
    and errors always): the filter of a stream, applied to a whole batch."""

    def decode(buf: Any) -> list[Any]:
        return [ev for ev in decode_lines(buf) if ev.type in _ALWAYS_KEPT or keep(ev.object)]

    return decode


ReadChunk = Callable[[], Awaitable[bytes]]
"""Returns the next chunk of the body; ``b""`` at the end (aiohttp's ``readany``)."""

Redact = Callable[[Any], Any]
"""Returns a decoded value with whatever must not be shown cut out (a new object)."""


def _same(value: Any) -> Any:
    return value


class WatchEventStream(AsyncIterator[WatchEvent]):
    """The events of one watch stream (what :func:`decode_watch_stream` returns).

    Iterate it for its :class:`WatchEvent` s, or iterate :meth:`with_turn_marks`
    instead: the same events with a ``None`` wherever the decoder is about to
    give the event loop a turn (what a Reflector reads, to apply the events
    that arrived in between with one call). One iteration per stream; not
    thread-safe.
    """

    __slots__ = ("_events", "_marks", "_start")

    def __init__(self, start: Callable[[bool], AsyncGenerator[WatchEvent | None, None]]) -> None:
        self._start = start
        self._events: AsyncGenerator[WatchEvent | None, None] | None = None
        self._marks = False

    def _begin(self, marks: bool) -> AsyncGenerator[WatchEvent | None, None]:
        events = self._events
        if events is None:
            events = self._events = self._start(marks)
            self._marks = marks
        elif marks != self._marks:
            raise RuntimeError("a watch stream is iterated once, with or without turn marks")
        return events

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return cast(AsyncIterator[WatchEvent], self._begin(False))  # no marks: no None

    def __anext__(self) -> Awaitable[WatchEvent]:
        return cast(Awaitable[WatchEvent], self._begin(False).__anext__())

    def with_turn_marks(self) -> AsyncIterator[WatchEvent | None]:
        """The events, and ``None`` before each turn the decoder gives the loop
        (after :data:`YIELD_COST` of work, and before waiting for the next chunk).
        The events between two marks arrived without a turn of the loop."""
        return self._begin(True)

    async def aclose(self) -> None:
        """Stop decoding; ``read`` is not called again."""
        if self._events is not None:
            await self._events.aclose()


def decode_watch_stream(
    read: ReadChunk,
    url: str,
    *,
    max_line: int = MAX_LINE_BYTES,
    redact: Redact = _same,
    object_mode: ObjectMode = "dict",
    keep: Callable[[Any], bool] | None = None,
) -> WatchEventStream:
    """The :class:`WatchEvent` s of a newline-delimited JSON stream.

    ``read`` is called until it returns ``b""``. Blank lines are skipped; a
    trailing ``\\r`` is tolerated. A last line without its newline is
    delivered if it is a complete event, else the stream counts as truncated.
    ``max_line`` (at least :data:`BATCH_BYTES`) bounds one line, its newline
    included. An ERROR event's object must be a Status; the event carries
    ``redact(status)``, and everything else the server sent that goes into an
    error passes through ``redact`` too. ``object_mode="compact"``: objects
    are :class:`~kubereflector.CompactObject` s (an ``ERROR`` event's Status
    is a dict, as in dict mode). ``keep``: drop the added, modified and deleted
    events whose object it refuses, as they are decoded (see the module
    documentation).

    Iterating raises :class:`DecodeError` for a line that is not a JSON watch
    event (``{"type": ..., "object": ...}``), a line longer than ``max_line``,
    an ERROR event without a Status, and a truncated stream; the Status' error
    for a line that is a Status; exceptions from ``read`` pass through
    unchanged.
    """
    return WatchEventStream(
        functools.partial(_decode, read, url, max_line, redact, object_mode, keep)
    )


async def _decode(
    read: ReadChunk,
    url: str,
    max_line: int,
    redact: Redact,
    object_mode: ObjectMode,
    keep: Callable[[Any], bool] | None,
    marks: bool,
) -> AsyncGenerator[WatchEvent | None, None]:
    """The generator behind :class:`WatchEventStream`; ``marks``: yield ``None``
    before each ``await``."""
    decode_lines = _DECODER.decode_lines if object_mode == "dict" else _decode_compact_lines
    if keep is not None:
        decode_lines = _keeping(decode_lines, keep)
    new = _new_tuple
    event_cls = WatchEvent

    def error_object(obj: Any) -> Any:
        if type(obj) is CompactObject:  # compact mode: an object with a Status' shape
            obj = obj.to_dict()
        if not is_status(obj):
            what = f"a {type(obj).__name__}" if type(obj) is not dict else "an object"
            if type(obj) is dict and isinstance(obj.get("kind"), str):
                what = f"a {redact(obj['kind'])[:64]!r}"
            raise DecodeError(f"a watch ERROR event carried {what} instead of a Status", url=url)
        return redact(obj)

    pending = bytearray()  # the start of a line that spans chunks
    pending_offset = 0  # stream offset of pending[0]
    offset = 0  # stream offset of the current chunk's first byte
    cost = 0
    while True:
        if marks:
            yield None
        chunk = await read()
        if not chunk:
            break
        size = len(chunk)
        end = chunk.rfind(b"\n") + 1  # chunk[:end] ends with complete lines
        if not end:
            if not pending:
                pending_offset = offset
            pending += chunk
            offset += size
            if len(pending) > max_line:
                raise _too_long(pending_offset, max_line, url)
            continue
        view = memoryview(chunk)
        start = 0
        if pending:
            # Complete the line that spans chunks: this chunk's first newline ends it.
            start = chunk.find(b"\n", 0, end) + 1
            if len(pending) + start > max_line:
                raise _too_long(pending_offset, max_line, url)
            pending += view[:start]
            try:
                events = decode_lines(pending)
            except _MSGSPEC_ERRORS as err:
                raise _line_error(err, pending, pending_offset, url, redact) from err
            cost += len(pending) + EVENT_COST
            pending.clear()
            for ev in events:
                etype = ev.type
                if etype == "ERROR":
                    yield new(event_cls, (etype, error_object(ev.object)))
                    continue
                yield new(event_cls, (etype, ev.object))
            if cost >= YIELD_COST:
                cost = 0
                if marks:
                    yield None
                await asyncio.sleep(0)
        while start < end:
            stop = end
            if end - start > BATCH_BYTES:
                stop = chunk.rfind(b"\n", start, start + BATCH_BYTES) + 1
                if stop <= start:  # one line longer than a batch
                    stop = chunk.find(b"\n", start + BATCH_BYTES, end) + 1
                    if stop - start > max_line:
                        raise _too_long(offset + start, max_line, url)
            try:
                events = decode_lines(view[start:stop])
            except _MSGSPEC_ERRORS:
                # Find the bad line (raising there), delivering the good lines before it.
                events = []
                async for event in _decode_one_by_one(
                    decode_lines, chunk, start, stop, offset, url, redact
                ):
                    if event.type == "ERROR":
                        event = WatchEvent("ERROR", error_object(event.object))
                    yield event
            for ev in events:
                etype = ev.type
                if etype == "ERROR":
                    yield new(event_cls, (etype, error_object(ev.object)))
                    continue
                yield new(event_cls, (etype, ev.object))
            cost += stop - start + EVENT_COST * len(events)
            start = stop
            if cost >= YIELD_COST:
                cost = 0
                if marks:
                    yield None
                await asyncio.sleep(0)
        if end < size:
            pending_offset = offset + end
            if size - end > max_line:
                raise _too_long(pending_offset, max_line, url)
            pending += view[end:]
        offset += size
    if pending.strip():
        try:
            events = decode_lines(pending)
        except _MSGSPEC_ERRORS as err:
            raise TruncatedStreamError(
                f"truncated watch stream: it ended inside a line of {len(pending)} bytes "
                f"at byte {pending_offset}",
                url=url,
            ) from err
        for ev in events:
            etype = ev.type
            if etype == "ERROR":
                yield new(event_cls, (etype, error_object(ev.object)))
                continue
            yield new(event_cls, (etype, ev.object))


async def _decode_one_by_one(
    decode_lines: Callable[[Any], list[Any]],
    chunk: bytes,
    start: int,
    stop: int,
    offset: int,
    url: str,
    redact: Redact,
) -> AsyncIterator[WatchEvent]:
    """Decode ``chunk[start:stop]`` line by line; raise at the first bad line."""
    view = memoryview(chunk)
    while start < stop:
        nl = chunk.find(b"\n", start, stop) + 1
        try:
            events = decode_lines(view[start:nl])
        except _MSGSPEC_ERRORS as err:
            raise _line_error(err, view[start:nl], offset + start, url, redact) from err
        for ev in events:
            yield WatchEvent(ev.type, ev.object)
        start = nl


def _line_error(
    err: Exception, line: bytes | bytearray | memoryview, offset: int, url: str, redact: Redact
) -> ApiError:
    """The error for a line that is no watch event: a Status' own error when the
    line is one, else a DecodeError with msgspec's message (which names positions
    and types, never the data itself)."""
    status: Any = None
    with contextlib.suppress(*_MSGSPEC_ERRORS):
        status = _ANY_DECODER.decode(line)
    if type(status) is dict and status.get("kind") == "Status":
        return status_error(redact(status), url)
    detail = str(err).replace("$[0]", "$")
    return DecodeError(
        f"malformed watch event at byte {offset} of the stream ({len(line)} bytes): {detail}",
        url=url,
    )


def _too_long(offset: int, limit: int, url: str) -> DecodeError:
    return DecodeError(
        f"watch event at byte {offset} of the stream is longer than the limit of "
        f"{limit} bytes: treating the stream as broken",
        url=url,
    )
