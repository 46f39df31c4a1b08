"""SharedIndexInformer: one cache, kept in step with one resource, shared by many handlers.

client-go's ``sharedIndexInformer``. ``await informer.run()`` starts a
:class:`~kubereflector.Controller` (Reflector -> queue -> pop) whose ``process``
updates the indexer and hands one notification per change to every registered
handler. Each handler registration has its own unbounded, ordered buffer and its
own consumer, so a slow or failing handler delays only itself; see
:mod:`kubereflector.cache.controller` for where handlers run.

When a handler gets a notification, the cache is at least as fresh as the
notification, possibly fresher: after an add then a delete, the cache may no
longer hold the object the add announced.

Thread-safety: ``run()`` is a coroutine on one event loop. Everything else
(``add_event_handler``, ``remove_event_handler``, ``has_synced``, ``stats``,
the ``indexer`` reads, ...) may be called from the loop or from any thread.
A handler added while deltas flow is joined atomically: nothing is processed
between the snapshot of the cache it is replayed and the first notification it
buffers afterwards, so no event is lost or doubled.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal

from ..backoff import Backoff
from ..clock import Clock, RealClock
from ._deltas import apply_deltas
from ._listener import ADD, UPDATE, Listener, Notification
from ._mutation_detector import CacheMutationDetector, mutation_detector_enabled
from ._processor import Processor, determine_resync_period
from ._synced import SyncSignal
from .compact import ObjectMode, _check_object_mode, _compact_transform
from .controller import AlreadyStartedError, Controller
from .delta_fifo import DeltaFIFO, Deltas, DeltaType, TransformFunc
from .fifo import RealFIFO
from .handlers import ResourceEventHandler, _describe_callable, _resolve_handler
from .keys import T, deletion_handling_meta_namespace_key_func
from .listers import Lister
from .listwatch import ListerWatcher
from .queue import Queue
from .reflector import ReflectorOptions, WatchErrorHandler, checked_options
from .store import Cache, Indexer, IndexFunc

__all__ = [
    "HandlerStats",
    "InformerStats",
    "InformerStoppedError",
    "Registration",
    "SharedIndexInformer",
    "wait_for_cache_sync",
]

logger = logging.getLogger("kubereflector.shared_informer")

_REPLACED_ALL = DeltaType.REPLACED_ALL

MINIMUM_RESYNC_PERIOD = 1.0
"""Seconds; a shorter handler resync period is raised to this (as client-go)."""


class InformerStoppedError(RuntimeError):
    """The informer has stopped: it takes no more handlers or indexers."""


@dataclass(frozen=True, slots=True)
class HandlerStats:
    """One registration's counters (a snapshot)."""

    name: str
    pending: int
    """Notifications buffered, not yet taken by the handler's consumer."""
    delivered: int
    """Notifications handled without an exception."""
    failures: int
    """Notifications whose handler (or filter) raised."""
    resync_period: float
    """The effective resync period in seconds (``0``: never)."""


@dataclass(frozen=True, slots=True)
class InformerStats:
    """What an informer has done so far (a snapshot, for observability)."""

    objects: int
    """Objects in the cache."""
    queued: int
    """Items waiting in the queue between the Reflector and the cache."""
    deltas: int
    """Changes applied to the cache, one per notification to the handlers (a
    relist counts one per object)."""
    events: int
    """Watch events received by the Reflector, bookmarks included."""
    lists: int
    relists: int
    watches: int
    watch_restarts: int
    stalls: int
    last_event_at: float | None
    """The informer clock's ``now()`` when the last delta was applied (``None``: never)."""
    last_sync_resource_version: str
    handlers: tuple[HandlerStats, ...]
    watch_silence: float | None = None
    """Seconds since the Reflector last heard from the server (a watch event or
    bookmark, a list, a watch opened; ``None``: never, or not started): a watch that
    stays silent well past the Reflector's ``idle_timeout`` is stuck. Events are
    noticed by the snapshots, so its resolution is the time between two ``stats()``
    calls (nothing is timed on the watch path)."""

    @property
    def pending(self) -> int:
        """Notifications pending over all handlers."""
        return sum(h.pending for h in self.handlers)


class Registration(Generic[T]):
    """The handle of one ``add_event_handler`` (client-go's
    ``ResourceEventHandlerRegistration``); pass it to ``remove_event_handler``.
    Made by :meth:`SharedIndexInformer.add_event_handler`, never directly.
    Thread-safe."""

    __slots__ = ("_handler", "_informer", "_listener")

    def __init__(
        self,
        informer: SharedIndexInformer[T],
        handler: ResourceEventHandler[T],
        listener: Listener,
    ) -> None:
        self._informer = informer
        self._handler = handler
        self._listener = listener

    @property
    def handler(self) -> ResourceEventHandler[T]:
        """The handler registered."""
        return self._handler

    @property
    def informer(self) -> SharedIndexInformer[T]:
        """The informer it is registered with."""
        return self._informer

    @property
    def name(self) -> str:
        """The name in log messages and :class:`HandlerStats`."""
        return self._listener.name

    @property
    def resync_period(self) -> float:
        """The effective resync period in seconds (``0``: never)."""
        return self._listener.resync_period

    @property
    def pending(self) -> int:
        """Notifications buffered for this handler and not yet taken."""
        return self._listener.pending

    def has_synced(self) -> bool:
        """True once the informer has synced and this handler has handled every
        notification of the initial list (for a handler added late: of the
        replay of the cache it got). Thread-safe."""
        return self._listener.has_synced()

    def is_removed(self) -> bool:
        """True once :meth:`SharedIndexInformer.remove_event_handler` removed it."""
        return self._listener.stopped

    def __repr__(self) -> str:
        return f"<Registration {self.name} pending={self.pending} synced={self.has_synced()}>"


class SharedIndexInformer(Generic[T]):
    """A cache of one resource, shared by event handlers (client-go's
    ``SharedIndexInformer``).

    ``SharedIndexInformer[T]`` caches objects of type ``T``: its indexer, lister
    and handlers are typed by it. Plain ``SharedIndexInformer`` caches
    :data:`~kubereflector.KubeObject` objects, the decoded JSON a ListerWatcher gives;
    a factory's ``informer_for(Pod)`` is a ``SharedIndexInformer[Pod]`` of the
    model's (a ``TypedDict`` over that same JSON: in compact mode, read-only
    objects typed as the model for reading); parametrise it
    (``SharedIndexInformer[Pod](lw)``) for a ListerWatcher of your own, or when a
    transform turns the objects into something else. The type is not checked at
    runtime.

    ``default_resync`` (seconds, ``0``: never) is the resync period of handlers
    added without one, and the informer's initial resync check period.
    ``indexers`` are added to the cache. ``queue`` picks the queue between the
    Reflector and the cache: ``"real"`` (an atomic RealFIFO, every event in
    order and a relist as one step: the cache holds the whole new list before
    any handler hears of it; the default) or ``"delta"`` (DeltaFIFO, events
    merged per object).
    ``reflector_options`` (a :class:`~kubereflector.ReflectorOptions`) tune how
    the Reflector lists, watches and recovers: stall detection, backoff, page
    size, watch-list, watch timeouts, retries of internal errors.
    ``clock`` drives resyncs and backoff (inject a FakeClock in tests);
    ``backoff`` replaces the Backoff built from ``reflector_options`` with an
    object of your own (e.g. one that reports its waits).
    ``object_mode`` picks how objects are stored: ``"dict"`` (decoded JSON, the
    default) or ``"compact"`` (:class:`~kubereflector.CompactObject`: decoded
    metadata and the raw JSON of the rest, about a quarter of the memory, read
    only; see :mod:`kubereflector.cache.compact`), or ``"compact-protobuf"``
    (compact, and the built-in kinds listed in protobuf and kept as it; see
    :mod:`kubereflector.protobuf`; its first sync is a list unless
    ``reflector_options`` say otherwise, as the watch stays JSON). In compact
    mode a ListerWatcher
    with a ``with_object_mode`` method
    (:class:`~kubereflector.client.ResourceListWatch`) is asked to decode
    compactly; objects that arrive as dicts are made compact as they enter
    the queue, before the transform.

    Run it with ``await informer.run()`` (until cancelled); an informer runs once.
    """

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        *,
        expected_kind: str | None = None,
        default_resync: float = 0,
        indexers: Mapping[str, IndexFunc[T]] | None = None,
        queue: Literal["real", "delta"] = "real",
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        reflector_options: ReflectorOptions | None = None,
        object_mode: ObjectMode = "dict",
    ) -> None:
        self._object_mode = _check_object_mode(object_mode)
        if default_resync < 0:
            raise ValueError(f"default_resync must be >= 0 (got {default_resync})")
        if queue not in ("real", "delta"):
            raise ValueError(f"queue must be 'real' or 'delta' (got {queue!r})")
        if self._object_mode != "dict":
            with_object_mode = getattr(lister_watcher, "with_object_mode", None)
            if callable(with_object_mode):
                lister_watcher = with_object_mode(self._object_mode)
        self._lw = lister_watcher
        self._expected_kind = expected_kind
        self._queue_kind = queue
        self._clock: Clock = clock if clock is not None else RealClock()
        self._backoff = backoff
        if reflector_options is None and self._object_mode == "compact-protobuf":
            # Protobuf comes with a list (the watch stays JSON): sync with one.
            reflector_options = ReflectorOptions(use_watch_list=False)
        self._reflector_options = checked_options(reflector_options, "reflector_options")
        self._indexer: Cache[T] = Cache(deletion_handling_meta_namespace_key_func, indexers)
        self._processor = Processor(self._clock)
        self._default_resync = float(default_resync)
        self._resync_check_period = float(default_resync)
        self._transform: TransformFunc | None = None
        self._watch_error_handler: WatchErrorHandler | None = None
        self._name = f"informer({expected_kind or type(lister_watcher).__name__})"
        # _started_lock guards the lifecycle and the handler table; _block_deltas
        # is held while a delta is applied and distributed, and while a late
        # handler snapshots the cache (client-go's blockDeltas).
        self._started_lock = threading.Lock()
        self._block_deltas = threading.RLock()
        self._started = False
        self._stopped = False
        self._controller: Controller[Deltas[T]] | None = None
        self._registrations: dict[Registration[T], None] = {}
        self._handler_count = 0
        self._sync_signal = SyncSignal()
        self._lister: Lister[T] | None = None
        self._deltas = 0
        self._last_event_at: float | None = None
        self._mutations = CacheMutationDetector(self._name) if mutation_detector_enabled() else None

    @property
    def reflector_options(self) -> ReflectorOptions:
        """How this informer's Reflector lists, watches and recovers."""
        return self._reflector_options

    # -- the cache ------------------------------------------------------------------

    @property
    def object_mode(self) -> ObjectMode:
        """How objects are stored: ``"dict"`` or ``"compact"``."""
        return self._object_mode

    @property
    def store(self) -> Indexer[T]:
        """The cache (the same object as :attr:`indexer`). Read it from any thread;
        never write to it."""
        return self._indexer

    @property
    def indexer(self) -> Indexer[T]:
        """The cache, with its indexes. Read it from any thread; never write to it."""
        return self._indexer

    @property
    def lister(self) -> Lister[T]:
        """A :class:`~kubereflector.Lister` over the cache."""
        if self._lister is None:
            self._lister = Lister(self._indexer)
        return self._lister

    def add_indexers(self, indexers: Mapping[str, IndexFunc[T]]) -> None:
        """Add indexes; allowed before and after the start (objects already cached
        are indexed at once). Raises :class:`ValueError` for a name already
        added, :class:`InformerStoppedError` once stopped."""
        with self._started_lock:
            if self._stopped:
                raise InformerStoppedError(f"{self._name} has stopped: indexers not added")
            self._indexer.add_indexers(indexers)

    # -- settings that must come before run() ---------------------------------------------

    def set_transform(self, transform: TransformFunc | None) -> None:
        """Transform each object as it enters the queue, before the cache and the
        handlers see it (see :data:`~kubereflector.TransformFunc`; it must be
        idempotent). In compact mode it gets compact objects: one that writes
        to them gets a decoded copy instead (slower; see
        :func:`~kubereflector.cache.compact._compact_transform`). Raises
        :class:`AlreadyStartedError` after the start."""
        with self._started_lock:
            if self._started:
                raise AlreadyStartedError(f"{self._name} has started: set the transform before")
            self._transform = transform

    def set_watch_error_handler(self, handler: WatchErrorHandler) -> None:
        """Called with every error that ends a list-and-watch cycle (instead of the
        default logging). Raises :class:`AlreadyStartedError` after the start."""
        with self._started_lock:
            if self._started:
                raise AlreadyStartedError(
                    f"{self._name} has started: set the watch error handler before"
                )
            self._watch_error_handler = handler

    # -- handlers -----------------------------------------------------------------------

    def add_event_handler(
        self, handler: ResourceEventHandler[T], resync_period: float | None = None
    ) -> Registration[T]:
        """Register ``handler``; it gets every later change, in order.

        A handler added after the start first gets ``on_add(obj,
        is_in_initial_list=True)`` for each cached object, with nothing lost or
        doubled in between. ``resync_period`` (seconds; ``None``: the informer's
        ``default_resync``; ``0``: never) follows client-go: at least 1 s; before
        the start a shorter period than the informer's check period lowers that
        period, after the start it is raised to it.

        Raises :class:`TypeError` if ``handler`` is not a ResourceEventHandler,
        :class:`InformerStoppedError` once the informer has stopped. Thread-safe.
        """
        calls = _resolve_handler(handler)
        period = self._default_resync if resync_period is None else float(resync_period)
        if period < 0:
            raise ValueError(f"resync_period must be >= 0 (got {resync_period})")
        with self._started_lock:
            if self._stopped:
                raise InformerStoppedError(f"{self._name} has stopped: handler not added")
            if period > 0:
                if period < MINIMUM_RESYNC_PERIOD:
                    logger.warning(
                        "%s: resync period %gs is too small; using the minimum of %gs",
                        self._name,
                        period,
                        MINIMUM_RESYNC_PERIOD,
                    )
                    period = MINIMUM_RESYNC_PERIOD
                if period < self._resync_check_period:
                    if self._started:
                        logger.warning(
                            "%s: resync period %gs is shorter than the resync check period "
                            "and the informer has started; using %gs",
                            self._name,
                            period,
                            self._resync_check_period,
                        )
                        period = self._resync_check_period
                    else:
                        self._resync_check_period = period
                        self._processor.resync_check_period_changed(period)
            self._handler_count += 1
            listener = Listener(
                calls,
                name=f"{self._name}/{self._handler_count}:{_describe_callable(handler)}",
                requested_resync_period=period,
                resync_period=determine_resync_period(period, self._resync_check_period),
                now=self._processor.clock.now(),
                upstream_has_synced=self.has_synced,
                on_synced=self._sync_signal.notify,
            )
            registration = Registration(self, handler, listener)
            self._registrations[registration] = None
            if not self._started:
                self._processor.add_listener(listener)
                return registration
            # Join while no delta is applied: replay the cache, then go live.
            with self._block_deltas:
                self._processor.add_listener(listener)
                listener.add_initial(self._indexer.list())
            return registration

    def remove_event_handler(self, registration: Registration[T]) -> None:
        """Stop delivering to a registration: its pending notifications are dropped
        and its consumer ends after the notification in hand. Raises
        :class:`ValueError` for a registration this informer does not hold (never
        added here, or already removed). Thread-safe."""
        with self._started_lock, self._block_deltas:
            if registration not in self._registrations:
                raise ValueError(f"{registration!r} is not registered with {self._name}")
            del self._registrations[registration]
            self._processor.remove_listener(registration._listener)
        self._sync_signal.notify()

    @property
    def registrations(self) -> list[Registration[T]]:
        """The registrations not removed, in the order they were added."""
        with self._started_lock:
            return list(self._registrations)

    # -- state --------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """True once the initial list has been applied to the cache (and stays so)."""
        controller = self._controller
        return controller is not None and controller.has_synced()

    def last_sync_resource_version(self) -> str:
        """The resourceVersion the Reflector last synced to (``""`` before the start)."""
        controller = self._controller
        return "" if controller is None else controller.last_sync_resource_version()

    def has_started(self) -> bool:
        """True once :meth:`run` has been called."""
        return self._started

    def is_stopped(self) -> bool:
        """True once ``run()`` has ended."""
        return self._stopped

    def full_syncs(self) -> int:
        """The full syncs its Reflector has applied (the first list or watch-list, then
        each relist; 0 before :meth:`run`): ``stats().lists``, cheaply, for per-write
        callers. Thread-safe."""
        controller = self._controller
        return 0 if controller is None else controller.reflector.full_syncs

    def stats(self) -> InformerStats:
        """A snapshot of the informer's counters. Thread-safe."""
        controller = self._controller
        silence = None
        if controller is not None:
            r = controller.reflector.stats()
            counters = (r.events, r.lists, r.relists, r.watches, r.watch_restarts, r.stalls)
            if r.last_heard_at is not None:
                silence = max(0.0, self._clock.now() - r.last_heard_at)
            queue: Any = controller.queue
            queued = len(queue) if hasattr(queue, "__len__") else 0
        else:
            counters = (0, 0, 0, 0, 0, 0)
            queued = 0
        events, lists, relists, watches, watch_restarts, stalls = counters
        handlers = tuple(
            HandlerStats(
                name=listener.name,
                pending=listener.pending,
                delivered=listener.delivered,
                failures=listener.failures,
                resync_period=listener.resync_period,
            )
            for listener in self._processor.listeners()
        )
        return InformerStats(
            objects=len(self._indexer),
            queued=queued,
            deltas=self._deltas,
            events=events,
            lists=lists,
            relists=relists,
            watches=watches,
            watch_restarts=watch_restarts,
            stalls=stalls,
            last_event_at=self._last_event_at,
            last_sync_resource_version=self.last_sync_resource_version(),
            handlers=handlers,
            watch_silence=silence,
        )

    # -- running ------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep the cache in step and notify the handlers until cancelled.

        Cancelling stops the Reflector (closing its stream), the queue and every
        handler consumer (coroutine handlers in flight are cancelled; a plain
        handler in flight is waited for); then :meth:`is_stopped` is true. An
        informer runs once: calling ``run()`` again raises
        :class:`AlreadyStartedError`. Several informers can run on one loop, each
        in its own task.
        """
        loop = asyncio.get_running_loop()
        with self._started_lock:
            if self._stopped:
                raise AlreadyStartedError(
                    f"{self._name} has stopped; an informer cannot be restarted"
                )
            if self._started:
                raise AlreadyStartedError(f"{self._name} is already running")
            controller = Controller(
                self._new_queue(),
                self._lw,
                self._handle_deltas,
                process_batch=self._handle_deltas,
                expected_kind=self._expected_kind,
                full_resync_period=self._resync_check_period,
                should_resync=self._processor.should_resync,
                on_watch_error=self._watch_error_handler,
                clock=self._clock,
                backoff=self._backoff,
                reflector_options=self._reflector_options,
                name=self._name,
            )
            controller._sync_signal = self._sync_signal
            self._controller = controller
            self._started = True
            self._processor.start(loop)
        try:
            await controller.run()
        finally:
            if self._mutations is not None:
                self._mutations.log()
            with self._started_lock:
                self._stopped = True
            try:
                await self._processor.stop()
            finally:
                self._sync_signal.notify()

    def _new_queue(self) -> Queue[Deltas[T]]:
        transform = self._transform
        if self._object_mode != "dict":
            transform = _compact_transform(transform)
        if self._queue_kind == "delta":
            return DeltaFIFO(
                known_objects=self._indexer,
                emit_delta_type_replaced=True,
                transformer=transform,
            )
        return RealFIFO(transformer=transform, atomic=True)

    def _handle_deltas(self, deltas: Deltas[T], is_in_initial_list: bool) -> None:
        notifications: list[Notification] = []
        with self._block_deltas:
            self._last_event_at = self._clock.now()
            initial_adds = apply_deltas(
                self._indexer, deltas, is_in_initial_list, notifications, self._name
            )
            if self._mutations is not None:
                _remember(self._mutations, notifications)
            self._deltas += len(notifications)
            bulk = deltas[0].type is _REPLACED_ALL  # always alone in its batch
            self._processor.distribute(notifications, initial_adds, bulk=bulk)

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running" if self._started else "new"
        return (
            f"<SharedIndexInformer {self._name} {state} objects={len(self._indexer)} "
            f"handlers={len(self._registrations)} synced={self.has_synced()}>"
        )


def _remember(detector: CacheMutationDetector, notifications: list[Notification]) -> None:
    """Give the mutation detector the objects the notifications put in the cache."""
    for kind, obj, new in notifications:
        if kind == ADD:
            detector.add_object(obj)
        elif kind == UPDATE:
            detector.add_object(new)


# -- waiting for caches ----------------------------------------------------------------

_Syncable = SharedIndexInformer[Any] | Registration[Any] | Controller[Any]


def _sync_state(item: _Syncable) -> bool | None:
    """True: synced; False: can never sync (stopped or removed first); None: not yet."""
    if item.has_synced():
        return True
    if isinstance(item, Registration):
        if item.is_removed() or item.informer.is_stopped():
            return False
    elif item.is_stopped():
        return False
    return None


def _signal_of(item: _Syncable) -> SyncSignal:
    if isinstance(item, Registration):
        return item.informer._sync_signal
    return item._sync_signal


async def wait_for_cache_sync(
    *items: _Syncable, timeout: float | None = None, clock: Clock | None = None
) -> bool:
    """Wait until every informer, registration or controller in ``items`` has
    synced (client-go's ``WaitForCacheSync``).

    Returns ``True`` once all have; ``False`` when ``timeout`` seconds (of
    ``clock``, the real monotonic clock by default) pass first, or when one of
    them can no longer sync (its informer stopped, or it was removed). Waits on
    events, never polls. Cancelling the wait raises ``CancelledError`` as usual.
    """
    for item in items:
        if not isinstance(item, SharedIndexInformer | Registration | Controller):
            raise TypeError(
                "wait_for_cache_sync takes informers, registrations and controllers, "
                f"not {type(item).__name__}"
            )
    loop = asyncio.get_running_loop()
    signals = {id(s): s for s in map(_signal_of, items)}.values()
    timer: asyncio.Future[None] | None = None
    if timeout is not None:
        timer = asyncio.ensure_future((clock or RealClock()).sleep(timeout))
    try:
        while True:
            fut: asyncio.Future[None] = loop.create_future()
            for signal in signals:
                signal.subscribe(fut)
            try:
                states = [_sync_state(item) for item in items]
                if all(states):
                    return True
                if False in states:
                    return False
                if timer is None:
                    await fut
                else:
                    await asyncio.wait({fut, timer}, return_when=asyncio.FIRST_COMPLETED)
                    if timer.done() and not fut.done():
                        return all(_sync_state(item) for item in items)
            finally:
                for signal in signals:
                    signal.unsubscribe(fut)
                fut.cancel()
    finally:
        if timer is not None and not timer.done():
            timer.cancel()
            await asyncio.wait({timer})
