"""The Manager's entries for its caches and writes (a base of
:class:`~kubereflector.runtime.Manager`): the listers reconcilers read, which see their
own writes (:mod:`kubereflector.runtime.read_your_writes`), the ledger of the client's
writes, the EventRecorders, and the ``/readyz`` check of silent watches. Private: kept
apart so that the manager's module stays about running controllers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from ..cache.keys import KubeObject, ModelT
from ._recorders import Recorders, watches_alive
from .read_your_writes import OwnWrites, ReadYourWritesLister

if TYPE_CHECKING:
    from ..cache.listers import Lister
    from ..cache.shared_informer import SharedIndexInformer
    from ..client.discovery import ResourceInfo
    from ..client.events import EventRecorder
    from ..client.rest import Client
    from ..clock import Clock
    from ..factory import SharedInformerFactory

__all__: list[str] = []


class _CacheEntries:
    """What the Manager adds for its caches and writes (see the module documentation)."""

    # The manager's, used here.
    _client: Client
    _clock: Clock
    _factory: SharedInformerFactory
    _lock: threading.Lock
    _namespace: str | None
    _readyz: dict[str, Callable[[], bool]]

    def _init_cache_entries(
        self, read_your_writes_timeout: float | None, stale_watch_threshold: float | None
    ) -> None:
        """After the factory and the checks exist; raises ``ValueError`` for a threshold
        that is not a positive number of seconds."""
        if stale_watch_threshold is not None and not stale_watch_threshold > 0:
            raise ValueError(
                f"stale_watch_threshold must be > 0 seconds or None (got {stale_watch_threshold})"
            )
        self._own_writes: OwnWrites | None = None
        if read_your_writes_timeout is not None:
            self._own_writes = OwnWrites(
                self._cached,
                namespace=self._namespace,
                timeout=read_your_writes_timeout,
                clock=self._clock,
            )
        self._listers: dict[int, ReadYourWritesLister[Any]] = {}
        self._recorders = Recorders(self._client, self._clock)
        if stale_watch_threshold is not None:
            self._readyz["watches"] = watches_alive(self._factory.informers, stale_watch_threshold)

    @overload
    def lister_for(self, resource: type[ModelT]) -> Lister[ModelT]: ...

    @overload
    def lister_for(self, resource: str | ResourceInfo) -> Lister[KubeObject]: ...

    def lister_for(self, resource: str | ResourceInfo | type[ModelT]) -> Lister[Any]:
        """The lister over the shared cache of ``resource``: what reconcilers read
        (``manager.lister_for(Pod)`` is a ``Lister[Pod]``; see :meth:`informer_for`).
        Inside a reconcile its reads do not miss what that reconcile's request wrote
        through :attr:`client` (see :mod:`kubereflector.runtime.read_your_writes`;
        ``informer_for(resource).lister`` reads the cache as it is)."""
        informer: SharedIndexInformer[Any] = self._factory.informer_for(resource)
        ledger = self._own_writes
        if ledger is None:
            return informer.lister
        with self._lock:
            lister = self._listers.get(id(informer))
            if lister is None:
                lister = self._listers[id(informer)] = ReadYourWritesLister(informer, ledger)
        return lister

    @property
    def own_writes(self) -> OwnWrites | None:
        """The read-your-own-writes ledger of :attr:`client`'s writes (``None`` when
        made with ``read_your_writes_timeout=None``): its counters say what it cost."""
        return self._own_writes

    def event_recorder(self, name: str) -> EventRecorder:
        """The :class:`~kubereflector.client.EventRecorder` reporting as ``name`` (its
        ``reportingController``; one per name, controller-runtime's
        ``GetEventRecorderFor``). Make it at any time, on any thread, before the
        manager runs too; record from coroutine and plain-function reconcilers and
        any thread: it sends from the manager's event loop once the manager is
        entered or runs (what is recorded before waits), and the manager flushes it
        (within ``graceful_shutdown_timeout``) when it stops. Raises ``ValueError``
        for an empty name."""
        return self._recorders.get(name)

    def _cached(self, resource: ResourceInfo) -> SharedIndexInformer[Any] | None:
        """The manager's informer of ``resource``, if it made one (for the ledger)."""
        return self._factory.informers().get(resource.qualified_name)

    def _attach_cache_entries(self, loop: asyncio.AbstractEventLoop) -> None:
        """On entering the manager: the recorders send from ``loop``, the ledger hears of
        the client's writes."""
        self._recorders.bind(loop)
        observers = getattr(self._client, "write_observers", None)
        if self._own_writes is not None and isinstance(observers, list):
            observers.append(self._own_writes)

    async def _detach_cache_entries(self, timeout: float) -> None:
        """On closing the manager: flush the recorders (``timeout`` seconds each), and
        the ledger hears no more."""
        await self._recorders.flush(timeout)
        observers = getattr(self._client, "write_observers", None)
        if isinstance(observers, list) and self._own_writes in observers:
            observers.remove(self._own_writes)
