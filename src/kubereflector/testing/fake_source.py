"""FakeControllerSource: an in-memory ListerWatcher (client-go's ``tools/cache/testing``).

It holds a set of objects and an ordered history of changes, numbered by one
global resourceVersion counter, and serves ``list`` and ``watch`` from them with
kube-apiserver's semantics (resourceVersion rules, paging with continue tokens,
410 for history that is gone, watch-list with its end bookmark). Tests change the
objects with plain method calls and inject faults (missed events, broken, failing
or stalled watches) to exercise a Reflector or a controller without a cluster::

    source = FakeControllerSource()
    source.add({"metadata": {"name": "a", "namespace": "default"}})
    result = await source.list(ListOptions())
    async with source.watch(ListOptions(resource_version=result.resource_version)) as events:
        source.modify({"metadata": {"name": "a", "namespace": "default"}, "spec": {}})
        event = await anext(events)          # WatchEvent("MODIFIED", {...})

Thread-safety and ordering: every method may be called from the event loop or
from any other thread (the writes are plain functions). All state sits under one
lock. A write delivers its event to each open watch while holding that lock,
through ``loop.call_soon_threadsafe`` of the watch's event loop, so each watch
sees events in resourceVersion order even when several threads write at once.
``list`` and ``watch`` are used from an event loop; watches may live on different
loops.

Ownership: a write stores a deep copy of the object it is given (with
``metadata.resourceVersion`` stamped) and returns that copy. The copy is shared
with every watch event and list result that carries it: nobody (test, source or
Reflector) may mutate it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import builtins
import collections
import copy
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

from ..cache.keys import meta_namespace_key_func
from ..cache.listwatch import (
    ADDED,
    BOOKMARK,
    DELETED,
    ERROR,
    INITIAL_EVENTS_END_ANNOTATION,
    MODIFIED,
    ListOptions,
    ListResult,
    WatchEvent,
    WatchStream,
)
from ..clock import Clock, RealClock
from ..errors import ApiError, ExpiredError, error_from_status
from .apiserver._statuses import invalid_resource_version, too_large, too_old
from .apiserver._watch_timer import run_watch_timer

__all__ = ["FakeControllerSource"]

_CONTINUE_VERSION: Final = "kubereflector.testing/v1"
_CONTINUE_EXPIRED_MESSAGE: Final = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter."
)


@dataclass(frozen=True, slots=True)
class _Change:
    """One history entry: the event at ``rv`` and the object's state before it."""

    rv: int
    key: str
    event: WatchEvent
    previous: dict[str, Any] | None


def _invalid(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def _bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def _parse_rv(resource_version: str, *, from_etcd: bool = False) -> int | None:
    """``None`` for ``""``/``"0"`` (any/most recent), else the number; not one:
    kube-apiserver's errors (400 for a list it sends to etcd, else 500)."""
    if resource_version in ("", "0"):
        return None
    if not (resource_version.isascii() and resource_version.isdigit()):
        status = invalid_resource_version(resource_version, from_etcd=from_etcd)
        raise error_from_status(status)
    return int(resource_version)


def _check_selectors(options: ListOptions) -> None:
    if options.label_selector or options.field_selector:
        raise ValueError(
            "FakeControllerSource does not filter: label_selector and field_selector "
            f"must be empty (got {options.label_selector!r}, {options.field_selector!r})"
        )


def _encode_continue(rv: int, last_key: str) -> str:
    raw = json.dumps({"v": _CONTINUE_VERSION, "rv": rv, "last": last_key}).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
        if not isinstance(data, dict) or data.get("v") != _CONTINUE_VERSION:
            raise ValueError("unknown token version")
        rv, last = data["rv"], data["last"]
        if type(rv) is not int or rv < 0 or not isinstance(last, str):
            raise ValueError("malformed token")
    except (ValueError, KeyError, UnicodeError, binascii.Error) as exc:
        raise _bad_request(f"continue key is not valid: {exc}") from None
    return rv, last


class FakeControllerSource:
    """An in-memory :class:`~kubereflector.cache.listwatch.ListerWatcher` with fault injection.

    ``history_limit`` is how many events are retained for watches and continue
    tokens from older resourceVersions (a watch or continue from before them
    gets 410 Expired, like a compacted etcd). ``bookmark_interval`` (seconds of
    ``clock``; ``None``: never) is how often a watch that allows bookmarks gets a
    BOOKMARK with the current resourceVersion. ``clock`` drives bookmarks and
    ``timeout_seconds`` (default: the real monotonic clock; pass a
    :class:`~kubereflector.testing.FakeClock` in tests). ``bookmark_kind`` is
    the ``kind`` set on BOOKMARK objects (omitted when ``None``).

    Objects are ``dict``s shaped like Kubernetes JSON, keyed
    ``"namespace/name"`` (or ``"name"``). ResourceVersions are decimal strings
    of one counter: the first write is ``"1"``.

    Differences from kube-apiserver, kept on purpose: selectors are refused
    (``ValueError``) rather than ignored; ``list`` honours ``limit`` also for
    resourceVersion ``"0"``; ``resourceVersionMatch=Exact`` lists are served
    only within the retained history.
    """

    def __init__(
        self,
        *,
        history_limit: int = 1000,
        bookmark_interval: float | None = None,
        clock: Clock | None = None,
        bookmark_kind: str | None = None,
    ) -> None:
        if history_limit < 0:
            raise ValueError(f"history_limit must be >= 0 (got {history_limit})")
        if bookmark_interval is not None and not bookmark_interval > 0:
            raise ValueError(f"bookmark_interval must be > 0 or None (got {bookmark_interval})")
        self.history_limit: Final = history_limit
        self.bookmark_interval: Final = bookmark_interval
        self.bookmark_kind: Final = bookmark_kind
        self.clock: Final[Clock] = clock if clock is not None else RealClock()
        self._lock = threading.Lock()
        self._rv = 0
        self._objects: dict[str, dict[str, Any]] = {}
        self._history: collections.deque[_Change] = collections.deque()
        self._oldest = 0  # every event with rv > _oldest is in _history
        self._watches: dict[int, _FakeWatch] = {}
        self._next_watch_id = 0
        self._list_requests: builtins.list[ListOptions] = []
        self._watch_requests: builtins.list[ListOptions] = []
        self._list_faults: collections.deque[BaseException] = collections.deque()
        self._watch_faults: collections.deque[BaseException] = collections.deque()

    # -- writes ------------------------------------------------------------------

    def add(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj``; every open watch gets ADDED. Raises ``ValueError`` if its key exists.

        Returns the stored copy (with the new ``metadata.resourceVersion``).
        """
        return self._write(ADDED, obj, deliver=True)

    def modify(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the object with ``obj``'s key; watches get MODIFIED.

        Raises ``ValueError`` if there is no such object. Returns the stored copy.
        """
        return self._write(MODIFIED, obj, deliver=True)

    def delete(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Delete the object with ``obj``'s key; watches get DELETED carrying (a copy of)
        ``obj`` with the deletion's resourceVersion.

        Raises ``ValueError`` if there is no such object. Returns the stored copy.
        """
        return self._write(DELETED, obj, deliver=True)

    def add_drop_watch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Like :meth:`add`, but open watches miss the event (it still enters the
        history, so a later watch from an older resourceVersion replays it)."""
        return self._write(ADDED, obj, deliver=False)

    def modify_drop_watch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Like :meth:`modify`, but open watches miss the event."""
        return self._write(MODIFIED, obj, deliver=False)

    def delete_drop_watch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Like :meth:`delete`, but open watches miss the event."""
        return self._write(DELETED, obj, deliver=False)

    def compact(self) -> None:
        """Forget all history: only watches (and continue tokens) from the current
        resourceVersion remain possible; older ones get 410 Expired."""
        with self._lock:
            self._history.clear()
            self._oldest = self._rv

    def _write(self, event_type: str, obj: Mapping[str, Any], *, deliver: bool) -> dict[str, Any]:
        if not isinstance(obj, Mapping):
            raise TypeError(f"expected a Kubernetes object as a mapping, got {type(obj).__name__}")
        stored: dict[str, Any] = copy.deepcopy(dict(obj))
        key = meta_namespace_key_func(stored)
        meta = stored["metadata"]
        if not isinstance(meta, dict):
            meta = stored["metadata"] = dict(meta)
        with self._lock:
            previous = self._objects.get(key)
            if event_type == ADDED and previous is not None:
                raise ValueError(f"cannot add {key!r}: it already exists (use modify)")
            if event_type != ADDED and previous is None:
                verb = "modify" if event_type == MODIFIED else "delete"
                raise ValueError(f"cannot {verb} {key!r}: no such object")
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            if event_type == DELETED:
                del self._objects[key]
            else:
                self._objects[key] = stored
            event = WatchEvent(event_type, stored)
            self._history.append(_Change(self._rv, key, event, previous))
            while len(self._history) > self.history_limit:
                self._oldest = self._history.popleft().rv
            if deliver:
                for watch in builtins.list(self._watches.values()):
                    if watch.live:
                        self._post(watch, watch._on_event, event)
        return stored

    # -- faults --------------------------------------------------------------------

    def reset_watch(self) -> None:
        """End every open watch normally (events written before still arrive first).

        Stalled watches are not reached (their connection is dead).
        """
        with self._lock:
            for watch in self._live_watches():
                self._unregister(watch)
                self._post(watch, watch._on_end)

    def error_watches(self, status: Mapping[str, Any]) -> None:
        """Send an ERROR event with the ``Status`` mapping ``status`` to every open
        (not stalled) watch, then end it."""
        with self._lock:
            for watch in self._live_watches():
                self._unregister(watch)
                self._post(watch, watch._on_error, dict(status))

    def stall_watches(self) -> None:
        """Make every watch open now deliver nothing more, as on a dead connection:
        later events, bookmarks and timeouts for it are dropped, and it ends only
        when its consumer closes it. Events written before the call still arrive.
        Watches opened later are unaffected."""
        with self._lock:
            for watch in self._live_watches():
                watch.live = False
                self._post(watch, watch._on_stall)

    def fail_next_list(self, err: BaseException, times: int = 1) -> None:
        """Make the next ``times`` calls of :meth:`list` raise ``err`` (queued after
        failures injected before)."""
        self._queue_fault(self._list_faults, err, times)

    def fail_next_watch(self, err: BaseException, times: int = 1) -> None:
        """Make entering the next ``times`` watches raise ``err``."""
        self._queue_fault(self._watch_faults, err, times)

    def _queue_fault(
        self, faults: collections.deque[BaseException], err: BaseException, times: int
    ) -> None:
        if times < 1:
            raise ValueError(f"times must be >= 1 (got {times})")
        if not isinstance(err, BaseException):
            raise TypeError(f"expected an exception, got {type(err).__name__}")
        with self._lock:
            faults.extend([err] * times)

    # -- reads for tests -----------------------------------------------------------

    @property
    def resource_version(self) -> str:
        """The current resourceVersion (``"0"`` before the first write)."""
        with self._lock:
            return str(self._rv)

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored object with ``key``, or ``None``. Do not mutate it."""
        with self._lock:
            return self._objects.get(key)

    def list_objects(self) -> builtins.list[dict[str, Any]]:
        """The current objects, sorted by key. Do not mutate them."""
        with self._lock:
            return [self._objects[k] for k in sorted(self._objects)]

    def keys(self) -> builtins.list[str]:
        """The current keys, sorted."""
        with self._lock:
            return sorted(self._objects)

    @property
    def list_requests(self) -> builtins.list[ListOptions]:
        """The options of every ``list`` call so far, oldest first (a copy)."""
        with self._lock:
            return builtins.list(self._list_requests)

    @property
    def watch_requests(self) -> builtins.list[ListOptions]:
        """The options of every watch entered so far, oldest first (a copy)."""
        with self._lock:
            return builtins.list(self._watch_requests)

    @property
    def open_watches(self) -> int:
        """How many watch streams are open and not yet ended (stalled ones included)."""
        with self._lock:
            return len(self._watches)

    # -- ListerWatcher ----------------------------------------------------------------

    async def list(self, options: ListOptions) -> ListResult:
        """One page of the objects, sorted by key, as kube-apiserver serves a list.

        ``resource_version`` ``""``/``"0"``: the current state. ``"n"`` (match
        unset or NotOlderThan): the current state, or
        :class:`~kubereflector.errors.TooLargeResourceVersionError` if ``n`` is
        in the future. Match ``Exact``: the state at ``n``, while its history is
        retained (else :class:`~kubereflector.errors.ExpiredError`). ``limit``
        pages the result; ``continue_`` tokens name a consistent snapshot and
        expire (410) once its history is gone. Invalid option combinations
        raise :class:`~kubereflector.errors.ApiError` 400/422 as the server does.
        """
        _check_selectors(options)
        with self._lock:
            self._list_requests.append(options)
            if self._list_faults:
                raise self._list_faults.popleft()
        self._validate_list(options)
        requested = _parse_rv(
            options.resource_version,
            from_etcd=bool(options.limit) or options.resource_version_match == "Exact",
        )
        with self._lock:
            if options.continue_:
                rv, last_key = _decode_continue(options.continue_)
                if rv > self._rv:
                    raise _bad_request("continue key is not valid: resourceVersion in the future")
                if rv < self._oldest:
                    raise ExpiredError(_CONTINUE_EXPIRED_MESSAGE)
            else:
                last_key = None
                if requested is None:
                    rv = self._rv
                elif requested > self._rv:
                    raise error_from_status(too_large(requested, self._rv))
                elif options.resource_version_match == "Exact":
                    if requested < self._oldest:
                        raise ExpiredError("The resourceVersion for the provided list is too old.")
                    rv = requested
                else:
                    rv = self._rv
            state = self._state_at(rv)
        keys = sorted(state)
        start = 0 if last_key is None else bisect.bisect_right(keys, last_key)
        limit = options.limit if options.limit is not None and options.limit > 0 else None
        end = len(keys) if limit is None else min(len(keys), start + limit)
        page = keys[start:end]
        result = ListResult(items=[state[k] for k in page], resource_version=str(rv))
        if end < len(keys):
            result.continue_ = _encode_continue(rv, page[-1])
            result.remaining_item_count = len(keys) - end
        return result

    def watch(self, options: ListOptions) -> WatchStream:
        """A stream of changes, opened on entering the returned context manager.

        ``resource_version`` ``""``/``"0"``: ADDED for every current object, then
        live events. ``"n"``: the retained events after ``n``, then live ones; if
        some event after ``n`` is no longer retained, the stream carries one
        ERROR event with a 410 Expired ``Status`` and ends; if ``n`` is in the
        future, one ERROR with the 504 "Too large resource version" ``Status``.
        ``send_initial_events=True`` (watch-list; needs
        ``resource_version_match="NotOlderThan"`` and ``allow_watch_bookmarks``,
        else entering raises :class:`~kubereflector.errors.ApiError` 422): ADDED
        for the current state, a BOOKMARK annotated ``k8s.io/initial-events-end``,
        then live events. ``send_initial_events=False``: live events from ``n``
        (or from now). With ``allow_watch_bookmarks`` and a ``bookmark_interval``,
        a BOOKMARK with the current resourceVersion every interval;
        ``timeout_seconds`` ends the stream normally after that long.

        Leaving the context closes the stream and stops its helper task.
        """
        return _FakeWatch(self, options)

    # -- internals (called with or without the lock, as noted) -------------------------

    def _validate_list(self, options: ListOptions) -> None:
        if options.send_initial_events is not None:
            raise _invalid("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")
        match = options.resource_version_match
        if match is not None:
            if match not in ("NotOlderThan", "Exact"):
                raise _invalid(f"resourceVersionMatch: Unsupported value: {match!r}")
            if not options.resource_version:
                raise _invalid(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden "
                    "unless resourceVersion is provided"
                )
            if options.continue_:
                raise _invalid(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden "
                    "when continue is provided"
                )
            if match == "Exact" and options.resource_version == "0":
                raise _invalid(
                    'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is '
                    'forbidden for resourceVersion "0"'
                )
        if options.continue_ and options.resource_version not in ("", "0"):
            raise _bad_request("specifying resource version is not allowed when using continue")

    @staticmethod
    def _validate_watch(options: ListOptions) -> None:
        match = options.resource_version_match
        if options.send_initial_events is not None and match != "NotOlderThan":
            raise _invalid(
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                "resourceVersionMatch to NotOlderThan"
            )
        if options.send_initial_events and not options.allow_watch_bookmarks:
            raise _invalid(
                "allowWatchBookmarks: Forbidden: allowWatchBookmarks must be set to true "
                "when sendInitialEvents is true"
            )
        if match is not None and options.send_initial_events is None:
            raise _invalid(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for "
                "watch unless sendInitialEvents is provided"
            )

    def _state_at(self, rv: int) -> dict[str, dict[str, Any]]:
        """The objects as they were at ``rv`` (lock held; ``_oldest <= rv <= _rv``)."""
        state = dict(self._objects)
        for change in reversed(self._history):
            if change.rv <= rv:
                break
            if change.previous is None:
                state.pop(change.key, None)
            else:
                state[change.key] = change.previous
        return state

    def _bookmark(self, rv: int, *, initial_events_end: bool = False) -> WatchEvent:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END_ANNOTATION: "true"}
        obj: dict[str, Any] = {"apiVersion": "v1", "metadata": meta}
        if self.bookmark_kind is not None:
            obj["kind"] = self.bookmark_kind
        return WatchEvent(BOOKMARK, obj)

    def _open(self, watch: _FakeWatch) -> None:
        """Enter a watch: record, fail, validate, then fill its buffer and register it."""
        options = watch.options
        _check_selectors(options)
        with self._lock:
            self._watch_requests.append(options)
            if self._watch_faults:
                raise self._watch_faults.popleft()
        self._validate_watch(options)
        requested = _parse_rv(options.resource_version)
        with self._lock:
            current = self._rv
            if requested is not None and requested > current:
                watch._finish_with_error(too_large(requested, current))
                return
            if options.send_initial_events:
                initial = [WatchEvent(ADDED, self._objects[k]) for k in sorted(self._objects)]
                initial.append(self._bookmark(current, initial_events_end=True))
            elif requested is None:
                initial = []
                if options.send_initial_events is None:
                    initial = [WatchEvent(ADDED, self._objects[k]) for k in sorted(self._objects)]
            elif requested < self._oldest:
                watch._finish_with_error(too_old(requested, self._oldest))
                return
            else:
                initial = [c.event for c in self._history if c.rv > requested]
            watch._buffer.extend(initial)
            self._next_watch_id += 1
            watch.id = self._next_watch_id
            self._watches[watch.id] = watch

    def _live_watches(self) -> builtins.list[_FakeWatch]:
        return [w for w in self._watches.values() if w.live]

    def _unregister(self, watch: _FakeWatch) -> None:
        """Lock held."""
        self._watches.pop(watch.id, None)
        watch.live = False

    def _post(self, watch: _FakeWatch, callback: Callable[..., None], *args: Any) -> None:
        """Schedule ``callback`` on the watch's loop (lock held, so in lock order)."""
        try:
            watch.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # its event loop is closed: nobody can read it any more
            self._unregister(watch)

    def _timer_fired(self, watch: _FakeWatch, *, timed_out: bool) -> None:
        """From the watch's helper task: post a periodic bookmark or end the stream."""
        with self._lock:
            if not watch.live:
                return
            if timed_out:
                self._unregister(watch)
                self._post(watch, watch._on_end)
            else:
                self._post(watch, watch._on_event, self._bookmark(self._rv))

    def _close(self, watch: _FakeWatch) -> None:
        with self._lock:
            self._unregister(watch)

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"FakeControllerSource(resource_version={self._rv}, objects={len(self._objects)}, "
                f"history={len(self._history)}, open_watches={len(self._watches)})"
            )


class _FakeWatch:
    """One watch stream: the async context manager and the async iterator it yields.

    Only the owning event loop touches the buffer; the source reaches it through
    ``call_soon_threadsafe`` callbacks (``_on_*``).
    """

    def __init__(self, source: FakeControllerSource, options: ListOptions) -> None:
        self.source = source
        self.options = options
        self.id = 0
        self.live = True  # registered and not stalled; guarded by the source's lock
        self.loop: asyncio.AbstractEventLoop
        self._buffer: collections.deque[WatchEvent] = collections.deque()
        self._eof = False
        self._entered = False
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _FakeWatch:
        if self._entered:
            raise RuntimeError("a FakeControllerSource watch can be entered only once")
        self._entered = True
        self.loop = asyncio.get_running_loop()
        self.source._open(self)
        if self._eof:
            return self
        options = self.options
        interval = self.source.bookmark_interval if options.allow_watch_bookmarks else None
        timeout = options.timeout_seconds if options.timeout_seconds else None
        if interval is not None or timeout is not None:
            source = self.source
            timer = run_watch_timer(
                source.clock,
                interval,
                timeout,
                on_bookmark=lambda: source._timer_fired(self, timed_out=False),
                on_timeout=lambda: source._timer_fired(self, timed_out=True),
            )
            self._timer = self.loop.create_task(timer)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closed = True
        self._eof = True
        self._buffer.clear()
        self._wake()
        self.source._close(self)
        timer = self._timer
        self._timer = None
        if timer is not None and not timer.done():
            timer.cancel()
            await asyncio.wait({timer})

    def __aiter__(self) -> _FakeWatch:
        return self

    async def __anext__(self) -> WatchEvent:
        while not self._buffer:
            if self._eof:
                raise StopAsyncIteration
            self._waiter = self.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._buffer.popleft()

    # -- on the owning loop ------------------------------------------------------

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _finish_with_error(self, status: dict[str, Any]) -> None:
        self._buffer.append(WatchEvent(ERROR, status))
        self._eof = True
        self.live = False

    def _on_event(self, event: WatchEvent) -> None:
        if not self._eof:
            self._buffer.append(event)
            self._wake()

    def _on_end(self) -> None:
        self._eof = True
        self._wake()
        self._stop_timer()

    def _on_error(self, status: dict[str, Any]) -> None:
        if not self._eof:
            self._buffer.append(WatchEvent(ERROR, status))
        self._on_end()

    def _on_stall(self) -> None:
        self._stop_timer()
