"""Listers: read-only, selector-aware views of an informer's cache (client-go's ``listers.go``).

A :class:`Lister` lists and gets objects from an Indexer (or any Store);
``namespaced(ns)`` narrows it to one namespace, through the namespace index
(:data:`~kubereflector.NAMESPACE_INDEX`) when the cache has one, else by a scan.
Selectors use Kubernetes' label selector syntax (``"app=web,tier in (a,b)"``),
parsed by :class:`kubereflector.selectors.LabelSelector`; a malformed one raises
``ValueError`` naming the offending part.

Thread-safety: every method may be called from any thread. The objects returned
are the cache's own: treat them as immutable.
"""

from __future__ import annotations

import builtins
from typing import Generic

from ..selectors import LabelSelector
from .keys import T, get_labels, get_namespace
from .store import NAMESPACE_INDEX, Indexer, Store, UnknownIndexError

__all__ = ["Lister", "NamespaceLister", "SelectorLike"]

SelectorLike = str | LabelSelector | None
"""A label selector: its text (``""``: everything), a parsed one, or ``None`` (everything)."""


def _selector(selector: SelectorLike) -> LabelSelector | None:
    """The parsed selector, or ``None`` when it selects everything."""
    if selector is None:
        return None
    if isinstance(selector, str):
        selector = LabelSelector.parse(selector)
    elif not isinstance(selector, LabelSelector):
        raise TypeError(f"a selector is a string or a LabelSelector, not {type(selector).__name__}")
    return None if selector.empty else selector


def _select(objects: builtins.list[T], selector: LabelSelector | None) -> builtins.list[T]:
    if selector is None:
        return objects
    matches = selector.matches
    return [obj for obj in objects if matches(get_labels(obj))]


class Lister(Generic[T]):
    """Lists and gets the objects of a cache (client-go's ``GenericLister``):
    a ``Lister[T]`` reads a ``Store[T]`` (plain ``Lister``: of
    :data:`~kubereflector.KubeObject` objects). A factory's ``lister_for(Pod)`` is a
    ``Lister[Pod]``: ``get`` gives a ``Pod | None``, ``list`` a ``list[Pod]``."""

    __slots__ = ("_indexer", "_store")

    def __init__(self, store: Store[T]) -> None:
        self._store = store
        self._indexer: Indexer[T] | None = store if isinstance(store, Indexer) else None

    @property
    def store(self) -> Store[T]:
        """The store read (never write to it through the lister's users)."""
        return self._store

    def list(self, selector: SelectorLike = None) -> builtins.list[T]:
        """Every cached object whose labels match ``selector`` (all of them by default)."""
        return _select(self._store.list(), _selector(selector))

    def get(self, name: str) -> T | None:
        """The cluster-scoped object ``name``, or ``None`` if the cache has none.

        For a namespaced object use ``namespaced(ns).get(name)``.
        """
        return self._store.get_by_key(name)

    def namespaced(self, namespace: str) -> NamespaceLister[T]:
        """A lister of the objects in ``namespace`` (``""``: every namespace for
        ``list``, cluster-scoped objects for ``get``)."""
        return NamespaceLister(self, namespace)

    def by_index(
        self, index_name: str, indexed_value: str, selector: SelectorLike = None
    ) -> builtins.list[T]:
        """The objects indexed under ``indexed_value`` in the named index, filtered by
        ``selector``. Raises :class:`~kubereflector.UnknownIndexError` for an
        unknown index (or a cache without indexes)."""
        parsed = _selector(selector)
        if self._indexer is None:
            raise UnknownIndexError(
                f"index {index_name!r} does not exist (the store has no indexes)"
            )
        return _select(self._indexer.by_index(index_name, indexed_value), parsed)

    def _in_namespace(self, namespace: str, selector: LabelSelector | None) -> builtins.list[T]:
        indexer = self._indexer
        if indexer is not None:
            try:
                objects = indexer.by_index(NAMESPACE_INDEX, namespace)
            except UnknownIndexError:
                pass
            else:
                return _select(objects, selector)
        # No namespace index: a scan.
        return _select(
            [obj for obj in self._store.list() if (get_namespace(obj) or "") == namespace],
            selector,
        )

    def __repr__(self) -> str:
        return f"<Lister over {self._store!r}>"


class NamespaceLister(Generic[T]):
    """The objects of one namespace (client-go's ``GenericNamespaceLister``)."""

    __slots__ = ("_lister", "_namespace")

    def __init__(self, lister: Lister[T], namespace: str) -> None:
        self._lister = lister
        self._namespace = namespace

    @property
    def namespace(self) -> str:
        """The namespace (``""``: every namespace, see :meth:`Lister.namespaced`)."""
        return self._namespace

    def list(self, selector: SelectorLike = None) -> builtins.list[T]:
        """The objects of this namespace whose labels match ``selector``."""
        parsed = _selector(selector)
        if not self._namespace:
            return _select(self._lister.store.list(), parsed)
        return self._lister._in_namespace(self._namespace, parsed)

    def get(self, name: str) -> T | None:
        """The object ``name`` of this namespace, or ``None`` if the cache has none."""

        key = f"{self._namespace}/{name}" if self._namespace else name
        return self._lister.store.get_by_key(key)

    def __repr__(self) -> str:
        return f"<NamespaceLister {self._namespace!r} over {self._lister.store!r}>"
