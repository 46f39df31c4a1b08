"""The Store and Indexer protocols: what a Reflector writes through, what a queue
asks of its consumer's objects, and what listers and informers read
(client-go's ``Store``, ``Indexer``, ``ReflectorStore``). Implemented by
:class:`~kubereflector.Cache`; importable from :mod:`kubereflector.cache.store`
and from ``kubereflector``.

Apart from :mod:`~kubereflector.cache.store` so that the store's implementation
compiles with mypyc, which cannot compile runtime-checkable protocols
(mypyc/mypyc#909).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeAlias, runtime_checkable

from .keys import T, T_co

__all__ = [
    "IndexFunc",
    "Indexer",
    "Indexers",
    "KeyListerGetter",
    "ReflectorStore",
    "ResourceVersionUpdater",
    "Store",
    "WatchChange",
    "WatchChangeWriter",
]

IndexFunc: TypeAlias = Callable[[T], list[str]]
"""Maps an object to the values it is indexed under (possibly none). Must be pure.
``IndexFunc[T]`` indexes objects of type ``T``; plain ``IndexFunc``, a
:data:`~kubereflector.KubeObject`."""

Indexers: TypeAlias = dict[str, IndexFunc[T]]
"""Index name -> index function (``Indexers[T]``: of objects of type ``T``)."""


@runtime_checkable
class KeyListerGetter(Protocol[T_co]):
    """What a queue needs to know about its consumer's objects (``known_objects``):
    the keys it holds, and the object under a key (``None``: none)."""

    def list_keys(self) -> list[str]:
        """Every key held (a new list)."""
        ...

    def get_by_key(self, key: str) -> T_co | None:
        """The object under ``key``, or ``None``."""
        ...


@runtime_checkable
class ReflectorStore(Protocol[T]):
    """The five methods a Reflector writes through (client-go's ``ReflectorStore``).

    ``add``/``update``/``delete`` record one change of an object; ``replace``
    swaps the whole content for ``items`` (a relist) at ``resource_version``;
    ``resync`` re-delivers what is held (a no-op for a plain cache).
    """

    def add(self, obj: T) -> None:
        """Record that ``obj`` was added."""
        ...

    def update(self, obj: T) -> None:
        """Record that ``obj`` changed."""
        ...

    def delete(self, obj: T) -> None:
        """Record that ``obj`` was deleted (its last known state)."""
        ...

    def replace(self, items: list[T], resource_version: str) -> None:
        """Make ``items`` the whole content, listed at ``resource_version``."""
        ...

    def resync(self) -> None:
        """Re-deliver what is held (a periodic resync)."""
        ...


WatchChange = tuple[str, Any]
"""A change a watch event makes: ``(type, object)``, the type ``ADDED``,
``MODIFIED`` or ``DELETED``."""


@runtime_checkable
class WatchChangeWriter(Protocol):
    """Optional: a store that takes a watch's changes a batch at a time (the
    Reflector then makes one call per batch instead of one per event)."""

    def apply_watch_changes(
        self, changes: list[WatchChange]
    ) -> list[tuple[WatchChange, Exception]]:
        """Apply ``changes`` in order, each as ``add`` (ADDED), ``update``
        (MODIFIED) or ``delete`` (DELETED) would; a change that cannot be applied
        is skipped, the others are applied all the same. Returns the skipped
        changes with their errors (for the caller to report). Does not raise for
        one bad change; takes ownership of ``changes``."""
        ...


@runtime_checkable
class ResourceVersionUpdater(Protocol):
    """Optional: a store that wants every resourceVersion the Reflector syncs to,
    bookmarks included."""

    def update_resource_version(self, resource_version: str) -> None:
        """Record the resourceVersion synced to."""
        ...


@runtime_checkable
class Store(ReflectorStore[T], KeyListerGetter[T], Protocol[T]):
    """A keyed collection of objects of type ``T`` (client-go's ``Store``).

    ``get`` (by the key of ``obj``) and ``get_by_key`` return the stored object,
    or ``None`` if absent; ``list`` returns every stored object. Objects returned
    are the store's own: treat them as immutable.
    """

    def list(self) -> list[T]:
        """Every stored object (a new list)."""
        ...

    def get(self, obj: T) -> T | None:
        """The stored object with ``obj``'s key, or ``None``."""
        ...

    def last_store_sync_resource_version(self) -> str:
        """The resourceVersion of the last ``replace`` (``""`` before one)."""
        ...


@runtime_checkable
class Indexer(Store[T], Protocol[T]):
    """A Store with named secondary indexes (client-go's ``Indexer``).

    ``index`` returns the objects sharing an indexed value with ``obj``,
    ``by_index`` those indexed under one value, ``index_keys`` their keys.
    Every method raises :class:`UnknownIndexError` for an index name that was never added.
    """

    def index(self, index_name: str, obj: T) -> list[T]:
        """The objects sharing at least one of ``obj``'s values in the index."""
        ...

    def index_keys(self, index_name: str, indexed_value: str) -> list[str]:
        """The keys of the objects indexed under ``indexed_value``."""
        ...

    def list_index_func_values(self, index_name: str) -> list[str]:
        """Every value at least one object is indexed under."""
        ...

    def by_index(self, index_name: str, indexed_value: str) -> list[T]:
        """The objects indexed under ``indexed_value``."""
        ...

    def get_indexers(self) -> Indexers[T]:
        """The index functions, by index name (a copy)."""
        ...

    def add_indexers(self, indexers: Indexers[T]) -> None:
        """Add indexes (objects held are indexed at once); a name already
        added raises ``ValueError``."""
        ...
