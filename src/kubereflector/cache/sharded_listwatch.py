"""``ShardedListWatch``: a ListerWatcher that lists and watches one shard of a resource.

client-go's ``NewShardedListWatch`` (KEP-5866), for any ListerWatcher. It wraps
another and applies a :class:`ShardFilter`:

* every list and watch carries the filter's ``shardSelector`` (when it has one:
  a filter that only the client can apply, such as "objects whose controller
  owner is in my shards", sends nothing);
* a list the server filtered (its ``shardInfo`` names the selector sent) is
  trusted as it is; any other list (an older server, which ignores the
  parameter) is filtered here, and its ``remainingItemCount`` dropped;
* watch events are always filtered here (a watch stream carries no
  ``shardInfo``, and behind a load balancer one API server may have the
  feature while another has not): added, modified and deleted objects outside
  the shard are dropped; bookmarks and errors pass.

The filter can change while the Reflector above runs (:meth:`ShardedListWatch.set_filter`,
when a sharded controller's shards move): the objects of the new shards must
then be listed. The wrapper tells the Reflector through two means the Reflector
knows: :meth:`~ShardedListWatch.wait_changed` returns at the next change (the
Reflector then ends its watch), and a list page or a watch begun under an older
filter than the last sync raises :class:`~kubereflector.RelistRequiredError`;
either way the Reflector lists again at once, without backoff.

:attr:`ShardedListWatch.synced` says which filter the last full sync (a
complete list, or a watch-list up to its initial-events-end bookmark) was made
with, and when: what a cache built on it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Final

from ..clock import Clock, RealClock
from ._relist import RelistRequiredError, is_initial_events_end
from .keys import get_metadata
from .listwatch import (
    ADDED,
    BOOKMARK,
    DELETED,
    MODIFIED,
    ListerWatcher,
    ListOptions,
    ListResult,
    WatchEvent,
    WatchStream,
)
from .shards import ShardRange, ShardSelector, _same_selector

__all__ = ["ShardFilter", "ShardedListWatch", "SyncedFilter"]

_CHANGES: Final = frozenset((ADDED, MODIFIED, DELETED))
_ONE_HASH: Final = ShardRange(0, 1)


def _everything(obj: Any) -> bool:
    return True


@dataclass(frozen=True, slots=True, eq=False)
class ShardFilter:
    """What one shard of a resource holds.

    ``keep(obj)`` decides on the client (it must be quick and must not block: it
    runs for every listed object and watch event); ``selector`` is sent to the
    server as ``shardSelector`` (``None``: nothing is sent, the client filters
    alone). When both are given, ``keep`` must select the same objects as
    ``selector`` or more (a server that filtered is trusted). ``scope`` names what
    the filter stands for (a sharded controller's set of shards): it is reported
    back by :attr:`ShardedListWatch.synced`.
    """

    keep: Callable[[Any], bool] = _everything
    selector: ShardSelector | None = None
    scope: Hashable = None

    @classmethod
    def of(cls, selector: ShardSelector, scope: Hashable = None) -> ShardFilter:
        """The filter of ``selector`` alone: sent to the server, applied on the client."""
        return cls(selector.matches, selector, scope)

    @classmethod
    def nothing(cls, scope: Hashable = None) -> ShardFilter:
        """A filter that keeps no object (a member holding no shard). It sends a
        selector of one hash value, so a server with sharded lists sends almost
        nothing either."""
        return cls(_nothing, ShardSelector.covering([_ONE_HASH]), scope)


def _nothing(obj: Any) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class SyncedFilter:
    """The filter a full sync was made with, and when (on the wrapper's clock)."""

    filter: ShardFilter
    at: float


class ShardedListWatch:
    """Lists and watches the objects of ``inner`` that ``shard_filter`` keeps (see the
    module documentation); ``None`` keeps everything and sends nothing.

    ``clock`` stamps :attr:`synced`; ``on_synced(synced)`` is called (on the
    Reflector's loop, just after the Reflector was handed the sync, in a callback
    of its own) at the end of each full sync. Use it on one event loop (the
    Reflector's): :meth:`set_filter` included. Objects pass through unchanged (the
    caller owns them, as with ``inner``).
    """

    __slots__ = (
        "_clock",
        "_filter",
        "_generation",
        "_inner",
        "_on_synced",
        "_serving",
        "_synced",
        "_waiters",
    )

    def __init__(
        self,
        inner: ListerWatcher,
        shard_filter: ShardFilter | None = None,
        *,
        clock: Clock | None = None,
        on_synced: Callable[[SyncedFilter], None] | None = None,
    ) -> None:
        self._inner = inner
        self._on_synced = on_synced
        self._filter = shard_filter if shard_filter is not None else ShardFilter()
        self._clock: Clock = clock if clock is not None else RealClock()
        self._generation = 0
        self._serving = 0  # the generation the last full sync (or the one under way) used
        self._synced: SyncedFilter | None = None
        self._waiters: set[asyncio.Future[None]] = set()

    @property
    def inner(self) -> ListerWatcher:
        """The ListerWatcher wrapped."""
        return self._inner

    @property
    def filter(self) -> ShardFilter:
        """The filter in force now."""
        return self._filter

    @property
    def synced(self) -> SyncedFilter | None:
        """The filter the last full sync (a complete list, or a watch-list's initial
        events) was made with, and when; ``None`` before the first."""
        return self._synced

    @property
    def url(self) -> str | None:
        """The inner ListerWatcher's ``url``, for logs (see ``Reflector.source``)."""
        url = getattr(self._inner, "url", None)
        return url if isinstance(url, str) else None

    def set_filter(self, shard_filter: ShardFilter) -> None:
        """Filter with ``shard_filter`` from now on: a Reflector running on this
        relists at once (see the module documentation). Setting the filter in force
        again changes nothing."""
        if not isinstance(shard_filter, ShardFilter):
            raise TypeError(f"set_filter takes a ShardFilter, not {type(shard_filter).__name__}")
        if shard_filter is self._filter:
            return
        self._filter = shard_filter
        self._generation += 1
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_changed(self) -> None:
        """Return at the next :meth:`set_filter` that changes the filter (what a
        Reflector races its watch against)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            await waiter
        finally:
            self._waiters.discard(waiter)

    def with_object_mode(self, object_mode: Any) -> ShardedListWatch:
        """Itself, now over ``inner.with_object_mode(object_mode)`` when ``inner`` has
        it (an informer in compact mode asks, when it is made): the wrapper stays
        the one whose filter is set."""
        with_mode = getattr(self._inner, "with_object_mode", None)
        if callable(with_mode):
            self._inner = with_mode(object_mode)
        return self

    # -- listing --------------------------------------------------------------------------

    async def list(self, options: ListOptions) -> ListResult:
        """One page of ``inner``'s list with the filter's ``shardSelector``, filtered here
        unless the server did. Raises :class:`~kubereflector.RelistRequiredError` when
        the filter changed since the first page of this list (or during this page)."""
        generation = self._generation
        if options.continue_:
            if generation != self._serving:
                raise RelistRequiredError("the shard filter changed during a paginated list")
        else:
            self._serving = generation
        shard_filter = self._filter
        sent = str(shard_filter.selector) if shard_filter.selector is not None else ""
        result = await self._inner.list(
            dataclasses.replace(options, shard_selector=sent) if sent else options
        )
        if generation != self._generation:
            raise RelistRequiredError("the shard filter changed while a list page was read")
        if not (sent and _same_selector(result.shard_info, sent)):
            keep = shard_filter.keep
            result = ListResult(
                [obj for obj in result.items if keep(obj)],
                result.resource_version,
                result.continue_,
                None,
                result.shard_info,
            )
        if not result.continue_:
            self._mark_synced(shard_filter)
        return result

    def _mark_synced(self, shard_filter: ShardFilter) -> None:
        synced = self._synced = SyncedFilter(shard_filter, self._clock.now())
        if self._on_synced is not None:
            # After the Reflector has handed the sync on (it does so without awaiting).
            asyncio.get_running_loop().call_soon(self._on_synced, synced)

    # -- watching -------------------------------------------------------------------------

    def watch(self, options: ListOptions) -> WatchStream:
        """``inner``'s watch with the filter's ``shardSelector``; its added, modified and
        deleted events outside the filter are dropped. Raises
        :class:`~kubereflector.RelistRequiredError` on entering when the filter
        changed since the last full sync (a watch-list, which is one, aside)."""
        return _ShardedWatch(self, options)

    def _inner_watch(
        self, options: ListOptions, shard_filter: ShardFilter
    ) -> tuple[WatchStream, bool]:
        """``inner``'s watch, dropping what ``shard_filter`` refuses as it decodes when
        ``inner`` can (a ``filtered`` method, as ResourceListWatch has); whether it does."""
        filtered = getattr(self._inner, "filtered", None)
        if callable(filtered):
            return filtered(shard_filter.keep).watch(options), True
        return self._inner.watch(options), False

    def _open(self, options: ListOptions) -> tuple[ShardFilter, ListOptions, bool]:
        generation = self._generation
        initial = bool(options.send_initial_events)
        if initial:
            self._serving = generation
        elif generation != self._serving:
            raise RelistRequiredError("the shard filter changed since the last list")
        shard_filter = self._filter
        if shard_filter.selector is not None:
            options = dataclasses.replace(options, shard_selector=str(shard_filter.selector))
        return shard_filter, options, initial

    def _initial_events_ended(self, shard_filter: ShardFilter) -> None:
        self._mark_synced(shard_filter)

    def __repr__(self) -> str:
        selector = self._filter.selector
        text = str(selector) if selector is not None else None
        return f"ShardedListWatch({self._inner!r}, selector={text!r})"


class _ShardedWatch:
    """The watch context of :meth:`ShardedListWatch.watch`."""

    __slots__ = ("_options", "_owner", "_stack")

    def __init__(self, owner: ShardedListWatch, options: ListOptions) -> None:
        self._owner = owner
        self._options = options
        self._stack: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> _FilteredStream:
        owner = self._owner
        shard_filter, options, initial = owner._open(self._options)
        context, prefiltered = owner._inner_watch(options, shard_filter)
        stack = contextlib.AsyncExitStack()
        stream = await stack.enter_async_context(context)
        self._stack = stack
        marked = callable(getattr(stream, "with_turn_marks", None))
        kind = _MarkedFilteredStream if marked else _FilteredStream
        return kind(stream, shard_filter, owner, initial, prefiltered)

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.__aexit__(*exc_info)  # type: ignore[arg-type]


class _FilteredStream(AsyncIterator[WatchEvent]):
    """The events of ``stream`` that ``shard_filter`` keeps (``prefiltered``: the
    stream dropped the others already, as it decoded them)."""

    __slots__ = ("_events", "_filter", "_initial", "_owner", "_prefiltered", "_stream")

    def __init__(
        self,
        stream: AsyncIterator[WatchEvent],
        shard_filter: ShardFilter,
        owner: ShardedListWatch,
        initial: bool,
        prefiltered: bool = False,
    ) -> None:
        self._stream = stream
        self._filter = shard_filter
        self._owner = owner
        self._initial = initial
        self._prefiltered = prefiltered
        self._events: AsyncIterator[WatchEvent | None] | None = None

    def _begin(self, marks: bool) -> AsyncIterator[WatchEvent | None]:
        if self._events is None:
            with_marks = getattr(self._stream, "with_turn_marks", None)
            source: AsyncIterator[WatchEvent | None] = (
                with_marks() if marks and callable(with_marks) else self._stream
            )
            self._events = self._filtered(source)
        return self._events

    async def _filtered(
        self, source: AsyncIterator[WatchEvent | None]
    ) -> AsyncIterator[WatchEvent | None]:
        keep = self._filter.keep
        changes = _CHANGES
        if self._prefiltered:
            async for event in source:
                if (
                    self._initial
                    and event is not None
                    and event.type == BOOKMARK
                    and is_initial_events_end(get_metadata(event.object))
                ):
                    self._initial = False
                    self._owner._initial_events_ended(self._filter)
                yield event
            return
        async for event in source:
            if event is None:
                yield None
                continue
            if event.type in changes:
                if keep(event.object):
                    yield event
                continue
            if self._initial and is_initial_events_end(get_metadata(event.object)):
                self._initial = False
                self._owner._initial_events_ended(self._filter)
            yield event

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self

    async def __anext__(self) -> WatchEvent:
        events = self._begin(False)
        event = await events.__anext__()
        assert event is not None  # no marks without with_turn_marks
        return event


class _MarkedFilteredStream(_FilteredStream):
    """A :class:`_FilteredStream` of a stream with turn marks (see
    :class:`~kubereflector.client.WatchEventStream`), which it passes on."""

    __slots__ = ()

    def with_turn_marks(self) -> AsyncIterator[WatchEvent | None]:
        """The kept events with the inner stream's turn marks (``None``)."""
        return self._begin(True)
