"""DeltaFIFO: a queue of per-object change lists (client-go's ``DeltaFIFO``).

Each key queued holds a :class:`Deltas`, the list of every change (:class:`Delta`)
that happened to that object since it was last popped, oldest first. Keys pop in
the order they were first queued; a popped key leaves the queue with all its
deltas, so a consumer sees everything that happened to an object at once.

Thread-safety: every method may be called from any thread and from any event
loop. All state sits behind one ``threading.RLock``; ``pop`` runs ``process``
with that lock held (as client-go does), so ``process`` may call the read
methods (``key_of``, ``get_by_key``, ...) and may update the consumer's store
(``known_objects``) without racing ``replace`` or ``resync``.

Ownership: queued objects are handed over to the queue and then to the
consumer. Treat them as immutable once queued; the ``transformer`` is the one
place that may mutate an object, before anyone else sees it.
"""

from __future__ import annotations

import builtins
import logging
from collections import OrderedDict
from collections.abc import Callable
from enum import Enum
from typing import Any, Generic

from typing_extensions import NamedTuple

from .._aio.wakeup import BlockingQueue
from .._compiled import mypyc_attr
from .keys import DeletedFinalStateUnknown, KeyFunc, KeyFuncError, T, meta_namespace_key_func
from .store import KeyListerGetter

__all__ = ["Delta", "DeltaFIFO", "DeltaType", "Deltas", "ReplacedAllInfo", "TransformFunc"]

_log = logging.getLogger("kubereflector.delta_fifo")

TransformFunc = Callable[[Any], Any]
"""Applied to an object when it enters a queue; returns the object to queue.

It runs once per object on the producer's path (keep it fast; with several
producer threads it may run concurrently), never on
:class:`~kubereflector.DeletedFinalStateUnknown` tombstones nor on the objects
``resync`` takes from ``known_objects`` (those went through it already). It
must be idempotent: ``replace`` may hand it objects it has seen before. It may
mutate the object in place. An exception it raises propagates to the producer
and nothing is queued.
"""


class DeltaType(str, Enum):
    """The kind of change a :class:`Delta` records."""

    ADDED = "Added"
    UPDATED = "Updated"
    DELETED = "Deleted"
    REPLACED = "Replaced"
    """From a relist (``replace``); whether the object changed is unknown."""
    SYNC = "Sync"
    """From a periodic ``resync`` (or a relist when Replaced is not emitted)."""
    REPLACED_ALL = "ReplacedAll"
    """A whole relist in one delta (an atomic :class:`~kubereflector.RealFIFO`):
    its object is a :class:`ReplacedAllInfo`."""
    SYNC_ALL = "SyncAll"
    """A whole periodic resync in one delta (an atomic
    :class:`~kubereflector.RealFIFO`): its object is ``None``; every object of the
    consumer's store is to be re-announced."""

    def __str__(self) -> str:
        return str(self.value)


_ADDED = DeltaType.ADDED
_UPDATED = DeltaType.UPDATED
_DELETED = DeltaType.DELETED
_REPLACED = DeltaType.REPLACED
_SYNC = DeltaType.SYNC


# typing_extensions' NamedTuple: a generic NamedTuple needs Python 3.11 otherwise.
class Delta(NamedTuple, Generic[T]):
    """One change: its ``type`` and the object's state after it.

    For a :attr:`DeltaType.DELETED` delta, ``object`` is the object's last known
    state, possibly a :class:`~kubereflector.DeletedFinalStateUnknown` tombstone
    (so ``Delta[T].object`` is a ``T`` or a ``DeletedFinalStateUnknown[T]``).
    The two deltas only an atomic :class:`~kubereflector.RealFIFO` queues are
    the exceptions: a ``ReplacedAll``'s object is a :class:`ReplacedAllInfo`, a
    ``SyncAll``'s is ``None``.
    """

    type: DeltaType
    object: T | DeletedFinalStateUnknown[T]


class ReplacedAllInfo(NamedTuple, Generic[T]):
    """The object of a :attr:`DeltaType.REPLACED_ALL` delta (client-go's
    ``ReplacedAllInfo``): what one ``replace`` was given, transformer applied."""

    resource_version: str
    objects: list[T]


@mypyc_attr(native_class=False)
class Deltas(list[Delta[T]], Generic[T]):
    """The changes to one object, oldest first (a ``list`` of :class:`Delta`)."""

    __slots__ = ()

    def oldest(self) -> Delta[T] | None:
        """The first delta, or ``None`` if there is none."""
        return self[0] if self else None

    def newest(self) -> Delta[T] | None:
        """The last delta, or ``None`` if there is none."""
        return self[-1] if self else None

    def __repr__(self) -> str:
        return f"Deltas({list.__repr__(self)})"


def _object_key(key_func: KeyFunc, obj: Any) -> str:
    """The queue key of ``obj``: a :class:`Deltas` is keyed by its newest object,
    a :class:`Delta` by its object, a tombstone by its own ``key``, anything else
    by ``key_func``. Raises :class:`KeyFuncError` for an empty ``Deltas``."""
    if type(obj) is not dict:
        if isinstance(obj, Deltas):
            if not obj:
                raise KeyFuncError("cannot compute a key: the Deltas is empty")
            obj = obj[-1].object
        elif isinstance(obj, Delta):
            obj = obj.object
        if type(obj) is DeletedFinalStateUnknown:
            return obj.key
    return key_func(obj)


@mypyc_attr(allow_interpreted_subclasses=True)
class DeltaFIFO(BlockingQueue[Deltas[T], OrderedDict[str, Deltas[T]]]):
    """A producer-consumer queue of :class:`Deltas`, one per object key
    (``DeltaFIFO[T]`` queues objects of type ``T``; its pops return ``Deltas[T]``).

    * ``add``/``update``/``delete`` append a delta to the object's key, queueing the
      key at the back if it was not queued. Keys pop in first-queued order.
    * Two consecutive deletes collapse into one: the older is kept, unless it is
      a :class:`~kubereflector.DeletedFinalStateUnknown` tombstone.
    * ``delete`` of an object neither queued nor in ``known_objects`` is ignored
      (its deletion was most likely already reported by a ``replace``).
    * ``replace`` queues a Replaced delta (Sync unless ``emit_delta_type_replaced``)
      for each item, then a Deleted tombstone for each key that is queued or in
      ``known_objects`` but missing from the items.
    * ``resync`` queues a Sync delta for each object in ``known_objects`` whose key
      has nothing queued.

    ``known_objects`` is the consumer's view (typically the informer's Indexer,
    updated by ``process``); without it, deletions of objects already popped are
    not detected by ``replace``. A key function error (:class:`KeyFuncError`) or a
    ``transformer`` error propagates and leaves the queue unchanged. Every method
    is thread-safe; see the module docstring.
    """

    __slots__ = (
        "_emit_replaced",
        "_initial_count",
        "_items",
        "_key_func",
        "_known",
        "_populated",
        "_transformer",
    )

    def __init__(
        self,
        key_func: KeyFunc = meta_namespace_key_func,
        known_objects: KeyListerGetter[T] | None = None,
        emit_delta_type_replaced: bool = False,
        transformer: TransformFunc | None = None,
    ) -> None:
        self._key_func = key_func
        self._known = known_objects
        self._emit_replaced = emit_delta_type_replaced
        self._transformer = transformer
        super().__init__()
        # Key -> its Deltas, in first-queued order (OrderedDict pops its front in O(1)).
        self._items = OrderedDict()
        # True once the first replace ran, or an add/update/delete came before it.
        self._populated = False
        # Keys queued by the first replace that have not been popped yet.
        self._initial_count = 0

    @property
    def transformer(self) -> TransformFunc | None:
        """The transform function given at construction, if any."""
        return self._transformer

    def key_of(self, obj: object) -> str:
        """The key ``obj`` is queued under.

        A :class:`~kubereflector.DeletedFinalStateUnknown` is keyed by its own
        ``key`` whatever the key function; a :class:`Deltas` by its newest object;
        a :class:`Delta` by its object. Raises :class:`KeyFuncError` when the key
        function does, or for an empty Deltas.
        """
        return _object_key(self._key_func, obj)

    # -- producer side ------------------------------------------------------

    def add(self, obj: T) -> None:
        """Queue an Added delta for ``obj``."""
        self._queue_change(_ADDED, obj)

    def update(self, obj: T) -> None:
        """Queue an Updated delta for ``obj``."""
        self._queue_change(_UPDATED, obj)

    def _queue_change(self, delta_type: DeltaType, obj: T) -> None:
        key = _object_key(self._key_func, obj)
        if self._transformer is not None and type(obj) is not DeletedFinalStateUnknown:
            obj = self._transformer(obj)
        delta = Delta(delta_type, obj)
        with self._lock:
            self._populated = True
            deltas = self._items.get(key)
            if deltas is not None:
                deltas.append(delta)  # never a delete: no dedup to do
            else:
                self._items[key] = Deltas((delta,))
                if self._waiters:
                    self._waiters.wake()

    def delete(self, obj: T | DeletedFinalStateUnknown[T]) -> None:
        """Queue a Deleted delta for ``obj``, unless its key is neither queued nor
        in ``known_objects`` (then nothing happens)."""
        key = _object_key(self._key_func, obj)
        with self._lock:
            self._populated = True
            if key not in self._items and (
                self._known is None or self._known.get_by_key(key) is None
            ):
                return
            if self._transformer is not None and type(obj) is not DeletedFinalStateUnknown:
                obj = self._transformer(obj)
            self._append_locked(key, Delta(_DELETED, obj))

    def replace(self, items: list[T], resource_version: str = "") -> None:
        """Queue the outcome of a relist: ``items`` is the complete current state.

        Each item gets a Replaced delta (Sync when the queue was built with
        ``emit_delta_type_replaced=False``). Then every key queued or in
        ``known_objects`` but absent from ``items`` gets a Deleted delta holding a
        :class:`~kubereflector.DeletedFinalStateUnknown` whose ``obj`` is the
        newest queued object of that key (unwrapped if it is a tombstone itself),
        or else the object in ``known_objects``. ``resource_version`` is unused.

        The first ``replace`` (unless an add/update/delete came before) defines the
        initial list: :meth:`has_synced` turns true once all the keys it queued,
        tombstones included, have been popped. The queue is unchanged if a key
        function, the transformer or ``known_objects`` raises.
        """
        key_func = self._key_func
        transformer = self._transformer
        planned: list[tuple[str, T]] = []
        for obj in items:
            key = _object_key(key_func, obj)
            if transformer is not None and type(obj) is not DeletedFinalStateUnknown:
                obj = transformer(obj)
            planned.append((key, obj))
        new_keys = {key for key, _ in planned}
        action = _REPLACED if self._emit_replaced else _SYNC
        with self._lock:
            queued = self._items
            tombstones: list[DeletedFinalStateUnknown[T]] = []
            for key, deltas in queued.items():
                if key not in new_keys:
                    last = deltas[-1].object
                    if isinstance(last, DeletedFinalStateUnknown):
                        tombstones.append(DeletedFinalStateUnknown(key, last.obj))
                    else:
                        tombstones.append(DeletedFinalStateUnknown(key, last))
            known = self._known
            if known is not None:
                for key in known.list_keys():
                    if key in new_keys or key in queued:
                        continue
                    known_obj = known.get_by_key(key)
                    if known_obj is None:
                        _log.debug("key %r vanished from known objects during replace", key)
                    tombstones.append(DeletedFinalStateUnknown(key, known_obj))

            # Nothing below can raise: the queue changes all at once.
            for key, obj in planned:
                self._append_locked(key, Delta(action, obj))
            for tombstone in tombstones:
                self._append_locked(tombstone.key, Delta(_DELETED, tombstone))
            if not self._populated:
                # No add/update/delete came first, so the queue was empty before.
                self._populated = True
                self._initial_count = len(queued)

    def resync(self) -> None:
        """Queue a Sync delta for every object in ``known_objects`` whose key has
        nothing queued. Does nothing without ``known_objects``. The transformer is
        not applied (the objects went through it already)."""
        with self._lock:
            known = self._known
            if known is None:
                return
            key_func = self._key_func
            queued = self._items
            planned: list[tuple[str, T]] = []
            for known_key in known.list_keys():
                obj = known.get_by_key(known_key)
                if obj is None:
                    continue
                key = _object_key(key_func, obj)
                if key not in queued:
                    planned.append((key, obj))
            for key, obj in planned:
                if key not in queued:
                    self._append_locked(key, Delta(_SYNC, obj))

    def _append_locked(self, key: str, delta: Delta[T]) -> None:
        items = self._items
        deltas = items.get(key)
        if deltas is None:
            items[key] = Deltas((delta,))
            if self._waiters:
                self._waiters.wake()
            return
        if delta[0] is _DELETED:
            last = deltas[-1]
            if last[0] is _DELETED:
                # Deletion dedup: keep the older delete unless it is a tombstone.
                if type(last[1]) is DeletedFinalStateUnknown:
                    deltas[-1] = delta
                return
        deltas.append(delta)

    # -- consumer side ------------------------------------------------------

    def _pop_locked(self, process: Callable[[Deltas[T], bool], object]) -> Deltas[T]:
        _, deltas = self._items.popitem(last=False)
        in_initial_list = not self._populated or self._initial_count > 0
        try:
            process(deltas, in_initial_list)
        finally:
            # Counted only once processing is over, so has_synced() never turns
            # true while the last initial item is still being processed.
            if self._initial_count > 0:
                self._initial_count -= 1
        return deltas

    def has_synced(self) -> bool:
        """True once every key queued by the first ``replace`` (tombstones
        included) has been popped and processed, or at once if an
        add/update/delete came before any ``replace``."""
        with self._lock:
            return self._populated and self._initial_count == 0

    def list(self) -> builtins.list[T | DeletedFinalStateUnknown[T]]:
        """The newest object of each queued key, in queue order."""
        with self._lock:
            return [deltas[-1].object for deltas in self._items.values()]

    def list_keys(self) -> builtins.list[str]:
        """The queued keys, in the order they will pop."""
        with self._lock:
            return list(self._items)

    def get(self, obj: T | DeletedFinalStateUnknown[T]) -> Deltas[T] | None:
        """A copy of the Deltas queued for ``obj``'s key, or ``None``."""
        return self.get_by_key(_object_key(self._key_func, obj))

    def get_by_key(self, key: str) -> Deltas[T] | None:
        """A copy of the Deltas queued under ``key``, or ``None``."""
        with self._lock:
            deltas = self._items.get(key)
            return None if deltas is None else Deltas(deltas)

    def __repr__(self) -> str:
        return (
            f"<DeltaFIFO keys={len(self._items)} synced={self.has_synced()} closed={self._closed}>"
        )
