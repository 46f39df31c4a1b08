"""The gate through which a sharded replica's controllers reconcile only the shards it
holds (see :mod:`kubereflector.runtime.gate`).

:class:`ShardGate` is the replica's: which shards are open (their keys handed
out), which reconciles are in flight per shard, and until when the replica's
membership is valid. The coordinator opens and closes shards; a closed shard's
count reaching zero tells it (``on_drained``) so it frees the shard at once.
Each controller gets a :class:`ControllerGate` over it, with a
:class:`ShardRouter` that finds a request's shard: the ``metadata.uid`` of its
object in the controller's cache, or, for an object just deleted, the uid it
had (the router hears the deletes).

Every method runs on the manager's event loop (the Controller's gate contract):
no locks, and the count of a shard is exact when the coordinator reads it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ...cache.keys import DeletedFinalStateUnknown, get_uid, meta_namespace_key_func
from ...clock import Clock
from ..gate import GateTicket, ReconcileRevokedError
from ..reconcile import Request
from .space import ShardSpace

if TYPE_CHECKING:
    from ...cache.shared_informer import SharedIndexInformer

__all__ = ["ControllerGate", "ShardGate", "ShardRouter"]

logger = logging.getLogger("kubereflector.runtime")

T = TypeVar("T")

_DELETED_KEPT: Final = 65_536
"""Deleted objects whose shard a router remembers until their request is reconciled."""


class ShardRouter:
    """The shard of a request of one controller: from its object's uid in the
    controller's cache (``informer``), else from the uid a deleted object had.

    Register it on that informer as an event handler (it only notes deletes).
    """

    __slots__ = ("_deleted", "_indexer", "_space")

    def __init__(self, space: ShardSpace, informer: SharedIndexInformer[Any]) -> None:
        self._space = space
        self._indexer = informer.indexer
        self._deleted: collections.OrderedDict[str, int] = collections.OrderedDict()

    def shard_of(self, request: Request) -> int | None:
        """The shard of ``request``'s object; ``None`` when this replica does not know
        the object (not in its shards, or never seen)."""
        key = request.key
        obj = self._indexer.get_by_key(key)
        if obj is not None:
            uid = get_uid(obj)
            return self._space.shard_of(uid) if uid else None
        return self._deleted.get(key)

    def settled(self, request: Request) -> None:
        """``request`` was reconciled: a deleted object's shard is not needed any more."""
        if self._deleted and self._indexer.get_by_key(request.key) is None:
            self._deleted.pop(request.key, None)

    # -- the informer's handler ------------------------------------------------------------

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        """An object (re)appeared: its shard comes from the cache again."""
        if self._deleted:
            self._deleted.pop(meta_namespace_key_func(obj), None)

    async def on_update(self, old: Any, new: Any) -> None:
        """Nothing to note."""

    async def on_delete(self, obj: Any) -> None:
        """Remember the deleted object's shard until its request is reconciled."""
        if type(obj) is DeletedFinalStateUnknown:
            key, last = obj.key, obj.obj
        else:
            key, last = meta_namespace_key_func(obj), obj
        uid = get_uid(last) if last is not None else None
        if not uid:
            return
        self._deleted[key] = self._space.shard_of(uid)
        self._deleted.move_to_end(key)
        if len(self._deleted) > _DELETED_KEPT:
            self._deleted.popitem(last=False)


class ShardGate:
    """Which shards a replica hands out now, and its reconciles in flight per shard.

    ``clock`` says whether the membership is still valid (:meth:`set_valid_until`);
    ``on_drained(shard)`` is called when a closed shard's last reconcile ends.
    """

    def __init__(self, clock: Clock, on_drained: Callable[[int], None]) -> None:
        self._clock = clock
        self._on_drained = on_drained
        self._open: set[int] = set()
        self._in_flight: collections.Counter[int] = collections.Counter()
        self._tasks: dict[int, set[asyncio.Task[Any]]] = {}
        self._revoked: set[asyncio.Task[Any]] = set()
        self._valid_until = float("-inf")

    def set_valid_until(self, moment: float) -> None:
        """The replica's membership is valid until ``moment`` (clock time): no shard is
        handed out after it, whatever is open."""
        self._valid_until = moment

    def is_open(self, shard: int) -> bool:
        """Whether ``shard``'s keys are handed out now."""
        return shard in self._open and self._clock.now() < self._valid_until

    def open(self, shard: int) -> None:
        """Hand out ``shard``'s keys."""
        self._open.add(shard)

    def close(self, shard: int, *, cancel: bool = False) -> None:
        """Stop handing out ``shard``'s keys; with ``cancel``, cancel its coroutine
        reconciles in flight (they end with :class:`ReconcileRevokedError`)."""
        self._open.discard(shard)
        if cancel:
            for task in self._tasks.get(shard, ()):
                if not task.done():
                    self._revoked.add(task)
                    task.cancel()
        if self._in_flight[shard] == 0:
            self._on_drained(shard)

    def in_flight(self) -> dict[int, int]:
        """Reconciles running now, per shard (shards with none absent)."""
        return {shard: n for shard, n in self._in_flight.items() if n}

    def opened(self) -> set[int]:
        """The shards open (whatever the membership's validity)."""
        return set(self._open)

    def controller_gate(self, router: ShardRouter) -> ControllerGate:
        """The gate of one controller, whose requests ``router`` places."""
        return ControllerGate(self, router)

    # -- for ControllerGate ----------------------------------------------------------------

    def _enter(self, shard: int) -> bool:
        if not self.is_open(shard):
            return False
        self._in_flight[shard] += 1
        return True

    def _exit(self, shard: int) -> None:
        self._in_flight[shard] -= 1
        if self._in_flight[shard] <= 0:
            del self._in_flight[shard]
            if shard not in self._open:
                self._on_drained(shard)

    async def _run(self, shard: int, call: Awaitable[T]) -> T:
        task = asyncio.ensure_future(call)
        tasks = self._tasks.setdefault(shard, set())
        tasks.add(task)
        try:
            try:
                await _finished(task)
            except asyncio.CancelledError:  # the worker itself is cancelled
                task.cancel()
                await _finished(task)
                raise
            if task in self._revoked and task.cancelled():
                raise ReconcileRevokedError(f"shard {shard} left this replica")
            return task.result()
        finally:
            tasks.discard(task)
            self._revoked.discard(task)
            if not tasks:
                self._tasks.pop(shard, None)


def _finished(task: asyncio.Task[Any]) -> asyncio.Future[None]:
    """A future done when ``task`` is; cancelling it leaves ``task`` alone (what
    ``asyncio.wait({task})`` does, for a third of its cost: this is once per reconcile)."""
    waiter: asyncio.Future[None] = task.get_loop().create_future()

    def wake(_: asyncio.Task[Any]) -> None:
        if not waiter.done():
            waiter.set_result(None)

    task.add_done_callback(wake)
    return waiter


class _Ticket:
    __slots__ = ("_done", "_gate", "_request", "_shard")

    def __init__(self, gate: ControllerGate, shard: int, request: Request) -> None:
        self._gate = gate
        self._shard = shard
        self._request = request
        self._done = False

    def run(self, reconcile: Awaitable[T]) -> Awaitable[T]:
        return self._gate._shards._run(self._shard, reconcile)

    def exit(self) -> None:
        if self._done:
            return
        self._done = True
        self._gate._shards._exit(self._shard)
        self._gate._router.settled(self._request)


class ControllerGate:
    """One controller's :class:`~kubereflector.runtime.gate.ReconcileGate` over a
    replica's :class:`ShardGate`: a request is queued and reconciled only while its
    shard is open."""

    __slots__ = ("_router", "_shards")

    def __init__(self, shards: ShardGate, router: ShardRouter) -> None:
        self._shards = shards
        self._router = router

    @property
    def router(self) -> ShardRouter:
        """Where this controller's requests are placed."""
        return self._router

    def wanted(self, request: Request) -> bool:
        """Queue ``request`` only while its shard is open here."""
        shard = self._router.shard_of(request)
        return shard is not None and self._shards.is_open(shard)

    def enter(self, request: Request) -> GateTicket | None:
        """Admit ``request``'s reconcile while its shard is open here."""
        shard = self._router.shard_of(request)
        if shard is None or not self._shards._enter(shard):
            return None
        return _Ticket(self, shard, request)
