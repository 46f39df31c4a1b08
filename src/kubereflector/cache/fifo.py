"""FIFO and RealFIFO: the two other queues (client-go's ``fifo.go`` and
``the_real_fifo.go``).

* :class:`FIFO` keeps one item per key, the latest; a delete drops the item.
  Use it to process the newest version of each object once, ignoring deletions.
* :class:`RealFIFO` keeps every event, in order, with no per-key compression; it
  is what informers use by default.

Thread-safety, ownership and the blocking ``pop`` work as for
:class:`~kubereflector.DeltaFIFO`: one ``threading.RLock`` per queue, ``process``
runs under it, queued objects are to be treated as immutable.
"""

from __future__ import annotations

import builtins
import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Generic, cast

from .._aio.wakeup import BlockingQueue, pop_blocking, pop_nowait
from .._compiled import mypyc_attr
from .delta_fifo import Delta, Deltas, DeltaType, ReplacedAllInfo, TransformFunc, _object_key
from .keys import DeletedFinalStateUnknown, KeyFunc, T, meta_namespace_key_func
from .store import KeyListerGetter

__all__ = ["FIFO", "RealFIFO"]

_log = logging.getLogger("kubereflector.fifo")

_ADDED = DeltaType.ADDED
_UPDATED = DeltaType.UPDATED
_DELETED = DeltaType.DELETED
_REPLACED = DeltaType.REPLACED
_SYNC = DeltaType.SYNC
_REPLACED_ALL = DeltaType.REPLACED_ALL
_SYNC_ALL = DeltaType.SYNC_ALL

_DEFAULT_BATCH_SIZE = 1000
"""client-go's default upper bound on a RealFIFO batch."""


@mypyc_attr(allow_interpreted_subclasses=True)
class FIFO(BlockingQueue[T, OrderedDict[str, T]], Generic[T]):
    """A queue holding the latest object of each key, popped in first-queued order
    (``FIFO[T]`` holds objects of type ``T``; its pops return a ``T``).

    ``add``/``update`` store the object under its key: a key not queued goes to
    the back, a queued key keeps its place and gets the newer object. ``delete``
    removes the key from the queue. ``replace`` swaps the whole content for the
    given items, in their order. ``pop`` hands ``process(obj, is_in_initial_list)``
    the object itself.

    A key function error propagates and leaves the queue unchanged. Every method
    is thread-safe.
    """

    __slots__ = ("_initial_keys", "_items", "_key_func", "_populated")

    def __init__(self, key_func: KeyFunc = meta_namespace_key_func) -> None:
        self._key_func = key_func
        super().__init__()
        self._items = OrderedDict()
        self._populated = False
        # Keys of the first replace not yet popped (nor deleted, nor replaced away).
        self._initial_keys: set[str] = set()

    def add(self, obj: T) -> None:
        """Queue ``obj`` under its key (keeping the key's place if it is queued)."""
        key = _object_key(self._key_func, obj)
        with self._lock:
            self._populated = True
            items = self._items
            queued = key in items
            items[key] = obj
            if not queued and self._waiters:
                self._waiters.wake()

    def update(self, obj: T) -> None:
        """Same as :meth:`add`."""
        self.add(obj)

    def delete(self, obj: T | DeletedFinalStateUnknown[T]) -> None:
        """Drop ``obj``'s key from the queue (nothing happens if it is not queued)."""
        key = _object_key(self._key_func, obj)
        with self._lock:
            self._populated = True
            self._items.pop(key, None)
            if self._initial_keys:
                self._initial_keys.discard(key)

    def replace(self, items: list[T], resource_version: str = "") -> None:
        """Make ``items`` the whole content, queued in their order (a later item
        with the same key wins, at the first one's place). ``resource_version``
        is unused. The first ``replace`` (unless an add/update/delete came before)
        defines the initial list for :meth:`has_synced`."""
        key_func = self._key_func
        new_items: OrderedDict[str, T] = OrderedDict()
        for obj in items:
            new_items[_object_key(key_func, obj)] = obj
        with self._lock:
            if not self._populated:
                self._populated = True
                self._initial_keys = set(new_items)
            elif self._initial_keys:
                self._initial_keys.intersection_update(new_items)
            self._items = new_items
            if self._waiters:
                self._waiters.wake(len(new_items))

    def resync(self) -> None:
        """Nothing to do: every stored object is always queued (kept for the
        :class:`~kubereflector.ReflectorStore` protocol)."""

    def _pop_locked(self, process: Callable[[T, bool], object]) -> T:
        key, obj = self._items.popitem(last=False)
        initial_keys = self._initial_keys
        in_initial_list = not self._populated or bool(initial_keys)
        try:
            process(obj, in_initial_list)
        finally:
            if initial_keys:
                initial_keys.discard(key)
        return obj

    def has_synced(self) -> bool:
        """True once every item of the first ``replace`` still queued has been
        popped and processed (items deleted or replaced away meanwhile no longer
        count), or at once if an add/update/delete came before any ``replace``."""
        with self._lock:
            return self._populated and not self._initial_keys

    def list(self) -> builtins.list[T]:
        """The queued objects, in queue order."""
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        """The queued keys, in queue order."""
        with self._lock:
            return list(self._items)

    def get(self, obj: T) -> T | None:
        """The object queued under ``obj``'s key, or ``None``."""
        return self.get_by_key(_object_key(self._key_func, obj))

    def get_by_key(self, key: str) -> T | None:
        """The object queued under ``key``, or ``None``."""
        with self._lock:
            return self._items.get(key)

    def __repr__(self) -> str:
        return f"<FIFO items={len(self._items)} closed={self._closed}>"


@mypyc_attr(allow_interpreted_subclasses=True)
class RealFIFO(BlockingQueue[Deltas[T], deque[Delta[T]]], Generic[T]):
    """A queue of every event, in arrival order (client-go's ``RealFIFO``);
    ``RealFIFO[T]`` queues objects of type ``T`` and pops ``Deltas[T]``.

    Each ``add``/``update``/``delete`` queues one :class:`Delta`; nothing is merged
    or dropped. What ``replace`` and ``resync`` queue depends on the mode:

    * **atomic** (``atomic=True``, client-go's ``AtomicFIFO``; what informers
      use): ``replace`` queues a single ``ReplacedAll`` delta holding a
      :class:`~kubereflector.ReplacedAllInfo` (the items, transformer applied,
      and the resourceVersion), and ``resync`` a single ``SyncAll`` delta
      (object ``None``). The consumer reconciles them against its own store
      when it pops them: after everything queued before them, so a relist
      costs one delta, not one per object. ``known_objects`` must not be given.
    * **per object** (the default): ``replace`` reconciles against what is
      queued and what the consumer knows (``known_objects``, required): it
      queues, in this order,

      1. a Deleted tombstone for each key queued but absent from ``items``,
         unless that key's last queued delta is already Deleted (the tombstone
         holds that last queued object), in first-queued order;
      2. a Deleted tombstone for each key of ``known_objects`` absent from
         ``items`` and not queued (holding the known object);
      3. a Replaced delta for each item, in order.

      ``resync`` queues a Sync delta for each known object whose key has
      nothing queued.

    ``pop`` hands ``process`` a one-element :class:`Deltas`; ``pop_batch``
    hands several consecutive deltas at once (a ``ReplacedAll`` or ``SyncAll``
    always alone).

    A ``transformer`` runs on objects as they enter the queue, except on
    tombstones and Sync deltas. A key function or transformer error propagates
    and leaves the queue unchanged. Every method is thread-safe.
    """

    __slots__ = (
        "_atomic",
        "_initial_count",
        "_items",
        "_key_func",
        "_keys",
        "_known",
        "_populated",
        "_transformer",
    )

    def __init__(
        self,
        key_func: KeyFunc = meta_namespace_key_func,
        known_objects: KeyListerGetter[T] | None = None,
        transformer: TransformFunc | None = None,
        *,
        atomic: bool = False,
    ) -> None:
        """Raises :class:`TypeError` when ``known_objects`` is missing in per-object
        mode (RealFIFO cannot detect deletions on ``replace`` nor resync without
        it) or given in atomic mode (the consumer reconciles against its own store)."""
        if atomic and known_objects is not None:
            raise TypeError(
                "an atomic RealFIFO takes no known_objects: its consumer reconciles "
                "ReplacedAll and SyncAll deltas against its own store"
            )
        if not atomic and known_objects is None:
            raise TypeError("RealFIFO requires known_objects (the consumer's store)")
        self._key_func = key_func
        self._known = known_objects
        self._transformer = transformer
        self._atomic = atomic
        super().__init__()
        self._items = deque()
        # The key of each queued delta, in step with _items (computed once, on entry);
        # None for a ReplacedAll or SyncAll delta (it has no key, and is never batched).
        self._keys: deque[str | None] = deque()
        self._populated = False
        # Deltas queued by the first replace not yet popped; they lead the queue.
        self._initial_count = 0

    @property
    def atomic(self) -> bool:
        """Whether ``replace`` and ``resync`` queue one delta each (see the class docstring)."""
        return self._atomic

    @property
    def transformer(self) -> TransformFunc | None:
        """The transform function given at construction, if any."""
        return self._transformer

    def key_of(self, obj: object) -> str:
        """The key of ``obj``: see :meth:`DeltaFIFO.key_of`."""
        return _object_key(self._key_func, obj)

    # -- producer side ------------------------------------------------------

    def add(self, obj: T) -> None:
        """Queue an Added delta for ``obj``."""
        self._queue_change(_ADDED, obj)

    def update(self, obj: T) -> None:
        """Queue an Updated delta for ``obj``."""
        self._queue_change(_UPDATED, obj)

    def delete(self, obj: T | DeletedFinalStateUnknown[T]) -> None:
        """Queue a Deleted delta for ``obj`` (always: RealFIFO drops nothing)."""
        self._queue_change(_DELETED, obj)

    def _queue_change(self, delta_type: DeltaType, obj: T | DeletedFinalStateUnknown[T]) -> None:
        key = _object_key(self._key_func, obj)  # a keyless object never enters
        if self._transformer is not None and type(obj) is not DeletedFinalStateUnknown:
            obj = self._transformer(obj)
        with self._lock:
            self._populated = True
            self._items.append(Delta(delta_type, obj))
            self._keys.append(key)
            if self._waiters:
                self._waiters.wake()

    def process_or_queue(
        self,
        changes: list[tuple[DeltaType, T | DeletedFinalStateUnknown[T]]],
        process_batch: Callable[[Deltas[T], bool], object],
    ) -> list[tuple[int, Exception]]:
        """Queue ``changes`` in order, each as :meth:`add`/:meth:`update`/:meth:`delete`
        would (its :class:`DeltaType` says which), except when nothing is queued
        and the initial list has been processed: then hand them at once to one
        ``process_batch(deltas, False)`` call, with the lock held, as the next
        :meth:`pop_batch` would (same order, same checks and transformer),
        without the round trip through the queue.

        A change whose object has no key, or that the transformer refuses, is
        left out; returned: the index in ``changes`` and the error of each one
        left out. For a consumer that writes and pops on the same event loop
        (the informers); an exception from ``process_batch`` propagates and
        nothing is queued.
        """
        key_func = self._key_func
        transformer = self._transformer
        deltas: list[Delta[T]] = []
        keys: list[str] = []
        failed: list[tuple[int, Exception]] = []
        for i, (delta_type, obj) in enumerate(changes):
            try:
                key = _object_key(key_func, obj)  # a keyless object never enters
                if transformer is not None and type(obj) is not DeletedFinalStateUnknown:
                    obj = transformer(obj)
            except Exception as err:
                failed.append((i, err))
                continue
            deltas.append(Delta(delta_type, obj))
            keys.append(key)
        if not deltas:
            return failed
        with self._lock:
            if self._populated and not self._items and self._initial_count == 0:
                # Nothing queued ahead and the initial list processed: these are the
                # deltas the next pop would take.
                process_batch(Deltas(deltas), False)
                return failed
            self._populated = True
            self._items.extend(deltas)
            self._keys.extend(keys)
            if self._waiters:
                self._waiters.wake()
        return failed

    def replace(self, items: list[T], resource_version: str = "") -> None:
        """Queue the outcome of a relist; see the class docstring for what is
        queued and in which order. ``resource_version`` is carried by an atomic
        queue's ``ReplacedAll`` delta (and unused otherwise).

        The first ``replace`` (unless an add/update/delete came before) defines the
        initial list: :meth:`has_synced` turns true once every delta it queued has
        been popped and processed. The queue is unchanged if a key function, the
        transformer or ``known_objects`` raises.
        """
        key_func = self._key_func
        transformer = self._transformer
        item_keys = [_object_key(key_func, obj) for obj in items]
        if transformer is not None:
            items = [
                obj if type(obj) is DeletedFinalStateUnknown else transformer(obj) for obj in items
            ]
        if self._atomic:
            info = ReplacedAllInfo(resource_version, list(items))
            self._queue_whole(_REPLACED_ALL, info)
            return
        new_keys = set(item_keys)
        assert self._known is not None
        with self._lock:
            # Key -> its last queued delta; a dict keeps first-queued key order.
            # (Per-object mode: every queued delta has a key.)
            keys = cast("deque[str]", self._keys)
            last_queued = dict(zip(keys, self._items, strict=True))
            additions: list[Delta[T]] = []
            addition_keys: list[str] = []
            for key, delta in last_queued.items():
                if key not in new_keys and delta.type is not _DELETED:
                    # Only a Deleted delta holds a tombstone.
                    last = cast(T, delta.object)
                    additions.append(Delta(_DELETED, DeletedFinalStateUnknown(key, last)))
                    addition_keys.append(key)
            known = self._known
            for key in known.list_keys():
                if key in new_keys or key in last_queued:
                    continue
                obj = known.get_by_key(key)
                if obj is None:
                    _log.debug("key %r vanished from known objects during replace", key)
                additions.append(Delta(_DELETED, DeletedFinalStateUnknown(key, obj)))
                addition_keys.append(key)
            additions.extend([Delta(_REPLACED, obj) for obj in items])
            addition_keys.extend(item_keys)
            # Nothing below can raise: the queue changes all at once.
            self._items.extend(additions)
            self._keys.extend(addition_keys)
            if not self._populated:
                # No add/update/delete came first, so the queue was empty before.
                self._populated = True
                self._initial_count = len(self._items)
            if self._waiters:
                self._waiters.wake(len(additions))

    def _queue_whole(self, delta_type: DeltaType, info: ReplacedAllInfo[T] | None) -> None:
        """Queue a ReplacedAll or SyncAll delta (atomic mode); its object is not a
        ``T`` (see :class:`~kubereflector.Delta`)."""
        delta: Delta[T] = Delta(delta_type, cast(Any, info))
        with self._lock:
            self._items.append(delta)
            self._keys.append(None)
            if not self._populated and delta_type is _REPLACED_ALL:
                self._populated = True
                self._initial_count = len(self._items)
            if self._waiters:
                self._waiters.wake()

    def resync(self) -> None:
        """Queue a Sync delta for every object of ``known_objects`` whose key has
        nothing queued (an atomic queue: one SyncAll delta). The transformer is
        not applied."""
        if self._atomic:
            self._queue_whole(_SYNC_ALL, None)
            return
        assert self._known is not None
        with self._lock:
            key_func = self._key_func
            queued_keys = set(self._keys)
            known = self._known
            additions: list[Delta[T]] = []
            addition_keys: list[str] = []
            for key in known.list_keys():
                if key in queued_keys:
                    continue
                obj = known.get_by_key(key)
                if obj is not None:
                    _object_key(key_func, obj)  # validates, as add does
                    additions.append(Delta(_SYNC, obj))
                    addition_keys.append(key)
            self._items.extend(additions)
            self._keys.extend(addition_keys)
            if additions and self._waiters:
                self._waiters.wake(len(additions))

    # -- consumer side ------------------------------------------------------

    async def pop_batch(
        self,
        process_batch: Callable[[Deltas[T], bool], object],
        max_items: int = _DEFAULT_BATCH_SIZE,
    ) -> Deltas[T]:
        """Wait for deltas, remove a batch of consecutive ones and hand it to
        ``process_batch(deltas, is_in_initial_list)``; return the batch.

        A batch holds between 1 and ``max_items`` deltas, oldest first, all of
        distinct keys (it ends before a second delta for a key already in it), and
        never mixes the initial list with later deltas (it ends at the initial
        list's last delta), as client-go's ``RealFIFO.PopBatch``; a ReplacedAll
        or SyncAll delta is always a batch of its own. Otherwise as
        :meth:`pop`. Raises :class:`ValueError` if ``max_items`` < 1.
        """
        if max_items < 1:
            raise ValueError(f"max_items must be at least 1, not {max_items}")
        return await pop_blocking(
            self._lock,
            self._waiters,
            self._ready_locked,
            self._pop_batch_locked,
            (process_batch, max_items),
        )

    def pop_batch_nowait(
        self,
        process_batch: Callable[[Deltas[T], bool], object],
        max_items: int = _DEFAULT_BATCH_SIZE,
    ) -> Deltas[T]:
        """Like :meth:`pop_batch` but raises :class:`QueueEmpty` instead of waiting."""
        if max_items < 1:
            raise ValueError(f"max_items must be at least 1, not {max_items}")
        return pop_nowait(
            self._lock, self._ready_locked, self._pop_batch_locked, (process_batch, max_items)
        )

    def _pop_locked(self, process: Callable[[Deltas[T], bool], object]) -> Deltas[T]:
        deltas = Deltas((self._items.popleft(),))
        self._keys.popleft()
        in_initial_list = not self._populated or self._initial_count > 0
        try:
            process(deltas, in_initial_list)
        finally:
            # Counted only once processing is over (as client-go), so has_synced()
            # never turns true while the last initial delta is being processed.
            if self._initial_count > 0:
                self._initial_count -= 1
        return deltas

    def _pop_batch_locked(self, args: tuple[Callable[[Deltas[T], bool], object], int]) -> Deltas[T]:
        process_batch, max_items = args
        items = self._items
        initial_count = self._initial_count
        in_initial_list = not self._populated or initial_count > 0
        limit = min(max_items, len(items))
        if initial_count > 0:
            limit = min(limit, initial_count)
        keys = self._keys
        batch: Deltas[T] = Deltas()
        if keys[0] is None:  # a ReplacedAll or SyncAll: always alone
            keys.popleft()
            batch.append(items.popleft())
            limit = 0
        seen: set[str] = set()
        while len(batch) < limit:
            key = keys[0]
            if key is None or key in seen:
                break
            seen.add(key)
            keys.popleft()
            batch.append(items.popleft())
        try:
            process_batch(batch, in_initial_list)
        finally:
            if self._initial_count > 0:
                self._initial_count = max(0, self._initial_count - len(batch))
        return batch

    def has_synced(self) -> bool:
        """True once every delta queued by the first ``replace`` has been popped
        and processed, or at once if an add/update/delete came before any
        ``replace``."""
        with self._lock:
            return self._populated and self._initial_count == 0

    def list_keys(self) -> builtins.list[str]:
        """The keys with something queued, each once, in first-queued order (the
        objects of a queued ReplacedAll delta are not counted)."""
        with self._lock:
            return [key for key in dict.fromkeys(self._keys) if key is not None]

    def __repr__(self) -> str:
        return (
            f"<RealFIFO deltas={len(self._items)} synced={self.has_synced()} closed={self._closed}>"
        )
