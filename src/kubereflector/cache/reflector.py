"""The Reflector: lists a resource into a store, then watches it, forever.

One cycle (:meth:`Reflector.list_and_watch`) gets the full state, either by a
watch-list stream (``sendInitialEvents``) or by a paginated list, hands it to
the store with a single ``replace``, then keeps watching from the last
resourceVersion, applying each event with ``add``/``update``/``delete``.
Watches that end normally, are cut off or stall are re-opened at once from
the last resourceVersion, and those that hit a 429 or a refused connection
after backoff, without relisting; anything else
(a 410 above all) ends the cycle, and :meth:`Reflector.run` starts the next one
after backoff. The decisions live in :mod:`kubereflector.cache._relist`.

The phases, as :class:`ReflectorPhase` names them (kube-rs's ``watcher`` has the
same states)::

    STOPPED ──run()──▶ LISTING ─────────────(replace)──────────▶ WATCHING ◀─┐
                 └───▶ INITIAL_EVENTS ──(initial-events-end)───▶    │  rewatch
                              │ refused: LISTING                    ├───────┘
                              ▼                                     ▼ 410, ...
                          BACKING_OFF ◀─────────────────────────────┘
                              └──▶ the next cycle (LISTING or INITIAL_EVENTS)

Concurrency: a Reflector runs on one event loop. It is the only writer of its
store while it runs; the store's readers may be on any thread.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import math
import random
import reprlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .._aio.tasks import cancel_and_wait
from ..backoff import Backoff
from ..clock import Clock, RealClock
from ..errors import ApiError, TruncatedStreamError, error_from_status
from . import _relist
from ._gc import defer_full_collections
from ._relist import (
    RelistRequiredError,
    SyncPoint,
    VeryShortWatchError,
    WatchAction,
    WatchListUnsupportedError,
    WatchStalledError,
)
from .compact import CompactMetadata, CompactObject, _compact_resource_version
from .keys import deletion_handling_meta_namespace_key_func, get_metadata
from .listwatch import (
    ADDED,
    BOOKMARK,
    DELETED,
    ERROR,
    MODIFIED,
    ListerWatcher,
    ListOptions,
    WatchEvent,
)
from .store import (
    Cache,
    ReflectorStore,
    ResourceVersionUpdater,
    WatchChange,
    _apply_one_by_one,
)

__all__ = [
    "Reflector",
    "ReflectorOptions",
    "ReflectorPhase",
    "ReflectorStats",
    "RelistRequiredError",
    "VeryShortWatchError",
    "WatchErrorHandler",
    "WatchListUnsupportedError",
    "WatchStalledError",
    "default_watch_error_handler",
]

logger = logging.getLogger("kubereflector.reflector")

WatchErrorHandler = Callable[["Reflector", BaseException], None]
"""Called with every error that ends a list-and-watch cycle; must return quickly."""


def default_watch_error_handler(reflector: Reflector, err: BaseException) -> None:
    """Log at a level that fits: expected ends (410, very short watches) quietly."""
    if _relist.is_expired(err):
        logger.debug("%s: watch closed: %s", reflector.name, err)
    elif isinstance(err, VeryShortWatchError):
        logger.info("%s: %s", reflector.name, err)
    else:
        logger.warning("%s: list-and-watch failed: %s", reflector.name, err)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReflectorOptions:
    """How a Reflector lists, watches and recovers: client-go's ``ReflectorOptions``
    plus what client-go hard-codes, in one immutable value.

    Pass one to :class:`Reflector`, :class:`~kubereflector.Controller`,
    :class:`~kubereflector.SharedIndexInformer` or
    :class:`~kubereflector.SharedInformerFactory` (a default for every informer,
    and per resource). Derive a variant with ``dataclasses.replace(options,
    idle_timeout=30)``. The defaults are client-go's where it has one; each field
    says why. Raises ``ValueError`` (naming the field) for a value out of range,
    ``TypeError`` for one of the wrong type.
    """

    idle_timeout: float | None = 90.0
    """Seconds a watch may deliver nothing, not even a bookmark, before it is taken
    for dead and opened again from the last resourceVersion (``None``: never).
    API servers send a bookmark about every minute on watches that ask for them,
    so a longer silence means a connection that died without a FIN (a NAT or a
    load balancer forgot it): the watch would otherwise hang forever, the most
    reported watch bug in Python clients. client-go has no such timer."""

    min_watch_timeout: float = 300.0
    """Each watch asks the server to end it after a random ``[min, 2*min)``
    seconds (``timeoutSeconds``), after which it is opened again from the last
    resourceVersion: client-go's 5 minutes, which spreads the reconnects of many
    clients and lets them rebalance across API servers."""

    page_size: int | None = None
    """The ``limit`` of each list page. ``None``: 500 (client-go's pager default)
    for lists at ``"0"`` or ``""``, and no limit for a list at a specific
    resourceVersion, which the API server's watch cache serves whole. Smaller
    pages cost more requests and less memory per response; a page size set here
    applies to lists at a specific resourceVersion too, which the API server
    then serves from etcd instead of its watch cache."""

    use_watch_list: bool = True
    """Sync with a watch-list stream (``sendInitialEvents``) first, as client-go's
    newest informers do: the server streams the state from its watch cache
    instead of building one large list. A server that refuses it is remembered
    and listed (paginated) from then on; ``False`` lists from the start."""

    max_internal_error_retry_duration: float = 30.0
    """Seconds during which watches failing with 500 InternalError are opened
    again (after backoff) from the last resourceVersion before the Reflector
    gives up and relists (``0``: relist at the first). The API server's own
    cacher uses 30 s for etcd losing its leader, which heals within a few
    seconds: cheaper than every client relisting at once."""

    backoff_initial: float = 0.8
    """Seconds of the first wait after a failed cycle or a retriable watch error."""

    backoff_factor: float = 2.0
    """Each consecutive wait is this many times the previous (before jitter)."""

    backoff_cap: float = 30.0
    """The longest wait before jitter: a recovered server is noticed within it."""

    backoff_jitter: float = 1.0
    """Each wait is stretched by a random ``[0, jitter)`` of itself, so clients that
    failed together do not all return at the same instant (``0``: none)."""

    backoff_reset_after: float = 120.0
    """After this many seconds without a wait, the next starts at ``backoff_initial``
    again. These five are client-go's Reflector backoff (0.8 s doubling to 30 s,
    jitter 1.0, reset after 2 minutes)."""

    def __post_init__(self) -> None:
        if self.idle_timeout is not None:
            _check_positive(self, "idle_timeout")
        if self.page_size is not None:
            if isinstance(self.page_size, bool) or not isinstance(self.page_size, int):
                raise TypeError(f"page_size must be an int or None (got {self.page_size!r})")
            _check_positive(self, "page_size")
        if not isinstance(self.use_watch_list, bool):
            raise TypeError(f"use_watch_list must be a bool (got {self.use_watch_list!r})")
        for name in ("min_watch_timeout", "backoff_initial", "backoff_reset_after"):
            _check_positive(self, name)
        for name in ("max_internal_error_retry_duration", "backoff_jitter"):
            _check_number(self, name)
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (got {getattr(self, name)!r})")
        _check_number(self, "backoff_factor")
        if self.backoff_factor < 1:
            raise ValueError(f"backoff_factor must be >= 1 (got {self.backoff_factor!r})")
        _check_number(self, "backoff_cap")
        if self.backoff_cap < self.backoff_initial:
            raise ValueError(
                f"backoff_cap must be >= backoff_initial (got {self.backoff_cap!r} "
                f"and {self.backoff_initial!r})"
            )

    def new_backoff(self, clock: Clock) -> Backoff:
        """A fresh :class:`~kubereflector.Backoff` with these settings, on ``clock``."""
        return Backoff(
            self.backoff_initial,
            self.backoff_factor,
            self.backoff_cap,
            self.backoff_jitter,
            self.backoff_reset_after,
            clock=clock,
        )


def checked_options(options: object, what: str) -> ReflectorOptions:
    """``options`` (``None``: the defaults); raises ``TypeError`` naming ``what``
    for anything but a :class:`ReflectorOptions`."""
    if options is None:
        return ReflectorOptions()
    if not isinstance(options, ReflectorOptions):
        raise TypeError(f"{what} must be ReflectorOptions, not {type(options).__name__}")
    return options


def _check_number(options: ReflectorOptions, name: str) -> None:
    value = getattr(options, name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number (got {value!r})")
    if math.isnan(value):
        raise ValueError(f"{name} must be a number (got {value!r})")


def _check_positive(options: ReflectorOptions, name: str) -> None:
    _check_number(options, name)
    if getattr(options, name) <= 0:
        raise ValueError(f"{name} must be > 0 (got {getattr(options, name)!r})")


class ReflectorPhase(enum.Enum):
    """What a :class:`Reflector` is doing (see the module documentation's diagram)."""

    STOPPED = "stopped"
    """Not running: before :meth:`Reflector.run`, or after it ended."""

    LISTING = "listing"
    """A (paginated) list, handed to the store with one ``replace`` once complete."""

    INITIAL_EVENTS = "initial-events"
    """A watch-list's initial events, gathered apart and handed to the store with
    one ``replace`` at the bookmark that ends them."""

    WATCHING = "watching"
    """Watch events applied to the store as they come; watches re-opened from the
    last resourceVersion when they end."""

    BACKING_OFF = "backing-off"
    """Waiting before the next attempt: a cycle ended with an error, or a watch
    (or watch-list) failed in a way that is retried after backoff."""


@dataclass(frozen=True, slots=True)
class ReflectorStats:
    """Counters since the Reflector was created (a snapshot)."""

    lists: int
    """Successful full syncs (lists and watch-lists)."""
    relists: int
    """Successful full syncs after the first."""
    watches: int
    """Watch streams opened (a watch-list counts once)."""
    watch_restarts: int
    """Watches re-opened without a relist (timeouts, stalls, 429s, refused connections)."""
    stalls: int
    """Watches found silent for longer than the idle limit."""
    events: int
    """Watch events received, bookmarks included."""
    last_sync_resource_version: str
    last_heard_at: float | None = None
    """The Reflector clock's time the server was last heard from (a watch event or
    bookmark, a completed list, a watch opened; ``None``: never). Events are noticed
    by the snapshots: its resolution is the time between two :meth:`Reflector.stats`
    calls (nothing is timed on the watch path)."""


class Reflector:
    """Keeps a store in step with a resource on the API server (client-go's ``Reflector``).

    ``store`` needs only ``add``/``update``/``delete``/``replace``/``resync``;
    if it also has ``update_resource_version`` it is told every RV synced to,
    bookmarks included, and if it has a ``transformer`` callable, objects of a
    watch-list's initial stream pass through it before they are gathered.

    Objects reach the store as the ListerWatcher produced them (hence a
    ``ReflectorStore[Any]``: a store of any object type is accepted, and it is
    the caller's to know what the ListerWatcher decodes); the store owns them
    from then on. An object of the wrong kind (with ``expected_kind``) or
    without metadata, and an object the store rejects (e.g. no name), is logged
    by key and skipped: it never breaks the watch. A resourceVersion that is not
    a string is ignored (logged once): the Reflector keeps the last good one. Log
    lines and errors name what is watched by :attr:`source` (a
    ``ResourceListWatch``: its URL).

    ``options`` (:class:`ReflectorOptions`) tune listing, watching and recovery;
    ``backoff`` replaces the Backoff built from them with an object of your own
    (e.g. one that reports its waits). ``clock`` drives every wait.

    A ListerWatcher whose selection can change (a
    :class:`~kubereflector.cache.sharded_listwatch.ShardedListWatch`) has an async
    ``wait_changed()`` that returns at the next change: the Reflector ends its
    watch then, and lists again at once, as it does when ``list`` or ``watch``
    raises :class:`RelistRequiredError`.
    """

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        store: ReflectorStore[Any],
        *,
        name: str | None = None,
        expected_kind: str | None = None,
        resync_period: float = 0,
        should_resync: Callable[[], bool] | None = None,
        options: ReflectorOptions | None = None,
        backoff: Backoff | None = None,
        clock: Clock | None = None,
        on_watch_error: WatchErrorHandler | None = None,
    ) -> None:
        if resync_period < 0:
            raise ValueError(f"resync_period must be >= 0 (got {resync_period})")
        self._lw = lister_watcher
        self._store = store
        # Checked once: a runtime-checkable Protocol's isinstance costs ~10 us, and the
        # store is told after every batch of watch events.
        self._rv_updater: ResourceVersionUpdater | None = (
            store if isinstance(store, ResourceVersionUpdater) else None
        )
        self.expected_kind = expected_kind
        self.name = name or f"reflector({expected_kind or type(lister_watcher).__name__})"
        self.resync_period = resync_period
        self.should_resync = should_resync
        self._options = options = checked_options(options, "options")
        self.clock: Clock = clock if clock is not None else RealClock()
        self.backoff = backoff if backoff is not None else options.new_backoff(self.clock)
        self.on_watch_error: WatchErrorHandler = on_watch_error or default_watch_error_handler
        self._internal_retry = _relist.InternalErrorRetry(options.max_internal_error_retry_duration)
        self._phase = ReflectorPhase.STOPPED
        self._position = SyncPoint()
        # Remembered about the server: it refused a watch-list; it paginated a list at "0".
        self._use_watch_list = options.use_watch_list
        self._paginated_result = False
        self._malformed_rv_logged = False  # (logged at WARNING once, then at DEBUG)
        # counters (see ReflectorStats)
        self._lists = 0
        self._watches = 0
        self._watch_restarts = 0
        self._stalls = 0
        self._events = 0
        self._heard_at: float | None = None  # see ReflectorStats.last_heard_at
        self._heard_events = 0

    # -- public ---------------------------------------------------------------

    @property
    def store(self) -> ReflectorStore[Any]:
        """The store the Reflector writes to."""
        return self._store

    @property
    def options(self) -> ReflectorOptions:
        """The settings this Reflector runs with."""
        return self._options

    @property
    def source(self) -> str:
        """What this Reflector lists and watches, for its log lines and errors: the
        ListerWatcher's ``url`` when it has one (the HTTP client's does), else its
        ``str()``."""
        url = getattr(self._lw, "url", None)
        return url if isinstance(url, str) and url else str(self._lw)

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion of the last list, watch-list or watch event applied."""
        return self._position.rv

    @property
    def phase(self) -> ReflectorPhase:
        """What the Reflector is doing now. Any thread (a snapshot)."""
        return self._phase

    @property
    def uses_watch_list(self) -> bool:
        """Whether the next sync will try a watch-list (false once the server refused one)."""
        return self._use_watch_list

    @property
    def full_syncs(self) -> int:
        """The full syncs applied so far (the first list or watch-list, then each relist):
        ``stats().lists`` without building the snapshot. Any thread."""
        return self._lists

    def stats(self) -> ReflectorStats:
        """A snapshot of the counters since this Reflector was created (lists, relists,
        watches, restarts, stalls, ...). Any thread."""
        events = self._events
        if events != self._heard_events:
            self._heard_events = events
            self._heard_at = self.clock.now()
        return ReflectorStats(
            lists=self._lists,
            relists=max(0, self._lists - 1),
            watches=self._watches,
            watch_restarts=self._watch_restarts,
            stalls=self._stalls,
            events=self._events,
            last_sync_resource_version=self._position.rv,
            last_heard_at=self._heard_at,
        )

    async def run(self) -> None:
        """List and watch until cancelled, with backoff between cycles.

        Every error that ends a cycle goes to ``on_watch_error``; the next cycle
        starts after ``backoff``. Cancelling closes the open stream before
        returning; the store is left as the last applied event made it.
        """
        logger.debug("%s: starting", self.name)
        relisted_at = -1  # syncs done when a relist was last required
        try:
            while True:
                wait_at_least = 0.0
                try:
                    await self.list_and_watch()
                except RelistRequiredError as err:
                    if relisted_at != self._lists:  # at once, unless no sync came since
                        relisted_at = self._lists
                        logger.info("%s: %s; listing again", self.name, err)
                        continue
                    self.on_watch_error(self, err)
                except Exception as err:
                    wait_at_least = _relist.retry_after(err)
                    self.on_watch_error(self, err)
                await self._back_off(wait_at_least)
        finally:
            self._phase = ReflectorPhase.STOPPED
            logger.debug("%s: stopped", self.name)

    async def list_and_watch(self) -> None:
        """Run one cycle: sync the store fully, then watch until the cycle ends.

        Never returns normally: it raises the error that ended the cycle
        (:class:`~kubereflector.ExpiredError` when the watch's history expired,
        :class:`VeryShortWatchError`, the list's error, ...).
        """
        synced = asyncio.Event()
        if self._position.take_stale():
            self._position.refused()  # sync at "" (see _relist_instead_of_replaying)
        use_watch_list = self._use_watch_list
        if not use_watch_list:
            await self._list()
            synced.set()
        resync = asyncio.create_task(self._resync_loop(synced)) if self.resync_period > 0 else None
        try:
            await self._watch_loop(synced, use_watch_list)
        finally:
            if resync is not None:
                await cancel_and_wait(resync)

    # -- listing ----------------------------------------------------------------

    async def _list(self) -> None:
        """A full list into the store with one ``replace``.

        The whole of it (every page, the decoding, the ``replace``) runs in a
        :func:`~kubereflector.cache._gc.defer_full_collections` sync window: no full
        collection of the garbage collector while the new objects pile up.
        """
        self._phase = ReflectorPhase.LISTING
        with defer_full_collections(sync=True):
            await self._list_in_window()

    async def _list_in_window(self) -> None:
        rv = self._position.list_at()
        try:
            items, list_rv, paginated = await self._paged_list(rv)
        except ApiError as err:
            if rv == "" or not _relist.is_resource_version_unavailable(err):
                raise
            self._resource_version_unavailable(rv, err)
            rv = ""
            items, list_rv, paginated = await self._paged_list(rv)
        if rv == "0" and paginated:
            self._paginated_result = True
        list_rv = self._recordable(list_rv, "list")
        self._store.replace(items, list_rv)
        self._replaced(list_rv)
        logger.debug("%s: listed %d objects at resourceVersion %s", self.name, len(items), list_rv)

    async def _paged_list(self, rv: str) -> tuple[list[Any], str, bool]:
        """All pages of a list at ``rv``: (items, resourceVersion, was it paginated)."""
        limit = _relist.list_page_size(self._options.page_size, self._paginated_result, rv)
        options = ListOptions(resource_version=rv, limit=limit)
        result = await self._lw.list(options)
        items = list(result.items)
        paginated = False
        while result.continue_:
            paginated = True
            page = ListOptions(limit=limit, continue_=result.continue_)
            try:
                result = await self._lw.list(page)
            except ApiError as err:
                if not _relist.is_expired(err):
                    raise
                # The snapshot behind the continue token is gone: list everything
                # at once, at the RV first asked for.
                logger.info("%s: continue token expired; listing in full", self.name)
                result = await self._lw.list(ListOptions(resource_version=rv))
                items = list(result.items)
                break
            items.extend(result.items)
        return items, result.resource_version, paginated

    # -- watching ---------------------------------------------------------------

    def _watch_options(self, watch_list: bool) -> ListOptions:
        timeout = _relist.watch_timeout_seconds(self._options.min_watch_timeout, random.random())
        if watch_list:
            return ListOptions(
                resource_version=self._position.watch_list_at(),
                resource_version_match="NotOlderThan",
                send_initial_events=True,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout,
            )
        return ListOptions(
            resource_version=self._position.rv,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
        )

    async def _watch_loop(self, synced: asyncio.Event, watch_list: bool) -> None:
        """Open watches one after another until an error ends the cycle."""
        while True:
            if self._position.take_stale():
                await self._relist_instead_of_replaying()
            self._position.watch_opened(watch_list)
            start = self.clock.now()
            events_before = self._events
            try:
                count = await self._stream(self._watch_options(watch_list), synced)
            except Exception as err:
                if isinstance(err, RelistRequiredError):
                    raise
                if watch_list and not synced.is_set():
                    watch_list = await self._after_failed_watch_list(err, synced)
                    continue
                watch_list = False
                now = self.clock.now()
                if (
                    isinstance(err, TruncatedStreamError)
                    and self._events == events_before
                    and now - start < _relist.VERY_SHORT_WATCH
                ):
                    raise VeryShortWatchError(
                        f"{self.name}: watch was cut within a second without an event ({err})"
                    ) from err
                self._internal_retry.after(err, now)
                action = _relist.classify_watch_error(err, self._internal_retry.should_retry(now))
                if action is WatchAction.RELIST_CURRENT:
                    self._resource_version_unavailable(self._position.rv, err)
                    raise
                if action is WatchAction.END_CYCLE:
                    raise
                if isinstance(err, WatchStalledError):
                    logger.info("%s; watching again", err)
                else:
                    logger.debug("%s: watch ended (%s); watching again", self.name, err)
                self._watch_restarts += 1
                if action is WatchAction.BACKOFF_REWATCH:
                    await self._back_off(_relist.retry_after(err))
                continue
            if watch_list and not synced.is_set():
                watch_list = await self._after_failed_watch_list(
                    WatchListUnsupportedError(
                        "the watch-list stream ended without the initial-events-end bookmark"
                    ),
                    synced,
                )
                continue
            watch_list = False
            if count == 0 and self.clock.now() - start < _relist.VERY_SHORT_WATCH:
                raise VeryShortWatchError(
                    f"{self.name}: watch lasted less than a second and delivered no event"
                )
            self._watch_restarts += 1

    async def _after_failed_watch_list(self, err: Exception, synced: asyncio.Event) -> bool:
        """Handle a watch-list that failed before its initial events ended.

        Returns whether to try a watch-list again (else a list has synced the store).
        """
        if _relist.is_watch_error_retriable(err) or isinstance(err, WatchStalledError):
            logger.info("%s: watch-list failed (%s); backing off", self.name, err)
            await self._back_off(_relist.retry_after(err))
            return True
        unavailable = _relist.is_resource_version_unavailable(err)
        if unavailable and not self._position.unavailable:
            # Once more at "", the current state; refused even there: list (below).
            self._resource_version_unavailable(self._position.rv, err)
            return True
        if not unavailable and _relist.refuses_watch_list(err):
            logger.info("%s: the server does not support watch-list (%s); listing", self.name, err)
            self._use_watch_list = False
        else:
            logger.warning("%s: watch-list failed (%s); falling back to a list", self.name, err)
        await self._list()
        synced.set()
        return False

    async def _stream(self, options: ListOptions, synced: asyncio.Event) -> int:
        """One watch connection, consumed in a child task next to an idle watchdog.

        Returns the number of events when the stream ends normally; raises the
        stream's error, or :class:`WatchStalledError` when the watchdog fired.
        The stream is closed before this returns, also on cancellation.
        """
        self._watches += 1
        self._heard_at = self.clock.now()
        idle_timeout = self._options.idle_timeout
        wait_changed = getattr(self._lw, "wait_changed", None)
        consumer = asyncio.create_task(self._consume(options, synced))
        if idle_timeout is None and not callable(wait_changed):
            try:
                return await consumer
            finally:
                await cancel_and_wait(consumer)
        watchdog = (
            asyncio.create_task(self._watchdog(idle_timeout)) if idle_timeout is not None else None
        )
        changed = asyncio.create_task(wait_changed()) if callable(wait_changed) else None
        try:
            waits = {task for task in (consumer, watchdog, changed) if task is not None}
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if consumer.done():
                return consumer.result()
            if changed is not None and changed.done():
                changed.result()
                raise RelistRequiredError(f"what {self.source} lists changed")
            assert watchdog is not None
            self._stalls += 1
            raise WatchStalledError(
                f"{self.name}: the watch of {self.source} was silent for at least "
                f"{watchdog.result():.0f} s (no event or bookmark; the idle limit is "
                f"{idle_timeout:g} s): treating it as dead"
            )
        finally:
            await cancel_and_wait(consumer)
            for task in (watchdog, changed):
                if task is not None:
                    await cancel_and_wait(task)

    async def _watchdog(self, idle: float) -> float:
        """Return how long no event arrived, once that is ``idle`` seconds or more
        (checked every idle/4)."""
        tick = idle / 4
        seen = self._events
        quiet_since = self.clock.now()
        while True:
            await self.clock.sleep(tick)
            now = self.clock.now()
            if self._events != seen:
                seen = self._events
                quiet_since = now
            elif now - quiet_since >= idle:
                return now - quiet_since

    async def _consume(self, options: ListOptions, synced: asyncio.Event) -> int:
        """Apply one stream's events; returns how many arrived.

        While a watch-list's initial events flow (``synced`` not set) they go to
        :meth:`_gather_initial_events`; after the bookmark that ends them the same
        stream goes on in :meth:`_apply_watch_events`.
        """
        before = self._events
        async with self._lw.watch(options) as stream:
            with_turn_marks = getattr(stream, "with_turn_marks", None)
            marked = callable(with_turn_marks)
            events: AsyncIterator[WatchEvent | None] = (
                with_turn_marks() if callable(with_turn_marks) else stream
            )
            if not synced.is_set():
                self._phase = ReflectorPhase.INITIAL_EVENTS
                if not await self._gather_initial_events(events, marked):
                    return self._events - before
                synced.set()
            self._phase = ReflectorPhase.WATCHING
            await self._apply_watch_events(events, marked)
        return self._events - before

    async def _gather_initial_events(
        self, events: AsyncIterator[WatchEvent | None], marked: bool
    ) -> bool:
        """A watch-list's initial events, gathered in a temporary store that
        replaces the real one in one step at the bookmark that ends them.

        Returns whether that bookmark came (``False``: the stream ended first, and
        what was gathered is dropped). Objects pass through the store's
        ``transformer`` (if it has one) as they are gathered. The whole of it runs
        in a :func:`~kubereflector.cache._gc.defer_full_collections` sync window.
        """
        initial = Cache(deletion_handling_meta_namespace_key_func)
        candidate = getattr(self._store, "transformer", None)
        transformer: Callable[[Any], Any] | None = candidate if callable(candidate) else None
        gathered_rv = ""

        def gathered_to(rv: str) -> None:
            nonlocal gathered_rv
            gathered_rv = rv

        batch = _Batch(self._writer(initial), gathered_to)
        with defer_full_collections(sync=True):
            async for event in events:
                if event is None:  # the loop's turn is next: write what came before
                    batch.flush()
                    continue
                self._events += 1
                etype, obj = event
                rv = self._checked_resource_version(etype, obj, change=False)
                if rv is None:
                    continue
                if etype == BOOKMARK:
                    if _relist.is_initial_events_end(get_metadata(obj)):
                        batch.flush()
                        final_rv = rv or gathered_rv
                        self._store.replace(initial.list(), final_rv)
                        self._replaced(final_rv)
                        logger.debug(
                            "%s: watch-list synced at resourceVersion %s", self.name, final_rv
                        )
                        return True
                elif etype in _CHANGES:
                    if transformer is None or etype == DELETED:
                        batch.changes.append((etype, obj))
                    else:
                        try:
                            batch.changes.append((etype, transformer(obj)))
                        except Exception as err:
                            self._log_unapplied(etype, err)
                else:
                    self._log_unknown(etype)
                    continue
                if rv:
                    batch.rv = rv
                if not marked:
                    batch.flush()
        return False

    async def _apply_watch_events(
        self, events: AsyncIterator[WatchEvent | None], marked: bool
    ) -> None:
        """Apply watch events to the store until the stream ends.

        The changes are written a batch at a time: those that arrived between two
        turns of the event loop, when the stream marks the turns
        (``with_turn_marks``, as the REST client's streams do), else one event at
        a time. A batch goes in one
        :meth:`~kubereflector.WatchChangeWriter.apply_watch_changes` call when the
        store has it; the resourceVersion is recorded after the batch. Nothing is
        held back across an ``await``: an error ends the stream after the
        changes before it are written.
        """
        batch = _Batch(self._writer(self._store), self._advanced)
        try:
            async for event in events:
                if event is None:  # the loop's turn is next: write what came before
                    batch.flush()
                    continue
                self._events += 1
                etype, obj = event
                rv = self._checked_resource_version(etype, obj, change=etype != BOOKMARK)
                if rv is None:
                    continue
                if etype in _CHANGES:
                    batch.changes.append((etype, obj))
                elif etype == BOOKMARK:
                    if rv:
                        self._position.bookmarked()
                else:
                    self._log_unknown(etype)
                    continue
                if rv:
                    batch.rv = rv
                if not marked:
                    batch.flush()
        finally:
            batch.flush()

    def _checked_resource_version(self, etype: str, obj: Any, *, change: bool) -> str | None:
        """The resourceVersion of a watch event's object (``""``: absent or
        malformed), or ``None`` when the event is to be skipped (logged: no
        metadata, or not the expected kind). Raises the error an ERROR event
        carries. ``change``: the event changes the store (see :meth:`_recordable`).
        """
        if etype == ERROR:
            if isinstance(obj, Mapping):
                raise error_from_status(obj)
            raise ApiError(
                500,
                "InternalError",
                f"a watch ERROR event of {self.source} carried a "
                f"{type(obj).__name__} instead of a Status",
            )
        if type(obj) is dict:
            meta = obj.get("metadata")
            kind = obj.get("kind")
        elif type(obj) is CompactObject:
            meta = obj.get("metadata")
            kind = obj.kind
        else:
            meta = get_metadata(obj)
            kind = getattr(obj, "kind", None)
        if meta is None:
            logger.error(
                "%s: %s event of %s for an object without metadata; skipped",
                self.name,
                etype,
                self.source,
            )
            return None
        expected_kind = self.expected_kind
        if expected_kind is not None and kind is not None and kind != expected_kind:
            logger.error(
                "%s: expected kind %s, but a %s event of %s carried a %r; skipped",
                self.name,
                expected_kind,
                etype,
                self.source,
                kind,
            )
            return None
        if type(meta) is dict:
            rv = meta.get("resourceVersion")
        elif type(meta) is CompactMetadata:
            rv = _compact_resource_version(meta)
        else:
            rv = _resource_version(meta)
        if type(rv) is str:
            return rv
        return self._recordable(rv, etype, change=change)

    def _writer(self, target: ReflectorStore[Any]) -> Callable[[list[WatchChange]], None]:
        """A function that applies a batch of changes to ``target``, in order,
        logging (and skipping) each change the target refuses; a target that
        raises instead is logged too, and the watch goes on."""
        apply = getattr(target, "apply_watch_changes", None)
        if not callable(apply):
            apply = functools.partial(_apply_one_by_one, target)

        def write(changes: list[WatchChange]) -> None:
            try:
                failed = apply(changes)
            except Exception as err:
                logger.error(
                    "%s: could not apply %d watch events of %s: %s",
                    self.name,
                    len(changes),
                    self.source,
                    err,
                )
                return
            for (etype, _), refusal in failed:
                self._log_unapplied(etype, refusal)

        return write

    def _log_unapplied(self, etype: str, err: Exception) -> None:
        logger.error("%s: could not apply a %s event of %s: %s", self.name, etype, self.source, err)

    def _log_unknown(self, etype: str) -> None:
        logger.error(
            "%s: unknown watch event type %r from %s; skipped", self.name, etype, self.source
        )

    def _replaced(self, rv: str) -> None:
        """A full sync (list or watch-list) handed the store its state at ``rv``."""
        self._lists += 1
        self._heard_at = self.clock.now()
        self._position.replaced(rv)
        self._tell_store(rv)

    def _advanced(self, rv: str) -> None:
        """Watch events up to ``rv`` were written to the store."""
        self._position.advanced(rv)
        self._tell_store(rv)

    def _tell_store(self, rv: str) -> None:
        if self._rv_updater is not None:
            self._rv_updater.update_resource_version(rv)

    async def _back_off(self, at_least: float) -> None:
        """Wait as :attr:`backoff` says (and at least ``at_least`` seconds); the
        phase that follows sets itself."""
        self._phase = ReflectorPhase.BACKING_OFF
        await self.backoff.wait(at_least=at_least)

    def _recordable(self, rv: object, what: str, *, change: bool = False) -> str:
        """``rv`` if it can be recorded, else ``""`` (absent). A malformed one is
        logged, at WARNING the first time (then DEBUG: a broken server would
        flood the log); on a ``change`` applied to the store it also leaves the
        RV held behind the store (see :meth:`SyncPoint.take_stale`)."""
        if _relist.is_malformed_resource_version(rv):
            if change:
                self._position.change_without_resource_version()
            level = logging.DEBUG if self._malformed_rv_logged else logging.WARNING
            self._malformed_rv_logged = True
            logger.log(
                level,
                "%s: the resourceVersion of a %s from %s is not a string (%s %s); "
                "ignored, resourceVersion stays %r",
                self.name,
                what,
                self.source,
                type(rv).__name__,
                reprlib.repr(rv),
                self._position.rv,
            )
        return _relist.resource_version_of(rv)

    async def _relist_instead_of_replaying(self) -> None:
        """The RV held is no position in the stream (see :meth:`SyncPoint.take_stale`):
        watching again from it would deliver changes a second time, or a delete
        of an object never seen, so list at ``""`` instead."""
        logger.info(
            "%s: resourceVersion %r is no position in the watch stream; listing "
            "instead of watching again from it",
            self.name,
            self._position.rv,
        )
        self._position.refused()
        await self._list()

    def _resource_version_unavailable(self, rv: str, err: BaseException) -> None:
        """``rv`` cannot be served (expired, too large, refused as invalid): the
        next sync is at ``""``, the current state."""
        self._position.refused()
        if _relist.is_invalid_resource_version(err):
            logger.warning(
                "%s: the server refused resourceVersion %r as invalid (%s); "
                "syncing from the current state",
                self.name,
                rv,
                err,
            )
        else:
            logger.info("%s: resourceVersion %r unavailable (%s); syncing anew", self.name, rv, err)

    async def _resync_loop(self, synced: asyncio.Event) -> None:
        """Every ``resync_period`` (once synced), ``store.resync()`` if ``should_resync`` agrees."""
        await synced.wait()
        while True:
            await self.clock.sleep(self.resync_period)
            if self.should_resync is None or self.should_resync():
                logger.debug("%s: resync", self.name)
                try:
                    self._store.resync()
                except Exception:
                    logger.exception("%s: store.resync() failed", self.name)

    def __repr__(self) -> str:
        return f"<Reflector {self.name} {self._phase.value} rv={self._position.rv!r}>"


_CHANGES: Final = frozenset((ADDED, MODIFIED, DELETED))


def _resource_version(meta: Any) -> str | None:
    if isinstance(meta, Mapping):
        return meta.get("resourceVersion")
    return getattr(meta, "resource_version", None)


class _Batch:
    """The watch changes that arrived since the event loop's last turn, and the
    last resourceVersion among them, until :meth:`flush` writes them (in order)
    and then records that resourceVersion. One stream's, on the Reflector's loop."""

    __slots__ = ("_record", "_write", "changes", "rv")

    def __init__(
        self, write: Callable[[list[WatchChange]], None], record: Callable[[str], None]
    ) -> None:
        self._write = write
        self._record = record
        self.changes: list[WatchChange] = []
        self.rv = ""

    def flush(self) -> None:
        """Write the changes, then record the resourceVersion (each if any)."""
        if self.changes:
            changes, self.changes = self.changes, []
            self._write(changes)
        if self.rv:
            rv, self.rv = self.rv, ""
            self._record(rv)
