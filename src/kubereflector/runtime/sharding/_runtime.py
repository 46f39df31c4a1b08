"""A Manager's sharding: its informers' ListerWatchers wrapped, its controllers gated,
its coordinator run (the glue between :class:`~kubereflector.runtime.Manager` and
:class:`~kubereflector.runtime.sharding.ShardCoordinator`; private).

* Each informer the manager's factory makes lists through a
  :class:`~kubereflector.cache.sharded_listwatch.ShardedListWatch` (everything,
  until told otherwise). Each resource's use decides its filter: reconciled
  (``for_``) by its objects' uids, owned (``owns``) by their controller owner's,
  watched through a mapper (or read by no controller) not at all.
* Each controller reconciles through a gate of the coordinator's
  (:mod:`kubereflector.runtime.gate`), and a shard taken queues every object of
  it from the controller's cache.
* A shard counts as warm (the coordinator takes it only then) once every
  filtered cache has synced with it: the last full sync's filter covers it, and
  the informer has applied that sync (its queue ran empty, or a retry period
  passed since).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from ...cache.keys import get_name, get_namespace, get_uid
from ...cache.listwatch import ListerWatcher
from ...cache.sharded_listwatch import ShardedListWatch, SyncedFilter
from ...clock import Clock
from ...workqueue import LOW_PRIORITY
from ..reconcile import Request
from ._filters import Use, shard_filter
from ._gate import ControllerGate, ShardRouter
from .coordinator import ShardCoordinator
from .leases import ClientLeaseStore
from .options import Sharding

if TYPE_CHECKING:
    from ...cache.shared_informer import SharedIndexInformer
    from ...client.discovery import ResourceInfo
    from ...client.rest import Client
    from ...metrics import Metrics
    from ..controller import Controller

__all__ = ["ShardedRuntime"]

logger = logging.getLogger("kubereflector.runtime")


class ShardedRuntime:
    """The sharding of one Manager (see the module documentation). Used on the
    manager's event loop, but :meth:`wrap` (called by the factory, from any thread)."""

    def __init__(
        self,
        sharding: Sharding,
        client: Client,
        *,
        namespace: str,
        clock: Clock,
        metrics: Metrics,
    ) -> None:
        self._clock = clock
        self._lws: dict[str, ShardedListWatch] = {}
        self._uses: dict[str, Use] = {}
        self._informers: dict[str, SharedIndexInformer[Any]] = {}
        self._controllers: list[tuple[Controller, ControllerGate]] = []
        self.coordinator = ShardCoordinator(
            sharding,
            ClientLeaseStore(client, namespace, sharding.name),
            namespace=namespace,
            clock=clock,
            metrics=metrics.sharding(sharding.name),
            set_scope=self._set_scope,
            warm=self._warm,
            on_open=self._open,
        )
        self._scope: frozenset[int] | None = None

    def wrap(self, info: ResourceInfo, lw: ListerWatcher) -> ListerWatcher:
        """The factory's hook: ``lw`` behind a ShardedListWatch (keeping everything
        until a controller's use of the resource says otherwise)."""
        sharded = ShardedListWatch(lw, clock=self._clock, on_synced=self._synced)
        self._lws[info.qualified_name] = sharded
        return sharded

    def _synced(self, synced: SyncedFilter) -> None:
        """A cache synced a new set of shards: the coordinator may take them now."""
        self.coordinator.wake()

    def use(self, info: ResourceInfo, informer: SharedIndexInformer[Any], use: Use) -> None:
        """A controller uses ``info``'s cache as ``use`` (before the start)."""
        name = info.qualified_name
        self._uses[name] = self._uses.get(name, use) | use
        self._informers[name] = informer

    def plan_uses(
        self,
        reconciled: tuple[ResourceInfo, SharedIndexInformer[Any]],
        owned: Sequence[tuple[ResourceInfo, SharedIndexInformer[Any]]],
        watched: Sequence[tuple[ResourceInfo, SharedIndexInformer[Any]]],
    ) -> None:
        """A controller reconciling ``reconciled``, owning ``owned`` and watching
        ``watched`` (each a resource and its informer): what it reconciles is filtered
        by uid, what it owns by owner, what it watches not at all."""
        self.use(*reconciled, Use.OWN)
        for info, informer in owned:
            self.use(info, informer, Use.OWNER)
        for info, informer in watched:
            self.use(info, informer, Use.ALL)

    def gate_for(self, informer: SharedIndexInformer[Any]) -> ControllerGate:
        """A new controller's gate, its requests placed by ``informer``'s cache."""
        router = ShardRouter(self.coordinator.space, informer)
        informer.add_event_handler(router)
        return self.coordinator.gate.controller_gate(router)

    def attach(self, controller: Controller, gate: ControllerGate) -> None:
        """``controller`` reconciles through ``gate``: a shard taken queues its objects."""
        self._controllers.append((controller, gate))

    def detach_all(self) -> None:
        """The controllers stopped (a new term makes new ones)."""
        self._controllers.clear()

    # -- the coordinator's hooks --------------------------------------------------------

    def _filtered(self) -> list[tuple[ShardedListWatch, Use, SharedIndexInformer[Any]]]:
        out = []
        for name, use in self._uses.items():
            lw = self._lws.get(name)
            if lw is not None and not use & Use.ALL:
                out.append((lw, use, self._informers[name]))
        return out

    def _set_scope(self, shards: frozenset[int]) -> None:
        self._scope = shards
        space = self.coordinator.space
        for lw, use, _ in self._filtered():
            lw.set_filter(shard_filter(space, shards, use))

    def _warm(self) -> Collection[int] | None:
        now = self._clock.now()
        period = self.coordinator.options.retry_period
        warm: set[int] | None = None
        for name, informer in self._informers.items():
            if not informer.has_synced():
                return ()
            lw = self._lws.get(name)
            if lw is None or self._uses[name] & Use.ALL:
                continue  # a cache of everything: its first sync is all it takes
            synced = lw.synced
            scope = synced.filter.scope if synced is not None else None
            if synced is None or not isinstance(scope, frozenset):
                return ()
            if now - synced.at < period and informer.stats().queued:
                return ()  # that sync is still on its way into the cache
            warm = set(scope) if warm is None else warm & scope
        return warm

    def _open(self, shards: frozenset[int]) -> None:
        """Queue every object of ``shards`` in each controller's cache (at low priority,
        as an initial list is): what changed while the shards moved is reconciled."""
        shard_of = self.coordinator.space.shard_of
        for controller, _ in self._controllers:
            queue = controller.queue
            for obj in controller.informer.indexer.list():
                uid = get_uid(obj)
                name = get_name(obj)
                if uid and name and shard_of(uid) in shards:
                    queue.add(Request(get_namespace(obj) or "", name), priority=LOW_PRIORITY)
