"""Observing a ListerWatcher from the outside: :class:`ObservedListWatch` reports what
passes through it to a :class:`ListWatchObserver`, unchanged. The command line's
progress and reachability lines and the demo's narration are observers; the
Reflector needs no hooks for them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

from ..cache._relist import is_initial_events_end
from ..cache.keys import get_metadata, get_resource_version
from ..cache.listwatch import (
    BOOKMARK,
    ERROR,
    ListerWatcher,
    ListOptions,
    ListResult,
    WatchEvent,
    WatchStream,
)

__all__ = ["ListWatchObserver", "ObservedListWatch"]


class ListWatchObserver:
    """Callbacks of :class:`ObservedListWatch`; every method does nothing by default.

    Called on the event loop, inline with the Reflector's I/O: keep them quick.
    """

    def list_succeeded(self, options: ListOptions, result: ListResult) -> None:
        """One page of a list arrived."""

    def list_failed(self, options: ListOptions, err: Exception) -> None:
        """A list request raised."""

    def watch_opening(self, options: ListOptions) -> None:
        """A watch is about to be opened."""

    def watch_opened(self, options: ListOptions) -> None:
        """A watch was opened (its response headers arrived)."""

    def initial_progress(self, options: ListOptions, count: int) -> None:
        """A watch-list delivered its ``count``-th initial object."""

    def initial_events_ended(self, options: ListOptions, count: int, resource_version: str) -> None:
        """A watch-list's initial objects (``count``) are complete at ``resource_version``."""

    def watch_event(self, options: ListOptions, event: WatchEvent) -> None:
        """An event of a watch (after a watch-list's initial objects), bookmarks included."""

    def watch_error_event(self, options: ListOptions, status: Any) -> None:
        """The server sent an ``ERROR`` event (a ``Status``) on a watch."""

    def watch_failed(self, options: ListOptions, err: Exception) -> None:
        """Opening or reading a watch raised."""

    def watch_closed(self, options: ListOptions, count: int) -> None:
        """The server ended a watch normally after ``count`` events."""


class ObservedListWatch:
    """A ListerWatcher that reports what passes through it to a :class:`ListWatchObserver`,
    unchanged. A closing caused by the caller (cancellation) is not reported."""

    __slots__ = ("inner", "observer")

    def __init__(self, inner: ListerWatcher, observer: ListWatchObserver) -> None:
        self.inner = inner
        self.observer = observer

    async def list(self, options: ListOptions) -> ListResult:
        try:
            result = await self.inner.list(options)
        except Exception as err:
            self.observer.list_failed(options, err)
            raise
        self.observer.list_succeeded(options, result)
        return result

    def watch(self, options: ListOptions) -> WatchStream:
        return _ObservedWatch(self.inner, options, self.observer)

    @property
    def url(self) -> str | None:
        """The observed ListerWatcher's ``url``, if it has one (the Reflector's log
        lines name what it watches by it)."""
        url = getattr(self.inner, "url", None)
        return url if isinstance(url, str) else None


class _ObservedWatch(contextlib.AbstractAsyncContextManager[AsyncIterator[WatchEvent]]):
    __slots__ = ("_inner", "_observer", "_options", "_stream")

    def __init__(
        self, inner: ListerWatcher, options: ListOptions, observer: ListWatchObserver
    ) -> None:
        self._inner = inner
        self._options = options
        self._observer = observer
        self._stream: WatchStream | None = None

    async def __aenter__(self) -> AsyncIterator[WatchEvent]:
        self._observer.watch_opening(self._options)
        stream = self._inner.watch(self._options)
        try:
            events = await stream.__aenter__()
        except Exception as err:
            self._observer.watch_failed(self._options, err)
            raise
        self._stream = stream
        self._observer.watch_opened(self._options)
        return _ObservedEvents(events, self._options, self._observer)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stream, self._stream = self._stream, None
        if stream is None:
            return None
        return await stream.__aexit__(exc_type, exc, tb)


class _ObservedEvents:
    """The events of one observed watch (an iterator class, not an async generator,
    so nothing is left to finalize when the Reflector stops reading)."""

    __slots__ = ("_count", "_events", "_initial", "_initial_count", "_observer", "_options")

    def __init__(
        self, events: AsyncIterator[WatchEvent], options: ListOptions, observer: ListWatchObserver
    ) -> None:
        self._events = events
        self._options = options
        self._observer = observer
        self._initial = options.send_initial_events is True
        self._initial_count = 0
        self._count = 0

    def __aiter__(self) -> _ObservedEvents:
        return self

    async def __anext__(self) -> WatchEvent:
        observer = self._observer
        try:
            event = await self._events.__anext__()
        except StopAsyncIteration:
            observer.watch_closed(self._options, self._count)
            raise
        except Exception as err:
            observer.watch_failed(self._options, err)
            raise
        self._count += 1
        etype, obj = event
        if etype == ERROR:
            observer.watch_error_event(self._options, obj)
        elif self._initial:
            if etype == BOOKMARK:
                if is_initial_events_end(get_metadata(obj)):
                    self._initial = False
                    observer.initial_events_ended(
                        self._options, self._initial_count, get_resource_version(obj) or ""
                    )
            else:
                self._initial_count += 1
                observer.initial_progress(self._options, self._initial_count)
        else:
            observer.watch_event(self._options, event)
        return event
