"""The Controller, the simple informers built on it, and the event handler types.

A :class:`Controller` runs a :class:`~kubereflector.Reflector` that fills a queue
and pops the queue into a ``process`` function (client-go's ``controller``).
:func:`new_informer` and :func:`new_indexer_informer` wire one to a cache and one
event handler; :class:`~kubereflector.SharedIndexInformer` shares one cache
between many handlers.

Event handlers implement :class:`ResourceEventHandler`. Each method may be a plain
function or a coroutine function (and one handler may mix them): informers call
plain methods on a worker thread of the handler's own, and await coroutine
methods on the event loop, in a task of the handler's own, one notification
at a time and in order. Handlers must treat the objects they receive as
immutable: they are the cache's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Mapping, Sized
from typing import Any, Final, Generic

from ..backoff import Backoff
from ..clock import Clock
from ._deltas import apply_deltas, describe_item
from ._gc import defer_full_collections
from ._listener import Listener, Notification
from ._synced import SyncSignal
from .delta_fifo import Deltas, DeltaType, TransformFunc
from .fifo import RealFIFO
from .handlers import ResourceEventHandler, _describe_callable, _resolve_handler
from .keys import T, deletion_handling_meta_namespace_key_func
from .listwatch import ListerWatcher
from .queue import Item, PopProcessFunc, Queue, QueueClosed
from .reflector import Reflector, ReflectorOptions, WatchErrorHandler
from .store import Cache, Indexer, IndexFunc, Store, WatchChange, _apply_one_by_one

__all__ = [
    "AlreadyStartedError",
    "Controller",
    "new_indexer_informer",
    "new_informer",
]

logger = logging.getLogger("kubereflector.controller")

_YIELD_EVERY: Final = 128
"""Items popped in a row without waiting after which the pop loop lets other tasks run."""

_DELTA_TYPES: Final = {
    "ADDED": DeltaType.ADDED,
    "MODIFIED": DeltaType.UPDATED,
    "DELETED": DeltaType.DELETED,
}
"""The delta a watch event's change is queued as."""


class AlreadyStartedError(RuntimeError):
    """``run()`` was called on a controller or informer that is running or has run,
    or a setting that must come before the start was changed after it."""


class Controller(Generic[Item]):
    """Runs a Reflector into ``queue`` and pops the queue into ``process``
    (client-go's ``controller``).

    ``process(item, is_in_initial_list)`` gets what the queue pops (a
    :class:`~kubereflector.Deltas` for DeltaFIFO and RealFIFO, the object for a
    FIFO): a ``Controller[Item]`` pops from a ``Queue[Item]``. It runs on the
    event loop with the queue's lock held: it must not block or await. An
    exception it raises is logged with the item's key and popping goes on (the
    item is not requeued).

    ``process_batch(deltas, is_in_initial_list)``, when given and the queue can
    pop batches (:class:`~kubereflector.RealFIFO`), replaces ``process``: it
    gets a :class:`~kubereflector.Deltas` of up to 1,000 consecutive deltas of
    distinct keys, oldest first, never mixing the initial list with later
    deltas (client-go's ``ProcessBatch``). Same rules as ``process``.

    ``full_resync_period`` (seconds, ``0``: never), ``should_resync``,
    ``on_watch_error``, ``reflector_options`` (a
    :class:`~kubereflector.ReflectorOptions`), ``expected_kind``, ``backoff``
    and ``clock`` configure the Reflector; see :class:`~kubereflector.Reflector`.
    """

    def __init__(
        self,
        queue: Queue[Item],
        lister_watcher: ListerWatcher,
        process: PopProcessFunc[Item],
        *,
        process_batch: PopProcessFunc[Item] | None = None,
        expected_kind: str | None = None,
        full_resync_period: float = 0,
        should_resync: Callable[[], bool] | None = None,
        on_watch_error: WatchErrorHandler | None = None,
        reflector_options: ReflectorOptions | None = None,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        name: str | None = None,
    ) -> None:
        self._queue = queue
        self._process = process
        self._process_batch = process_batch
        self._reflector = Reflector(
            lister_watcher,
            _QueueWriter(
                queue,
                self._after_replace,
                None if process_batch is None else self._process_batch_item,
            ),
            name=name,
            expected_kind=expected_kind,
            resync_period=full_resync_period,
            should_resync=should_resync,
            options=reflector_options,
            clock=clock,
            backoff=backoff,
            on_watch_error=on_watch_error,
        )
        self._started = False
        self._stopped = False
        self._synced_seen = False
        self._sync_signal = SyncSignal()
        # Open from each replace until the queue is drained (see _after_replace).
        self._gc_window = contextlib.ExitStack()
        self._deferring = False

    @property
    def name(self) -> str:
        """The name in log messages (the Reflector's)."""
        return self._reflector.name

    @property
    def queue(self) -> Queue[Item]:
        """The queue between the Reflector and ``process``."""
        return self._queue

    @property
    def reflector(self) -> Reflector:
        """The Reflector filling the queue (for its ``stats()`` and settings)."""
        return self._reflector

    def has_synced(self) -> bool:
        """True once the items of the initial list have all been popped and processed."""
        return self._queue.has_synced()

    def last_sync_resource_version(self) -> str:
        """The resourceVersion the Reflector last synced to (``""`` before the first list)."""
        return self._reflector.last_sync_resource_version

    def is_stopped(self) -> bool:
        """Whether ``run()`` has ended."""
        return self._stopped

    async def run(self) -> None:
        """List, watch and process until cancelled (or until the queue is closed).

        On the way out the queue is closed and the Reflector stopped (its stream
        closed). Should the Reflector itself fail (a bug: it retries every API
        error), the queue is closed, what it holds is processed, and its error
        is raised from here. A Controller runs once: a second call raises
        :class:`AlreadyStartedError`.
        """
        if self._started:
            raise AlreadyStartedError(f"{self.name}: a controller can run only once")
        self._started = True
        reflector = asyncio.create_task(self._reflector.run(), name=f"{self.name} reflector")
        reflector.add_done_callback(lambda _task: self._queue.close())
        try:
            await self._process_loop()
        finally:
            self._queue.close()
            if not reflector.done():
                reflector.cancel()
            try:
                with contextlib.suppress(asyncio.CancelledError):
                    await reflector
            finally:
                self._gc_window.close()
                self._stopped = True
                self._sync_signal.notify()

    async def _process_loop(self) -> None:
        queue = self._queue
        process = self._process_item
        pop_batch = getattr(queue, "pop_batch", None)
        if self._process_batch is None or not callable(pop_batch):
            pop_batch = None
        in_a_row = 0
        while True:
            try:
                if pop_batch is not None:
                    in_a_row += len(await pop_batch(self._process_batch_item))
                else:
                    await queue.pop(process)
                    in_a_row += 1
            except QueueClosed:
                return
            self._check_synced()
            if self._deferring and _is_drained(queue):
                self._deferring = False
                self._gc_window.close()
            if in_a_row >= _YIELD_EVERY:
                in_a_row = 0
                await asyncio.sleep(0)

    def _check_synced(self) -> None:
        """Wake sync waiters the first time the queue reports synced."""
        if not self._synced_seen and self._queue.has_synced():
            self._synced_seen = True
            self._sync_signal.notify()

    def _after_replace(self) -> None:
        """After the Reflector's ``replace`` (a list or a relist): the new objects
        are a bulk until the queue has been drained of them, so the collector's
        full collections stay deferred until then (the Reflector's own window
        ends at the replace; see :mod:`kubereflector.cache._gc`); a queue that took
        nothing (an empty initial list in a per-object queue) syncs at once."""
        if not self._deferring and not _is_drained(self._queue):
            self._gc_window.enter_context(defer_full_collections(sync=True))
            self._deferring = True
        self._check_synced()

    def _process_item(self, item: Item, is_in_initial_list: bool) -> None:
        try:
            self._process(item, is_in_initial_list)
        except Exception:
            logger.exception("%s: processing %s failed", self.name, describe_item(item))

    def _process_batch_item(self, batch: Item, is_in_initial_list: bool) -> None:
        assert self._process_batch is not None
        try:
            self._process_batch(batch, is_in_initial_list)
        except Exception:
            logger.exception("%s: processing a batch failed", self.name)

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running" if self._started else "new"
        return f"<Controller {self.name} {state} synced={self.has_synced()}>"


def _is_drained(queue: Queue) -> bool:
    """Whether ``queue`` holds nothing to pop."""
    if isinstance(queue, Sized):
        return not len(queue)
    return not queue.list_keys()


class _QueueWriter:
    """The queue as the Reflector writes it.

    * ``replace`` is followed by ``after_replace`` (an empty initial list syncs
      the queue with nothing to pop, so the pop loop alone would never notice).
    * With ``process_batch`` and a queue that offers ``process_or_queue``
      (RealFIFO), the watch's changes come a batch at a time
      (``apply_watch_changes``), and a batch that finds nothing queued ahead of
      it, once the initial list is processed, is processed at once, in the
      Reflector's task, instead of being queued for the pop loop: the same
      processing, in the same order, on the same loop, minus the queue round
      trip and a task switch per batch (and the objects reach the cache while
      still young, which spares the collector). A backlog is left to the pop
      loop.
    * ``add``/``update``/``delete`` are the queue's own bound methods.
    """

    __slots__ = ("_after_replace", "_fast", "_queue", "add", "delete", "resync", "update")

    def __init__(
        self,
        queue: Queue[Any],
        after_replace: Callable[[], None],
        process_batch: PopProcessFunc[Any] | None,
    ) -> None:
        self._queue = queue
        self._after_replace = after_replace
        self.resync = queue.resync
        self.add = queue.add
        self.update = queue.update
        self.delete = queue.delete
        process_or_queue = getattr(queue, "process_or_queue", None)
        self._fast: Callable[[list[Any]], list[tuple[int, Exception]]] | None = None
        if process_batch is not None and callable(process_or_queue):
            self._fast = functools.partial(process_or_queue, process_batch=process_batch)

    def apply_watch_changes(
        self, changes: list[WatchChange]
    ) -> list[tuple[WatchChange, Exception]]:
        """See :class:`~kubereflector.WatchChangeWriter`."""
        if self._fast is None:
            return _apply_one_by_one(self, changes)
        types = _DELTA_TYPES
        failed = self._fast([(types[etype], obj) for etype, obj in changes])
        return [(changes[i], err) for i, err in failed]

    @property
    def transformer(self) -> TransformFunc | None:
        """The queue's transformer, which a watch-list applies to its initial objects."""
        transformer: TransformFunc | None = getattr(self._queue, "transformer", None)
        return transformer

    def replace(self, items: list[Any], resource_version: str) -> None:
        self._queue.replace(items, resource_version)
        self._after_replace()


# -- simple informers -------------------------------------------------------------------


class _InformerController(Controller[Deltas[T]]):
    """A Controller that also runs the consumer of its one handler's listener."""

    def __init__(
        self,
        queue: Queue[Deltas[T]],
        lister_watcher: ListerWatcher,
        *,
        handler: object,
        store: Cache[T],
        **kwargs: Any,
    ) -> None:
        super().__init__(queue, lister_watcher, self._handle, process_batch=self._handle, **kwargs)
        self._listener = Listener(
            _resolve_handler(handler),
            name=f"{self.name}/{_describe_callable(handler)}",
            requested_resync_period=0,
            resync_period=0,
            now=0,
            upstream_has_synced=self.has_synced,
            on_synced=self._sync_signal.notify,
        )
        self._store = store

    def _handle(self, deltas: Deltas[T], is_in_initial_list: bool) -> None:
        notifications: list[Notification] = []
        initial_adds = apply_deltas(
            self._store, deltas, is_in_initial_list, notifications, self.name
        )
        bulk = deltas[0].type is DeltaType.REPLACED_ALL  # always alone in its batch
        self._listener.add_batch(notifications, initial_adds, bulk=bulk)

    async def run(self) -> None:
        if self._started:
            raise AlreadyStartedError(f"{self.name}: a controller can run only once")
        self._listener.start(asyncio.get_running_loop())
        try:
            await super().run()
        finally:
            self._listener.stop(cancel=True)
            await self._listener.wait_stopped()


def _informer(
    lister_watcher: ListerWatcher,
    handler: ResourceEventHandler[T],
    store: Cache[T],
    resync_period: float,
    expected_kind: str | None,
    transform: TransformFunc | None,
    clock: Clock | None,
    reflector_options: ReflectorOptions | None,
) -> Controller[Deltas[T]]:
    return _InformerController(
        RealFIFO(transformer=transform, atomic=True),
        lister_watcher,
        expected_kind=expected_kind,
        full_resync_period=resync_period,
        clock=clock,
        reflector_options=reflector_options,
        handler=handler,
        store=store,
    )


def new_informer(
    lister_watcher: ListerWatcher,
    handler: ResourceEventHandler[T],
    *,
    resync_period: float = 0,
    expected_kind: str | None = None,
    transform: TransformFunc | None = None,
    clock: Clock | None = None,
    reflector_options: ReflectorOptions | None = None,
) -> tuple[Store[T], Controller[Deltas[T]]]:
    """A cache kept in step with ``lister_watcher``, and the Controller that
    fills it and tells ``handler`` (client-go's ``NewInformer``). The store holds
    what the handler takes (:data:`~kubereflector.KubeObject` unless it says otherwise).

    Only read the returned store: writing to it would make the notifications
    wrong. ``resync_period`` (seconds; ``0``: never) makes every cached object
    reach ``on_update`` again that often. ``transform`` is applied to each
    object as it enters the queue (see :data:`~kubereflector.TransformFunc`).
    The handler gets its notifications in order, through a buffer of its own,
    on a worker thread (plain methods) or the event loop (coroutine methods).
    ``reflector_options`` (a :class:`~kubereflector.ReflectorOptions`) tune
    listing, watching and recovery, as for a :class:`~kubereflector.SharedIndexInformer`.
    Start it with ``await controller.run()``.
    """
    store: Cache[T] = Cache(deletion_handling_meta_namespace_key_func)
    controller = _informer(
        lister_watcher,
        handler,
        store,
        resync_period,
        expected_kind,
        transform,
        clock,
        reflector_options,
    )
    return store, controller


def new_indexer_informer(
    lister_watcher: ListerWatcher,
    handler: ResourceEventHandler[T],
    indexers: Mapping[str, IndexFunc[T]],
    *,
    resync_period: float = 0,
    expected_kind: str | None = None,
    transform: TransformFunc | None = None,
    clock: Clock | None = None,
    reflector_options: ReflectorOptions | None = None,
) -> tuple[Indexer[T], Controller[Deltas[T]]]:
    """Like :func:`new_informer`, with an Indexer holding ``indexers``
    (client-go's ``NewIndexerInformer``)."""
    indexer = Cache(deletion_handling_meta_namespace_key_func, indexers)
    controller = _informer(
        lister_watcher,
        handler,
        indexer,
        resync_period,
        expected_kind,
        transform,
        clock,
        reflector_options,
    )
    return indexer, controller
