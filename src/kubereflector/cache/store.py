"""The cache: Store and Indexer protocols, ThreadSafeStore and the key-func Cache.

``ThreadSafeStore`` is keyed storage with secondary indexes (client-go's
``threadSafeMap``); ``Cache`` puts a key function in front of it and is what
:func:`new_store` and :func:`new_indexer` return (client-go's ``cache``).

Thread-safety: every method of both classes may be called from any thread and
from the event loop. Each call holds one internal lock for the duration of the
call only; no method ever waits for I/O. Reads return the stored objects
themselves (not copies): treat them as immutable, as client-go asks.

Consistency: a write computes every index value of the new object before it
changes anything, so an index function that raises leaves the store exactly as
it was (the error names the index and the key).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Generic

from .._compiled import caused_by, mypyc_attr
from ._store_protocols import (
    Indexer,
    Indexers,
    IndexFunc,
    KeyListerGetter,
    ReflectorStore,
    ResourceVersionUpdater,
    Store,
    WatchChange,
    WatchChangeWriter,
)
from .keys import (
    DeletedFinalStateUnknown,
    KeyFunc,
    T,
    deletion_handling_meta_namespace_key_func,
    get_namespace,
)

__all__ = [
    "NAMESPACE_INDEX",
    "Cache",
    "IndexFunc",
    "IndexFuncError",
    "Indexer",
    "Indexers",
    "KeyListerGetter",
    "ReflectorStore",
    "ResourceVersionUpdater",
    "Store",
    "ThreadSafeStore",
    "UnknownIndexError",
    "WatchChange",
    "WatchChangeWriter",
    "meta_namespace_index_func",
    "new_indexer",
    "new_store",
]

NAMESPACE_INDEX = "namespace"
"""Conventional name of the index built by :func:`meta_namespace_index_func`."""


def meta_namespace_index_func(obj: Any) -> list[str]:
    """Index by namespace; cluster-scoped objects index under ``""``. Accepts any
    object the meta accessors do (see :func:`~kubereflector.get_namespace`), so it
    fits an ``Indexers[T]`` of any ``T`` (typed ``Any``, not ``object``, so that it
    does not make ``T`` ``object`` where ``T`` is inferred from the indexers)."""
    return [get_namespace(obj) or ""]


@mypyc_attr(native_class=False)
class UnknownIndexError(LookupError):
    """An index name was used that no indexer was registered for."""


@mypyc_attr(native_class=False)
class IndexFuncError(ValueError):
    """An index function raised; the store was left unchanged."""


def _apply_one_by_one(
    store: ReflectorStore[Any], changes: list[WatchChange]
) -> list[tuple[WatchChange, Exception]]:
    """:meth:`WatchChangeWriter.apply_watch_changes` for any store: a call of
    ``add``/``update``/``delete`` per change."""
    failed: list[tuple[WatchChange, Exception]] = []
    methods = {"ADDED": store.add, "MODIFIED": store.update, "DELETED": store.delete}
    for change in changes:
        try:
            methods[change[0]](change[1])
        except Exception as err:  # noqa: PERF203 - no cost when nothing raises
            failed.append((change, err))
    return failed


# Per index name: indexed value -> keys of the objects with that value.
_Index = dict[str, set[str]]


@mypyc_attr(allow_interpreted_subclasses=True)
class ThreadSafeStore(Generic[T]):
    """Objects of type ``T`` by explicit key, with indexes kept exact on every write.

    Empty index buckets are dropped, so a churn of distinct values never leaks.
    See the module docstring for the thread-safety and consistency contract.
    """

    __slots__ = ("_indexers", "_indices", "_items", "_lock")

    def __init__(self, indexers: Mapping[str, IndexFunc[T]] | None = None) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, T] = {}
        self._indexers: Indexers[T] = dict(indexers or {})
        self._indices: dict[str, _Index] = {name: {} for name in self._indexers}

    # -- writes -------------------------------------------------------------

    def add(self, key: str, obj: T) -> None:
        """Store ``obj`` under ``key``, replacing any previous object."""
        self.update(key, obj)

    def update(self, key: str, obj: T) -> None:
        """Store ``obj`` under ``key``, moving its index entries as its values change."""
        self.swap(key, obj)

    def swap(self, key: str, obj: T) -> T | None:
        """Like :meth:`update`, returning the object ``key`` held before (``None``: none)."""
        with self._lock:
            old = self._items.get(key)
            changes = self._index_changes(key, old, obj)
            self._items[key] = obj
            self._apply_index_changes(key, changes)
            return old

    def delete(self, key: str) -> None:
        """Remove ``key``; absent keys are ignored."""
        with self._lock:
            if key not in self._items:
                return
            old = self._items.pop(key)
            # Old values were computed successfully when the object went in.
            self._apply_index_changes(key, self._index_changes(key, old, None))

    def replace(self, items: Mapping[str, T]) -> None:
        """Swap the whole content for ``items`` in one step, rebuilding every index."""
        self.swap_all(dict(items))

    def swap_all(self, items: dict[str, Any]) -> dict[str, Any]:
        """Like :meth:`replace`, taking ``items`` over (not copied: the caller must
        not change it afterwards), and returning the previous content (the
        caller's from then on). Raises :class:`IndexFuncError`, the store
        unchanged, if an index function fails on an object."""
        with self._lock:
            self._indices = self._build_indices(self._indexers, items)
            previous, self._items = self._items, items
            return previous

    # -- reads --------------------------------------------------------------

    def get(self, key: str) -> T | None:
        """The object stored under ``key``, or ``None``."""
        with self._lock:
            return self._items.get(key)

    def list(self) -> builtins.list[T]:
        """Every stored object (a new list; the objects are the store's own)."""
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        """Every key (a new list)."""
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        """How many objects are stored."""
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        """Whether an object is stored under ``key``."""
        return key in self._items

    # -- indexes ------------------------------------------------------------

    def index(self, index_name: str, obj: T) -> builtins.list[T]:
        """Objects sharing at least one of ``obj``'s values in the named index."""
        with self._lock:
            func = self._indexer(index_name)
            index = self._indices[index_name]
            values = self._call_index_func(index_name, func, obj, key=None)
            if len(values) == 1:
                keys: Iterable[str] = index.get(values[0], ())
            else:
                union: set[str] = set()
                for value in values:
                    union.update(index.get(value, ()))
                keys = union
            return [self._items[k] for k in keys]

    def index_keys(self, index_name: str, indexed_value: str) -> builtins.list[str]:
        """Keys of the objects indexed under ``indexed_value``."""
        with self._lock:
            self._indexer(index_name)
            return list(self._indices[index_name].get(indexed_value, ()))

    def list_index_func_values(self, index_name: str) -> builtins.list[str]:
        """Every value that at least one object is indexed under."""
        with self._lock:
            self._indexer(index_name)
            return list(self._indices[index_name])

    def by_index(self, index_name: str, indexed_value: str) -> builtins.list[T]:
        """Objects indexed under ``indexed_value``."""
        with self._lock:
            self._indexer(index_name)
            keys = self._indices[index_name].get(indexed_value, ())
            return [self._items[k] for k in keys]

    def get_indexers(self) -> Indexers[T]:
        """A copy of the registered index functions."""
        with self._lock:
            return dict(self._indexers)

    def add_indexers(self, indexers: Mapping[str, IndexFunc[T]]) -> None:
        """Register more indexes; objects already stored are indexed at once.

        Raises :class:`ValueError` if a name is already registered (nothing is
        added then), or :class:`IndexFuncError` if a new function raises.
        """
        with self._lock:
            clash = sorted(set(indexers) & set(self._indexers))
            if clash:
                raise ValueError(f"indexer conflict: {', '.join(map(repr, clash))} already added")
            new_indices = self._build_indices(indexers, self._items)
            self._indexers.update(indexers)
            self._indices.update(new_indices)

    # -- internals (call with the lock held) --------------------------------

    def _indexer(self, index_name: str) -> IndexFunc[T]:
        try:
            return self._indexers[index_name]
        except KeyError:
            known = ", ".join(map(repr, sorted(self._indexers))) or "none"
            raise caused_by(  # noqa: B904 (the cause is set: mypyc drops `from`)
                UnknownIndexError(f"index {index_name!r} does not exist (indexes: {known})"), None
            )

    @staticmethod
    def _call_index_func(
        name: str, func: IndexFunc[T], obj: T, key: str | None
    ) -> builtins.list[str]:
        try:
            return func(obj)
        except Exception as err:
            what = f"object {key!r}" if key is not None else "the object"
            raise caused_by(  # noqa: B904 (the cause is set: mypyc drops `from`)
                IndexFuncError(f"index function {name!r} failed on {what}: {err}"), err
            )

    def _index_changes(
        self, key: str, old: T | None, new: T | None
    ) -> builtins.list[tuple[_Index, builtins.list[str], builtins.list[str]]]:
        """Per index, the (old values, new values) of a write; raises before any change."""
        changes = []
        for name, func in self._indexers.items():
            old_values = func(old) if old is not None else []
            new_values = self._call_index_func(name, func, new, key) if new is not None else []
            if old_values != new_values:
                changes.append((self._indices[name], old_values, new_values))
        return changes

    @staticmethod
    def _apply_index_changes(
        key: str, changes: builtins.list[tuple[_Index, builtins.list[str], builtins.list[str]]]
    ) -> None:
        for index, old_values, new_values in changes:
            for value in old_values:
                bucket = index.get(value)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del index[value]
            for value in new_values:
                bucket = index.get(value)
                if bucket is None:
                    index[value] = {key}
                else:
                    bucket.add(key)

    @staticmethod
    def _build_indices(
        indexers: Mapping[str, IndexFunc[T]], items: Mapping[str, T]
    ) -> dict[str, _Index]:
        indices: dict[str, _Index] = {}
        for name, func in indexers.items():
            index: _Index = {}
            for key, obj in items.items():
                for value in ThreadSafeStore._call_index_func(name, func, obj, key):
                    bucket = index.get(value)
                    if bucket is None:
                        index[value] = {key}
                    else:
                        bucket.add(key)
            indices[name] = index
        return indices


@mypyc_attr(allow_interpreted_subclasses=True)
class Cache(Generic[T]):
    """A :class:`ThreadSafeStore` keyed by a key function: implements :class:`Indexer`
    of ``T`` (``Cache`` alone holds :data:`~kubereflector.KubeObject` objects).

    The default key function handles :class:`~kubereflector.DeletedFinalStateUnknown`
    tombstones, so ``delete(tombstone)`` removes the right key. A key function that
    raises propagates its error (e.g. :class:`~kubereflector.KeyFuncError`) and
    the cache is unchanged. Thread-safe; see the module docstring.
    """

    __slots__ = ("_key_func", "_resource_version", "_store")

    def __init__(
        self,
        key_func: KeyFunc = deletion_handling_meta_namespace_key_func,
        indexers: Mapping[str, IndexFunc[T]] | None = None,
    ) -> None:
        self._key_func = key_func
        self._store: ThreadSafeStore[T] = ThreadSafeStore(indexers)
        self._resource_version = ""

    @property
    def key_func(self) -> KeyFunc:
        """The function that maps an object to its key."""
        return self._key_func

    def add(self, obj: T) -> None:
        """Store ``obj`` under its key, replacing any previous object."""
        self._store.add(self._key_func(obj), obj)

    def update(self, obj: T) -> None:
        """Same as :meth:`add`."""
        self._store.update(self._key_func(obj), obj)

    def delete(self, obj: T | DeletedFinalStateUnknown[T]) -> None:
        """Remove the object with ``obj``'s key (for a tombstone: its ``key``);
        absent keys are ignored."""
        self._store.delete(self._key_func(obj))

    def swap(self, obj: T) -> T | None:
        """Store ``obj`` (as :meth:`update`) and return the object it replaced, or
        ``None``: a get and an update in one step."""
        return self._store.swap(self._key_func(obj), obj)

    def replace(self, items: builtins.list[T], resource_version: str) -> None:
        """Swap the content for ``items`` atomically; later duplicates of a key win."""
        key_func = self._key_func
        self._store.swap_all({key_func(obj): obj for obj in items})
        self._resource_version = resource_version

    def swap_all(
        self, items: builtins.list[Any], resource_version: str
    ) -> tuple[builtins.list[tuple[Any, Any | None]], builtins.list[tuple[str, Any]]]:
        """:meth:`replace`, telling what it replaced: ``(replaced, removed)``.

        ``replaced`` holds ``(new, old)`` for each key of ``items`` in their order
        (``old``: what the key held before, ``None`` if nothing; a key given
        twice counts once, at its first place, with its last object);
        ``removed`` holds ``(key, old)`` for each key held before and not in
        ``items``. One step under the store's lock, as :meth:`replace`. A key or
        index function that raises propagates, the cache unchanged.
        """
        key_func = self._key_func
        keyed = {key_func(obj): obj for obj in items}
        pairs = list(keyed.items())  # snapshots: the store owns ``keyed`` from here on
        new_keys = set(keyed)
        previous = self._store.swap_all(keyed)
        self._resource_version = resource_version
        get = previous.get
        replaced = [(obj, get(key)) for key, obj in pairs]
        removed = [(key, old) for key, old in previous.items() if key not in new_keys]
        return replaced, removed

    def resync(self) -> None:
        """Nothing to do for a plain cache (kept for the Store protocol)."""

    def update_resource_version(self, resource_version: str) -> None:
        """Record the resourceVersion the Reflector synced to (see
        :class:`ResourceVersionUpdater`)."""
        self._resource_version = resource_version

    def last_store_sync_resource_version(self) -> str:
        """The resourceVersion of the last ``replace`` or ``update_resource_version``."""
        return self._resource_version

    def list(self) -> builtins.list[T]:
        """Every stored object (a new list; the objects are the cache's own)."""
        return self._store.list()

    def list_keys(self) -> builtins.list[str]:
        """Every key (a new list)."""
        return self._store.list_keys()

    def get(self, obj: T) -> T | None:
        """The object stored under ``obj``'s key, or ``None``."""
        return self._store.get(self._key_func(obj))

    def get_by_key(self, key: str) -> T | None:
        """The object stored under ``key``, or ``None``."""
        return self._store.get(key)

    def __len__(self) -> int:
        """How many objects are stored."""
        return len(self._store)

    def __contains__(self, key: object) -> bool:
        """Whether an object is stored under ``key``."""
        return key in self._store

    def index(self, index_name: str, obj: T) -> builtins.list[T]:
        """See :meth:`ThreadSafeStore.index`."""
        return self._store.index(index_name, obj)

    def index_keys(self, index_name: str, indexed_value: str) -> builtins.list[str]:
        """See :meth:`ThreadSafeStore.index_keys`."""
        return self._store.index_keys(index_name, indexed_value)

    def list_index_func_values(self, index_name: str) -> builtins.list[str]:
        """See :meth:`ThreadSafeStore.list_index_func_values`."""
        return self._store.list_index_func_values(index_name)

    def by_index(self, index_name: str, indexed_value: str) -> builtins.list[T]:
        """See :meth:`ThreadSafeStore.by_index`."""
        return self._store.by_index(index_name, indexed_value)

    def get_indexers(self) -> Indexers[T]:
        """See :meth:`ThreadSafeStore.get_indexers`."""
        return self._store.get_indexers()

    def add_indexers(self, indexers: Mapping[str, IndexFunc[T]]) -> None:
        """See :meth:`ThreadSafeStore.add_indexers`."""
        self._store.add_indexers(indexers)

    def __repr__(self) -> str:
        return f"<Cache objects={len(self._store)} indexes={sorted(self.get_indexers())}>"


def new_store(key_func: KeyFunc = deletion_handling_meta_namespace_key_func) -> Cache[T]:
    """A thread-safe Store without indexes (client-go's ``NewStore``).

    It holds :data:`~kubereflector.KubeObject` objects unless annotated otherwise
    (``store: Cache[MyModel] = new_store()``)."""
    return Cache(key_func)


def new_indexer(
    key_func: KeyFunc = deletion_handling_meta_namespace_key_func,
    indexers: Mapping[str, IndexFunc[T]] | None = None,
) -> Cache[T]:
    """A thread-safe Indexer with the given indexes (client-go's ``NewIndexer``).

    Its object type is the one its index functions take
    (:data:`~kubereflector.KubeObject` unless they say otherwise)."""
    return Cache(key_func, indexers)
