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
import inspect
import logging
from collections.abc import Callable, Mapping, Sized
from typing import Any, Final, Generic, Protocol, runtime_checkable

from ..backoff import Backoff
from ..clock import Clock
from ._gc import defer_full_collections
from ._listener import ADD, DELETE, UPDATE, Calls, Listener, Notification, Route
from ._synced import SyncSignal
from .delta_fifo import Deltas, DeltaType, ReplacedAllInfo, TransformFunc
from .fifo import RealFIFO
from .keys import DeletedFinalStateUnknown, T, T_contra, deletion_handling_meta_namespace_key_func
from .listwatch import ListerWatcher
from .queue import Item, PopProcessFunc, Queue, QueueClosed
from .reflector import Reflector, ReflectorOptions, WatchErrorHandler
from .store import Cache, Indexer, IndexFunc, Store, WatchChange, _apply_one_by_one

__all__ = [
    "AlreadyStartedError",
    "Controller",
    "FilteringResourceEventHandler",
    "ResourceEventHandler",
    "ResourceEventHandlerDetailedFuncs",
    "ResourceEventHandlerFuncs",
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


# -- event handlers -----------------------------------------------------------------


@runtime_checkable
class ResourceEventHandler(Protocol[T_contra]):
    """Receives an informer's notifications (client-go's ``ResourceEventHandler``);
    a ``ResourceEventHandler[T]`` handles objects of type ``T`` (plain
    ``ResourceEventHandler``: :data:`~kubereflector.KubeObject`).

    * ``on_add(obj, is_in_initial_list)``: an object appeared in the cache;
      ``is_in_initial_list`` is true for the objects of the initial list (and of
      the replay a handler added late receives).
    * ``on_update(old, new)``: an object in the cache was replaced. ``old`` is the
      last state the cache held (several changes may have been merged), and a
      relist or a periodic resync calls it even when nothing changed.
    * ``on_delete(obj)``: an object left the cache. ``obj`` is its last known state,
      or a :class:`~kubereflector.DeletedFinalStateUnknown` when the deletion was
      only noticed by a relist (hence the type ``T | DeletedFinalStateUnknown[T]``).

    Each method may be a plain function or a coroutine function; the return
    value is ignored and an exception is logged (with the object's key) without
    stopping further notifications.
    """

    def on_add(self, obj: T_contra, is_in_initial_list: bool) -> object:
        """An object appeared in the cache (see the class documentation)."""
        ...

    def on_update(self, old: T_contra, new: T_contra) -> object:
        """An object in the cache was replaced: ``old`` by ``new``."""
        ...

    def on_delete(self, obj: T_contra | DeletedFinalStateUnknown[T_contra]) -> object:
        """An object left the cache: its last state, or a tombstone."""
        ...


def _noop(*_args: Any) -> None:
    """An absent handler function (the informer skips it without a thread hop)."""


def _is_coroutine_callable(fn: object) -> bool:
    """Whether calling ``fn`` returns a coroutine: a coroutine function, a bound
    one, a ``functools.partial`` of one, or an object with an ``async __call__``."""
    if inspect.iscoroutinefunction(fn):
        return True
    if inspect.isroutine(fn) or inspect.isclass(fn) or not callable(fn):
        return False
    return inspect.iscoroutinefunction(type(fn).__call__)


def _adapt(fn: Callable[..., Any] | None, *, drop_flag: bool) -> Callable[..., Any]:
    """A handler method calling ``fn`` (dropping ``is_in_initial_list`` when asked),
    a coroutine function exactly when ``fn`` is one."""
    if fn is None:
        return _noop
    if not callable(fn):
        raise TypeError(f"expected a callable or None, got {type(fn).__name__}")
    if not drop_flag:
        return fn
    if _is_coroutine_callable(fn):

        async def on_add_async(obj: Any, is_in_initial_list: bool) -> Any:
            return await fn(obj)

        return on_add_async

    def on_add(obj: Any, is_in_initial_list: bool) -> Any:
        return fn(obj)

    return on_add


class ResourceEventHandlerFuncs(Generic[T]):
    """A handler made of up to three functions (client-go's ``ResourceEventHandlerFuncs``).

    ``on_add(obj)`` takes only the object (use
    :class:`ResourceEventHandlerDetailedFuncs` to also get ``is_in_initial_list``),
    ``on_update(old, new)``, ``on_delete(obj)`` (``obj`` may be a
    :class:`~kubereflector.DeletedFinalStateUnknown`). A function left ``None`` is
    skipped. Each may be a plain function or a coroutine function; what it
    returns is ignored. The type parameter is the type the functions take
    (:data:`~kubereflector.KubeObject` unless they say otherwise).
    """

    __slots__ = ("add_func", "delete_func", "on_add", "on_delete", "on_update", "update_func")

    def __init__(
        self,
        on_add: Callable[[T], object] | None = None,
        on_update: Callable[[T, T], object] | None = None,
        on_delete: Callable[[T | DeletedFinalStateUnknown[T]], object] | None = None,
    ) -> None:
        self.add_func: Callable[[T], object] | Callable[[T, bool], object] | None = on_add
        """The ``on_add`` function as given."""
        self.update_func = on_update
        """The ``on_update`` function as given."""
        self.delete_func = on_delete
        """The ``on_delete`` function as given."""
        self.on_add: Callable[[T, bool], object] = _adapt(on_add, drop_flag=True)
        self.on_update: Callable[[T, T], object] = _adapt(on_update, drop_flag=False)
        self.on_delete: Callable[[T | DeletedFinalStateUnknown[T]], object] = _adapt(
            on_delete, drop_flag=False
        )

    def __repr__(self) -> str:
        parts = [
            f"{name}={_describe_callable(fn)}"
            for name, fn in (
                ("on_add", self.add_func),
                ("on_update", self.update_func),
                ("on_delete", self.delete_func),
            )
            if fn is not None
        ]
        return f"{type(self).__name__}({', '.join(parts)})"


class ResourceEventHandlerDetailedFuncs(ResourceEventHandlerFuncs[T]):
    """Like :class:`ResourceEventHandlerFuncs`, but ``on_add(obj, is_in_initial_list)``
    (client-go's ``ResourceEventHandlerDetailedFuncs``)."""

    __slots__ = ()

    def __init__(
        self,
        on_add: Callable[[T, bool], object] | None = None,
        on_update: Callable[[T, T], object] | None = None,
        on_delete: Callable[[T | DeletedFinalStateUnknown[T]], object] | None = None,
    ) -> None:
        super().__init__(None, on_update, on_delete)
        self.add_func = on_add
        self.on_add = _adapt(on_add, drop_flag=False)


class FilteringResourceEventHandler(Generic[T]):
    """Passes to ``handler`` only what ``filter`` accepts (client-go's
    ``FilteringResourceEventHandler``).

    An update whose old and new objects both pass is an update; one that starts
    passing is an add of the new object (``is_in_initial_list`` false); one that
    stops passing is a delete of the old object; one where neither passes is
    dropped. Adds and deletes pass when their object does (the filter sees a
    :class:`~kubereflector.DeletedFinalStateUnknown` as it is, hence its type
    ``T | DeletedFinalStateUnknown[T]``).

    ``filter`` must be a plain, fast, pure function: informers call it on the
    handler's consumer (its worker thread, or the event loop when every method
    of ``handler`` is a coroutine function). Called directly, each method
    returns what the wrapped method returned (an awaitable for a coroutine one).
    """

    __slots__ = ("filter", "handler")

    def __init__(
        self,
        filter: Callable[[T | DeletedFinalStateUnknown[T]], bool],
        handler: ResourceEventHandler[T],
    ) -> None:
        if _is_coroutine_callable(filter):
            raise TypeError(
                "the filter of a FilteringResourceEventHandler must be a plain function"
            )
        self.filter = filter
        self.handler = handler

    def on_add(self, obj: T, is_in_initial_list: bool) -> object:
        """``handler.on_add`` if ``filter`` accepts ``obj``."""
        if self.filter(obj):
            return self.handler.on_add(obj, is_in_initial_list)
        return None

    def on_update(self, old: T, new: T) -> object:
        """``handler.on_update``, ``on_add`` or ``on_delete`` as ``filter`` accepts
        ``old`` and ``new`` (see the class documentation)."""
        newer = self.filter(new)
        older = self.filter(old)
        if newer and older:
            return self.handler.on_update(old, new)
        if newer:
            return self.handler.on_add(new, False)
        if older:
            return self.handler.on_delete(old)
        return None

    def on_delete(self, obj: T | DeletedFinalStateUnknown[T]) -> object:
        """``handler.on_delete`` if ``filter`` accepts ``obj``."""
        if self.filter(obj):
            return self.handler.on_delete(obj)
        return None

    def __repr__(self) -> str:
        return f"FilteringResourceEventHandler({_describe_callable(self.filter)}, {self.handler!r})"


def _describe_callable(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)


def _resolve_handler(handler: object) -> Calls:
    """What a listener calls for ``handler``'s notifications.

    Raises :class:`TypeError` if ``handler`` lacks one of the three methods.
    """
    if isinstance(handler, FilteringResourceEventHandler):
        inner = _resolve_handler(handler.handler)
        return Calls(inner.functions, inner.coroutine, _filter_route(handler.filter, inner.route))
    methods = []
    for name in ("on_add", "on_update", "on_delete"):
        fn = getattr(handler, name, None)
        if fn is None or not callable(fn):
            raise TypeError(
                f"{type(handler).__name__} is not a ResourceEventHandler: it has no {name}() "
                "(use ResourceEventHandlerFuncs for plain functions)"
            )
        methods.append(fn)
    return Calls(
        tuple(None if fn is _noop else fn for fn in methods),
        tuple(_is_coroutine_callable(fn) for fn in methods),
    )


def _filter_route(accept: Callable[[Any], bool], inner: Route | None) -> Route:
    """The route of a FilteringResourceEventHandler around a handler routed by ``inner``."""

    def route(n: Notification) -> Notification | None:
        kind, a, b = n
        if kind == UPDATE:
            newer, older = accept(b), accept(a)
            if not (newer or older):
                return None
            if not older:
                n = (ADD, b, False)
            elif not newer:
                n = (DELETE, a, None)
        elif not accept(a):
            return None
        return n if inner is None else inner(n)

    return route


# -- delta processing -------------------------------------------------------------------


def _apply_deltas(
    cache: Cache[T],
    deltas: list[Any],  # Delta[T]s; only a Deleted one may hold a tombstone, which mypy cannot tell
    is_in_initial_list: bool,
    notifications: list[Notification],
    name: str,
) -> int:
    """Apply ``deltas`` (oldest first) to ``cache`` and append one notification
    per change to ``notifications`` (client-go's ``processDeltas``); return how
    many of them are adds of the initial list.

    Sync, Replaced, Added and Updated store the object: ``(UPDATE, old, new)``
    if the cache held it, else ``(ADD, new, is_in_initial_list)``. Deleted
    removes it: ``(DELETE, obj, None)``. ReplacedAll swaps the whole content
    (see :func:`_apply_replaced_all`); SyncAll re-announces every cached object
    as ``(UPDATE, obj, obj)``. A delta the cache refuses (an index function
    raising) is logged with its key and leaves no notification; the others are
    applied all the same.
    """
    deleted = DeltaType.DELETED
    replaced_all = DeltaType.REPLACED_ALL
    sync_all = DeltaType.SYNC_ALL
    append = notifications.append
    swap = cache.swap
    initial_adds = 0
    for delta_type, obj in deltas:
        try:
            if delta_type is deleted:
                cache.delete(obj)
                append((DELETE, obj, None))
                continue
            if delta_type is replaced_all:
                initial_adds += _apply_replaced_all(
                    cache, obj, is_in_initial_list, notifications, name
                )
                continue
            if delta_type is sync_all:
                notifications.extend([(UPDATE, cached, cached) for cached in cache.list()])
                continue
            old = swap(obj)
            if old is not None:
                append((UPDATE, old, obj))
            else:
                append((ADD, obj, is_in_initial_list))
                initial_adds += is_in_initial_list
        except Exception:
            logger.exception(
                "%s: could not apply a %s delta of %s", name, delta_type, _describe_item(obj)
            )
    return initial_adds


def _apply_replaced_all(
    cache: Cache[T],
    info: ReplacedAllInfo[T],
    is_in_initial_list: bool,
    notifications: list[Notification],
    name: str,
) -> int:
    """Make ``info.objects`` the whole content of ``cache`` in one swap, then
    append the notifications (client-go's ``processReplacedAllInfo``): first
    ``(DELETE, DeletedFinalStateUnknown(key, old), None)`` for each key that is
    gone, then, in list order, ``(UPDATE, old, new)`` for a key the cache held
    and ``(ADD, new, is_in_initial_list)`` for a new one. The cache holds the
    whole new list before any handler hears of it. Objects without a key or
    refused by an index function are logged and left out; the rest is applied.
    Returns how many of the notifications are adds of the initial list.
    """
    try:
        replaced, removed = cache.swap_all(info.objects, info.resource_version)
    except Exception:
        objects = _acceptable(cache, info.objects, name)
        replaced, removed = cache.swap_all(objects, info.resource_version)
    notifications.extend(
        [(DELETE, DeletedFinalStateUnknown(key, old), None) for key, old in removed]
    )
    notifications.extend(
        [
            (ADD, new, is_in_initial_list) if old is None else (UPDATE, old, new)
            for new, old in replaced
        ]
    )
    if not is_in_initial_list:
        return 0
    return sum(1 for _new, old in replaced if old is None)


def _acceptable(cache: Cache[T], objects: list[T], name: str) -> list[T]:
    """The objects the cache accepts: each one whose key and index values can be
    computed (the others are logged)."""
    key_func = cache.key_func
    indexers = cache.get_indexers()
    accepted = []
    for obj in objects:
        try:
            key_func(obj)
            for index_func in indexers.values():
                index_func(obj)
        except Exception:
            logger.exception("%s: could not apply %s of a relist", name, _describe_item(obj))
            continue
        accepted.append(obj)
    return accepted


# -- Controller -------------------------------------------------------------------------


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
            logger.exception("%s: processing %s failed", self.name, _describe_item(item))

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


def _describe_item(item: Any) -> str:
    obj = item
    if isinstance(item, list) and item:
        obj = item[-1]
    obj = getattr(obj, "object", obj)
    try:
        return repr(deletion_handling_meta_namespace_key_func(obj))
    except Exception:
        return f"an item of type {type(item).__name__}"


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
        initial_adds = _apply_deltas(
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
