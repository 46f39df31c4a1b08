"""``ShardCoordinator``: one replica's part in a sharded controller, on Leases.

Every ``retry_period`` seconds a coordinator

1. renews its member Lease (see :mod:`~kubereflector.runtime.sharding.leases`);
   its membership is valid until the start of the last successful renewal plus
   ``renew_deadline``, and nothing of its shards is handed out after that;
2. lists the group's Leases (one consistent read) and notes, on its own clock,
   which changed (:class:`~kubereflector.runtime.sharding.membership.Observer`):
   the members alive, and who holds each shard;
3. computes the assignment (:func:`~kubereflector.runtime.sharding.assignment.assign_shards`)
   and lets the :class:`~kubereflector.runtime.sharding.handoff.Handoff` state
   machine say what to do: take a shard it should hold whose Lease is free and
   whose objects its caches hold (a compare-and-swap of the shard Lease), drain
   one it should give up (its keys are no longer handed out; once its
   reconciles in flight have ended, free its Lease), drop at once whatever it
   holds when its membership lapsed;
4. tells its caches which shards to hold: those it holds or is handing over, and
   those it should hold (so a replica's caches are synced before it takes a
   shard: warm standby).

A shard freed by another replica is taken at the next tick; one whose holder
stopped renewing is taken once that holder's member Lease has not changed for
its duration. A shard drained here is freed as soon as its last reconcile ends.
On graceful shutdown (``stopping``) every shard is drained and freed, then the
member Lease is released: the others take over within one retry period.

The coordinator hands its shards to controllers through :attr:`gate` (see
:mod:`kubereflector.runtime.gate`). It runs on one event loop; :meth:`status`
and :meth:`ready` may be called from any thread (they read a snapshot).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..._aio.tasks import cancel_and_wait
from ...clock import Clock, RealClock
from ...errors import AlreadyExistsError, ConflictError
from ._gate import ShardGate
from .assignment import assign_shards
from .handoff import Acquire, Action, Close, Handoff, Open, Phase, Release, View
from .leases import (
    LeaseStore,
    member_lease,
    member_lease_name,
    shard_lease,
    shard_lease_name,
    with_holder,
)
from .membership import Observer
from .options import Sharding
from .space import ShardSpace

if TYPE_CHECKING:
    from ...metrics import ShardingMetrics

__all__ = ["ShardCoordinator", "ShardingStatus"]

logger = logging.getLogger("kubereflector.runtime")

_RELEASED_SECONDS: Final = 1


@dataclass(frozen=True, slots=True)
class ShardingStatus:
    """A snapshot of one replica's view (see :meth:`ShardCoordinator.status`)."""

    identity: str
    """This replica."""
    valid: bool
    """Whether its membership is valid (its member Lease renewed in time)."""
    members: frozenset[str]
    """The members it sees alive, itself included when valid."""
    desired: frozenset[int]
    """The shards the assignment gives it."""
    held: frozenset[int]
    """The shards whose keys it hands out now."""
    owned: frozenset[int]
    """The shards whose Lease names it (held, being taken or being handed back)."""
    cached: frozenset[int]
    """The shards its caches are told to hold."""


def _nothing_warm() -> Collection[int] | None:
    return None


def _no_scope(shards: frozenset[int]) -> None:
    pass


def _no_open(shards: frozenset[int]) -> None:
    pass


class ShardCoordinator:
    """One replica's part in the sharded controller ``options.name`` (see the module
    documentation), its Leases in ``store`` (in ``namespace``, written into them).

    Hooks, each a quick plain function called on the coordinator's loop:

    * ``set_scope(shards)``: the caches should hold the objects of ``shards`` now;
    * ``warm()``: the shards whose objects the caches hold, synced (``None``: no
      cache to wait for, every shard counts as warm);
    * ``on_open(shards)``: these shards were just taken: queue all their objects.

    ``identity`` defaults to ``options.identity`` or ``hostname_uuid``; ``clock``
    drives renewals and expiry (a FakeClock in tests); ``metrics`` receives the
    ``kubereflector_sharding_`` metrics.
    """

    def __init__(
        self,
        options: Sharding,
        store: LeaseStore,
        *,
        namespace: str,
        identity: str | None = None,
        clock: Clock | None = None,
        metrics: ShardingMetrics | None = None,
        set_scope: Callable[[frozenset[int]], None] = _no_scope,
        warm: Callable[[], Collection[int] | None] = _nothing_warm,
        on_open: Callable[[frozenset[int]], None] = _no_open,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if not isinstance(options, Sharding):
            raise TypeError(f"options must be a Sharding, not {type(options).__name__}")
        from ...leaderelection import default_identity

        self._options = options
        self._store = store
        self._namespace = namespace
        self._identity = identity or options.identity or default_identity()
        self._clock: Clock = clock if clock is not None else RealClock()
        self._metrics = metrics
        self._set_scope = set_scope
        self._warm = warm
        self._on_open = on_open
        self._jitter = jitter
        self.space: Final = ShardSpace(options.shards)
        """The virtual shards."""
        self.gate: Final = ShardGate(self._clock, self._drained)
        """What this replica's controllers may reconcile (see
        :mod:`~kubereflector.runtime.gate`)."""
        self._observer = Observer(options.shards)
        self._handoff = Handoff(self._identity, options.shards, options.drain_timeout)
        self._member_name = member_lease_name(options.name, self._identity)
        self._member: dict[str, Any] | None = None
        self._valid_until = float("-inf")
        self._next_renew = float("-inf")
        self._desired: frozenset[int] = frozenset()
        self._members: frozenset[str] = frozenset()
        self._cached: frozenset[int] | None = None
        self._drain_started: dict[int, float] = {}
        self._mismatch_logged = False
        self._wake: asyncio.Event | None = None
        self._renewed: asyncio.Event | None = None
        self._started = False
        self._joined_at: float | None = None

    # -- what it holds ------------------------------------------------------------------

    @property
    def identity(self) -> str:
        """This replica's identity in the Leases."""
        return self._identity

    @property
    def options(self) -> Sharding:
        """The sharding settings."""
        return self._options

    def valid(self) -> bool:
        """Whether this replica's membership is valid now."""
        return self._clock.now() < self._valid_until

    def status(self) -> ShardingStatus:
        """A snapshot of what this replica sees and holds."""
        valid = self.valid()
        members = set(self._members)
        if valid:
            members.add(self._identity)
        return ShardingStatus(
            identity=self._identity,
            valid=valid,
            members=frozenset(members),
            desired=self._desired,
            held=frozenset(self._handoff.held()),
            owned=frozenset(self._handoff.owned()),
            cached=self._cached or frozenset(),
        )

    def ready(self) -> bool:
        """``/readyz``: the membership is valid and every shard the assignment gives
        this replica is held here (a replica that should hold nothing is ready)."""
        return self.valid() and self._desired <= self._handoff.held()

    # -- running ------------------------------------------------------------------------

    async def start(self) -> None:
        """Join: renew (create) the member Lease, wait one retry period for the
        replicas started at the same time to do the same, read them, and tell the
        caches which shards to hold, before any is taken (so the first caches are
        already this replica's share, not everything). Idempotent; :meth:`run`
        calls it if need be."""
        if self._started:
            return
        self._started = True
        await self._renew()
        await self._clock.sleep(self._options.retry_period)
        await self._observe()
        self._view(stopping=False)
        self._plan_scope()

    async def run(self, stopping: asyncio.Event) -> None:
        """Take part until ``stopping`` is set, then hand every shard back and release
        the member Lease (a :class:`~kubereflector.runtime.Runnable`). Cancelled, it
        stops at once: what it held is taken over once its Lease expires."""
        self._wake = asyncio.Event()
        self._renewed = asyncio.Event()
        await self.start()
        stop_task = asyncio.ensure_future(stopping.wait())
        watchdog = asyncio.ensure_future(self._watch_validity())
        try:
            while not stopping.is_set():
                await self._tick(list_leases=True)
                await self._sleep(stop_task, stopping=False)
            await self._hand_back()
        finally:
            await cancel_and_wait(stop_task)
            await cancel_and_wait(watchdog)

    async def _watch_validity(self) -> None:
        """Drop every shard the moment the membership lapses, whatever the main loop
        is waiting for (a renewal that hangs, say): a replica that cannot renew
        stops before the others may take its shards."""
        renewed = self._renewed
        assert renewed is not None
        while True:
            remaining = self._valid_until - self._clock.now()
            if remaining > 0:
                await self._clock.sleep(remaining)
                continue
            for action in self._handoff.lapse():
                logger.warning(
                    "%s: could not renew its membership within %gs: dropping shard %d",
                    self._identity,
                    self._options.renew_deadline,
                    action.shard,
                )
                self._close(action)
            if self._metrics is not None:
                self._metrics.held(self._handoff.held(), self._options.shards)
            renewed.clear()
            await renewed.wait()

    async def _sleep(self, stop_task: asyncio.Future[Any] | None, *, stopping: bool) -> None:
        """Until the next tick (``retry_period``), a wake-up (a drained shard), the
        membership's deadline, or the stop (``stop_task``)."""
        wake = self._wake
        assert wake is not None
        delay = self._options.retry_period
        until_invalid = self._valid_until - self._clock.now()
        if 0 < until_invalid < delay:
            delay = until_invalid
        sleeper = asyncio.ensure_future(self._clock.sleep(delay))
        waker = asyncio.ensure_future(wake.wait())
        waits: set[asyncio.Future[Any]] = {sleeper, waker}
        if stop_task is not None:
            waits.add(stop_task)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(sleeper)
            await cancel_and_wait(waker)
        while wake.is_set():  # woken: act on what is known, without listing
            wake.clear()
            await self._tick(list_leases=False, stopping=stopping)

    async def _hand_back(self) -> None:
        """Drain and free every shard, then release the member Lease."""
        while not self._handoff.idle() and self.valid():
            await self._tick(list_leases=True, stopping=True)
            if self._handoff.idle():
                break
            await self._sleep(None, stopping=True)
        if self._handoff.idle():
            await self._release_member()
        else:
            logger.warning(
                "%s: membership lapsed while handing shards back; the others take them "
                "over when its Lease expires",
                self._identity,
            )

    async def _tick(self, *, list_leases: bool, stopping: bool = False) -> None:
        if self._clock.now() >= self._next_renew:
            await self._renew(stopping=stopping)
        if list_leases:
            await self._observe()
        await self._plan(stopping)

    # -- the steps ------------------------------------------------------------------------

    async def _renew(self, *, stopping: bool = False) -> None:
        """Renew (or create) the member Lease; on success the membership is valid
        until this attempt's start plus the renew deadline."""
        options = self._options
        start = self._clock.now()
        self._next_renew = start + options.retry_period
        try:
            lease = self._member
            if lease is None:
                lease = self._observer.lease(self._member_name)
            if lease is None:
                fresh = member_lease(
                    options.name,
                    self._namespace,
                    self._identity,
                    options.shards,
                    options.lease_duration,
                )
                written = await self._store.create(fresh)
            else:
                written = await self._store.update(
                    with_holder(lease, self._identity, options.lease_duration)
                )
        except (ConflictError, AlreadyExistsError) as err:
            self._member = None  # read it again with the next list
            logger.info(
                "%s: member Lease changed under us (%s); reading it again", self._identity, err
            )
            await self._observe()
            return
        except Exception as err:
            logger.warning("%s: could not renew member Lease: %s", self._identity, err)
            return
        if self._joined_at is None:
            self._joined_at = start
        self._member = written
        self._observer.wrote(written, self._clock.now())
        self._valid_until = start + options.renew_deadline
        self.gate.set_valid_until(self._valid_until)
        if self._renewed is not None:
            self._renewed.set()

    async def _observe(self) -> None:
        try:
            leases = await self._store.list()
        except Exception as err:
            logger.warning("%s: could not list the Leases: %s", self._identity, err)
            return
        self._observer.observe(leases, self._clock.now())
        mine = self._observer.lease(self._member_name)
        if mine is not None:
            self._member = mine

    def _view(self, stopping: bool) -> View:
        now = self._clock.now()
        valid = now < self._valid_until
        members = self._observer.members(now)
        members.discard(self._identity)
        self._members = frozenset(members)
        if valid:
            members.add(self._identity)
        holders = self._observer.holders()
        live_holders = {s: h for s, h in holders.items() if h in members}
        desired = assign_shards(members, live_holders, self._options.shards)
        self._desired = frozenset(s for s, m in desired.items() if m == self._identity)
        warm = self._warm()
        if self._joined_at is None or now < self._joined_at + self._options.retry_period:
            # Its first retry period: replicas started together see each other first,
            # rather than the first one taking every shard and handing most back.
            warm = ()
        if self._observer.mismatch is not None:
            if not self._mismatch_logged:
                logger.error(
                    "%s: another replica of %s runs with %d shards, this one with %d: "
                    "taking no shard until they agree (stop them all to change the number)",
                    self._identity,
                    self._options.name,
                    self._observer.mismatch,
                    self._options.shards,
                )
                self._mismatch_logged = True
            warm = ()
        return View(
            now=now,
            valid=valid,
            desired=desired,
            holders=holders,
            members=members,
            warm=range(self._options.shards) if warm is None else warm,
            in_flight=self.gate.in_flight(),
            stopping=stopping,
        )

    async def _plan(self, stopping: bool) -> None:
        view = self._view(stopping)
        if self._metrics is not None:
            self._metrics.members(len(view.members))
        actions = self._handoff.plan(view)
        opened: set[int] = set()
        for action in actions:
            opened |= await self._apply(action)
        if opened:
            self._on_open(frozenset(opened))
        if not stopping:
            self._plan_scope()
        if self._metrics is not None:
            self._metrics.held(self._handoff.held(), self._options.shards)

    def _plan_scope(self) -> None:
        """Tell the caches the shards to hold: owned here, or desired here."""
        if not self.valid() and self._cached is not None:
            return  # keep them as they are until the membership is back
        cached = frozenset(self._handoff.owned() | self._desired)
        if cached != self._cached:
            self._cached = cached
            self._set_scope(cached)

    async def _apply(self, action: Action) -> set[int]:
        """Carry out ``action``; the shards it opened."""
        if isinstance(action, Acquire):
            won = await self._acquire(action.shard)
            opened: set[int] = set()
            for follow in self._handoff.acquired(action.shard, won):
                opened |= await self._apply(follow)
            return opened
        if isinstance(action, Release):
            await self._release(action.shard)
            return set()
        if isinstance(action, Open):
            self.gate.open(action.shard)
            logger.info("%s: holds shard %d", self._identity, action.shard)
            if self._metrics is not None:
                self._metrics.acquired()
            return {action.shard}
        assert isinstance(action, Close)
        self._close(action)
        return set()

    def _close(self, action: Close) -> None:
        was_open = action.shard in self.gate.opened()
        if not action.cancel:
            self._drain_started.setdefault(action.shard, self._clock.now())
        elif action.reason in ("lost", "taken"):
            self._drain_started.pop(action.shard, None)
        self.gate.close(action.shard, cancel=action.cancel)
        if was_open:
            logger.info(
                "%s: stops reconciling shard %d (%s)", self._identity, action.shard, action.reason
            )
            if self._metrics is not None:
                self._metrics.released(action.reason)

    async def _acquire(self, shard: int) -> bool:
        """Write the shard's Lease with this replica as holder; whether it won."""
        options = self._options
        if not self.valid():
            return False
        lease = self._observer.shard_leases().get(shard)
        try:
            if lease is None:
                written = await self._store.create(
                    shard_lease(
                        options.name,
                        self._namespace,
                        shard,
                        options.shards,
                        self._identity,
                        options.lease_duration,
                    )
                )
            else:
                written = await self._store.update(
                    with_holder(lease, self._identity, options.lease_duration)
                )
        except (ConflictError, AlreadyExistsError):
            logger.debug("%s: another replica wrote shard %d's Lease first", self._identity, shard)
            return False
        except Exception as err:
            logger.warning("%s: could not take shard %d: %s", self._identity, shard, err)
            return False
        self._observer.wrote(written, self._clock.now())
        return True

    async def _release(self, shard: int) -> None:
        """Write the shard's Lease with no holder (it has no reconcile in flight here)."""
        lease = self._observer.lease(shard_lease_name(self._options.name, shard))
        try:
            if lease is not None:
                written = await self._store.update(with_holder(lease, "", _RELEASED_SECONDS))
                self._observer.wrote(written, self._clock.now())
        except ConflictError:
            logger.info("%s: shard %d's Lease changed before its release", self._identity, shard)
        except Exception as err:
            logger.warning("%s: could not release shard %d: %s", self._identity, shard, err)
        else:
            logger.info("%s: released shard %d", self._identity, shard)
        started = self._drain_started.pop(shard, None)
        if started is not None and self._metrics is not None:
            self._metrics.handoff(self._clock.now() - started)
        self._handoff.released(shard)

    async def _release_member(self) -> None:
        lease = self._member or self._observer.lease(self._member_name)
        if lease is None:
            return
        try:
            await self._store.update(with_holder(lease, "", _RELEASED_SECONDS))
        except Exception as err:
            logger.warning("%s: could not release the member Lease: %s", self._identity, err)
            return
        self._valid_until = float("-inf")
        self.gate.set_valid_until(self._valid_until)
        logger.info("%s: left %s", self._identity, self._options.name)

    def wake(self) -> None:
        """Something the coordinator waits for may have come (a cache synced the
        shards it should take): act on what it knows at once, instead of at the next
        tick. Call it on the coordinator's event loop."""
        if self._wake is not None:
            self._wake.set()

    def _drained(self, shard: int) -> None:
        """A closed shard's last reconcile ended: act on it at once."""
        if self._handoff.phase(shard) is Phase.DRAINING:
            self.wake()

    def __repr__(self) -> str:
        status = self.status()
        return (
            f"<ShardCoordinator {self._options.name} {self._identity} "
            f"held={len(status.held)}/{self._options.shards} members={len(status.members)}>"
        )
