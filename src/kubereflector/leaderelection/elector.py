"""LeaderElector: one leader among many candidates, through a lock on the API server.

client-go's ``tools/leaderelection``, behaviour for behaviour:

* **Campaign.** A candidate tries to take the lock at once, then every
  ``retry_period`` seconds plus up to 120 % jitter, until it holds it. It takes
  a lock that has no holder, or whose record it has watched stay *unchanged*
  for ``leaseDurationSeconds`` (the holder's setting) of its own clock.
* **Expiry by observation.** A candidate never compares the timestamps written
  in the record with its own clock: it notes, on its own monotonic clock, when
  it last saw the record change, and judges expiry from that. Clock skew
  between nodes therefore does not matter (a skew *rate* does: see client-go's
  documentation for choosing the durations).
* **Renewal.** The leader renews every ``retry_period`` seconds. A renewal may
  take several tries, each ``retry_period`` apart; if none succeeds within
  ``renew_deadline`` seconds the leader gives up: it stops leading (its
  ``on_started_leading`` work is cancelled), and :meth:`LeaderElector.run`
  returns. ``renew_deadline`` < ``lease_duration``, so a leader stops before
  any other candidate can take over.
* **Slow answers.** Unlike client-go, a candidate counts a write of its own
  (taking or renewing the lock) from when it sent it, not from when the answer
  came, and gives up leading at the latest one retry period before that lease
  can expire: the server may have applied the write at once, and the others
  seen it then, so an answer held up in the network (a partition that heals)
  cannot stretch a leadership into the next leader's. A late "you have it" is
  not believed either (see below). With prompt answers the timing is client-go's.
* **Each request bounded.** Every request for the lock (to take, renew or release
  it) is given up after ``renew_deadline / 2`` seconds (at least 1), as
  client-go's leader-election client does: a renewal stuck on a dead connection
  is retried, on a new one, while the deadline leaves room.
* **Optimistic concurrency.** Every write carries the resourceVersion last
  read; of two candidates racing for an expired lock one gets a 409 Conflict
  and goes back to waiting.
* **Release.** With ``release_on_cancel``, a leader that stops (cancelled, or
  failed renewal) first waits for its ``on_started_leading`` work to end, then
  writes the record with no holder and a 1 s lease, so another candidate takes
  over within one of its retry periods instead of a whole lease duration.

Everything waits through the injectable :class:`~kubereflector.Clock`, so tests
drive elections with a :class:`~kubereflector.testing.FakeClock`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import Any, Final, Protocol, TypeVar

from .._aio.calls import is_coroutine_callable
from ..clock import Clock, RealClock
from ..errors import ApiError, NotFoundError
from .lock import LeaderElectionRecord, ResourceLock, micro_time

__all__ = [
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_RENEW_DEADLINE",
    "DEFAULT_RETRY_PERIOD",
    "JITTER_FACTOR",
    "LeaderElector",
    "LeaderMetrics",
    "default_identity",
]

logger = logging.getLogger("kubereflector.leaderelection")

T = TypeVar("T")

JITTER_FACTOR: Final = 1.2
"""A campaigning candidate waits ``retry_period * (1 + JITTER_FACTOR * U[0, 1))``
between tries (client-go's ``JitterFactor``)."""
DEFAULT_LEASE_DURATION: Final = 15.0
"""Seconds a leader's Lease is valid without renewal before others may take it (client-go's
15)."""
DEFAULT_RENEW_DEADLINE: Final = 10.0
"""Seconds the leader keeps retrying a renewal before it gives up leading (client-go's 10)."""
DEFAULT_RETRY_PERIOD: Final = 2.0
"""Seconds between two attempts to acquire or renew (client-go's 2), jittered."""

_RELEASED_LEASE_SECONDS: Final = 1


def default_identity() -> str:
    """``hostname_uuid``: unique per process, readable in ``kubectl get lease``
    (controller-runtime's default). ``POD_NAME`` replaces the hostname when set."""
    host = os.environ.get("POD_NAME") or socket.gethostname() or "kubereflector"
    return f"{host}_{uuid.uuid4()}"


class LeaderMetrics(Protocol):
    """Where an elector reports leadership (client-go's ``leaderMetricsAdapter``):
    ``on(name)`` when it starts leading, ``off(name)`` when it stops (and once at
    construction), ``slowpath_exercised(name)`` when a renewal had to re-read the
    lock. :class:`kubereflector.metrics.Metrics` implements it."""

    def on(self, name: str) -> None:
        """The elector called ``name`` now leads."""

    def off(self, name: str) -> None:
        """The elector called ``name`` does not lead (also reported once at its construction)."""

    def slowpath_exercised(self, name: str) -> None:
        """A renewal by the elector called ``name`` had to re-read the record first."""


class _NoMetrics:
    def on(self, name: str) -> None:
        pass

    def off(self, name: str) -> None:
        pass

    def slowpath_exercised(self, name: str) -> None:
        pass


class LeaderElector:
    """Campaigns for ``lock`` and leads while it holds it (client-go's ``LeaderElector``).

    Durations are seconds: ``lease_duration`` (default 15; at least 1, a whole
    number of seconds is written to the record) > ``renew_deadline`` (10) >
    ``JITTER_FACTOR * retry_period`` (2); anything else raises ``ValueError``.

    Callbacks (each a plain function or a coroutine function; exceptions are
    logged, never raised into the election):

    * ``on_started_leading()``: called when this candidate becomes leader. A
      coroutine function runs as a task that is cancelled (and awaited) as soon
      as leadership ends; a plain function is called on the event loop and must
      return quickly (start your work from it).
    * ``on_stopped_leading()``: called (and awaited) when :meth:`run` ends,
      whether or not this candidate led (as client-go).
    * ``on_new_leader(identity)``: called when a leader other than the last one
      reported is observed, this candidate included.

    ``name`` labels the metrics (default: the lock's ``namespace/name``);
    ``metrics`` receives them (default: none). Use one elector from one event loop.
    """

    def __init__(
        self,
        lock: ResourceLock,
        *,
        lease_duration: float = DEFAULT_LEASE_DURATION,
        renew_deadline: float = DEFAULT_RENEW_DEADLINE,
        retry_period: float = DEFAULT_RETRY_PERIOD,
        release_on_cancel: bool = False,
        on_started_leading: Callable[[], object] | None = None,
        on_stopped_leading: Callable[[], object] | None = None,
        on_new_leader: Callable[[str], object] | None = None,
        name: str | None = None,
        clock: Clock | None = None,
        metrics: LeaderMetrics | None = None,
        random: Callable[[], float] = random.random,
    ) -> None:
        if not isinstance(lock, ResourceLock):
            raise TypeError(f"lock must be a ResourceLock, not {type(lock).__name__}")
        if not lock.identity:
            raise ValueError("the lock's identity is empty")
        if lease_duration < 1:
            raise ValueError(f"lease_duration must be at least 1 second (got {lease_duration})")
        if renew_deadline <= 0 or retry_period <= 0:
            raise ValueError(
                f"renew_deadline and retry_period must be > 0 "
                f"(got {renew_deadline} and {retry_period})"
            )
        if lease_duration <= renew_deadline:
            raise ValueError(
                f"lease_duration ({lease_duration}) must be greater than "
                f"renew_deadline ({renew_deadline})"
            )
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError(
                f"renew_deadline ({renew_deadline}) must be greater than "
                f"retry_period * {JITTER_FACTOR} ({retry_period * JITTER_FACTOR})"
            )
        for label, fn in (
            ("on_started_leading", on_started_leading),
            ("on_stopped_leading", on_stopped_leading),
            ("on_new_leader", on_new_leader),
        ):
            if fn is not None and not callable(fn):
                raise TypeError(f"{label} must be callable")
        self._lock = lock
        self._lease_duration = float(lease_duration)
        self._renew_deadline = float(renew_deadline)
        self._retry_period = float(retry_period)
        # Each request for the lock is bounded as client-go's leader-election
        # client is (NewFromKubeconfig: renewDeadline / 2, at least 1 s): one stuck
        # on a dead connection is given up while the deadline leaves room to retry.
        self._try_timeout = max(self._renew_deadline / 2, 1.0)
        self._release_on_cancel = release_on_cancel
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._name = name or lock.describe()
        self._clock: Clock = clock if clock is not None else RealClock()
        self._metrics: LeaderMetrics = metrics if metrics is not None else _NoMetrics()
        self._random = random
        self._observed = LeaderElectionRecord()
        self._observed_raw: LeaderElectionRecord | None = None
        self._observed_time = self._clock.now()
        self._reported_leader = ""
        self._running = False
        self._background: set[asyncio.Task[Any]] = set()
        self._metrics.off(self._name)

    # -- state ------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        """This candidate's identity (the lock's), written to the record while it leads."""
        return self._lock.identity

    @property
    def name(self) -> str:
        """The election's name in logs and metrics (default: the lock's ``namespace/name``)."""
        return self._name

    @property
    def lease_duration(self) -> float:
        """Seconds a record is valid without renewal (see the class documentation)."""
        return self._lease_duration

    @property
    def renew_deadline(self) -> float:
        """Seconds the leader retries a renewal before it stops leading."""
        return self._renew_deadline

    @property
    def retry_period(self) -> float:
        """Seconds between attempts to acquire or renew, before jitter."""
        return self._retry_period

    def get_leader(self) -> str:
        """The identity of the last observed leader (``""``: none observed yet)."""
        return self._observed.holder_identity

    def is_leader(self) -> bool:
        """Whether the last observed record names this candidate as holder."""
        return self._observed.holder_identity == self._lock.identity

    def check(self, max_tolerable_expired_lease: float = 0.0) -> bool:
        """Health (client-go's ``Check``): ``False`` when this candidate believes it
        leads but has not renewed for longer than the lease duration plus
        ``max_tolerable_expired_lease`` seconds (it should have stopped leading:
        something is stuck). A candidate that does not lead is healthy."""
        if not self.is_leader():
            return True
        overdue = self._clock.now() - self._observed_time
        return overdue <= self._lease_duration + max_tolerable_expired_lease

    # -- running ----------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign until this candidate leads, then lead until a renewal fails.

        Returns once leadership is lost (after the leading work was cancelled,
        the lock released if ``release_on_cancel``, and ``on_stopped_leading``
        called). Cancelling it stops campaigning or leading the same way and
        raises ``CancelledError``. Lock errors are logged and retried, never
        raised. Raises ``RuntimeError`` if the elector is already running.
        """
        if self._running:
            raise RuntimeError(f"the leader elector of {self._name} is already running")
        self._running = True
        led = False
        leading: asyncio.Task[Any] | None = None
        try:
            await self._acquire()
            led = True
            leading = self._start_leading()
            await self._renew()
        finally:
            try:
                if leading is not None:
                    # The guarded work ends before the lock can be released.
                    leading.cancel()
                    await asyncio.wait({leading})
                if self._release_on_cancel:
                    await self._release()
            finally:
                if led:
                    self._metrics.off(self._name)
                self._running = False
                await self._call("on_stopped_leading", self._on_stopped_leading)

    async def _acquire(self) -> None:
        desc = self._lock.describe()
        logger.info("%s: attempting to acquire leader lease %s", self.identity, desc)
        while True:
            # Bounded as a renewal's are: an answer that comes later is not trusted.
            attempt = self._try_acquire_or_renew()
            succeeded = bool(await self._within(self._try_timeout, attempt))
            self._maybe_report_transition()
            if succeeded:
                self._metrics.on(self._name)
                logger.info("%s: successfully acquired lease %s", self.identity, desc)
                return
            logger.debug("%s: failed to acquire lease %s", self.identity, desc)
            jitter = 1.0 + JITTER_FACTOR * self._random()
            await self._clock.sleep(self._retry_period * jitter)

    def _start_leading(self) -> asyncio.Task[Any] | None:
        fn = self._on_started_leading
        if fn is None:
            return None
        if is_coroutine_callable(fn):
            return asyncio.ensure_future(self._guarded("on_started_leading", fn()))  # type: ignore[arg-type]
        self._call_plain("on_started_leading", fn)
        return None

    async def _renew(self) -> None:
        """Renew every retry period; return when a renewal missed the deadline."""
        desc = self._lock.describe()
        while True:
            # client-go's deadline, but never past one retry period before the
            # lease we last wrote may expire in the others' eyes (counted from
            # when that write was sent): a renewal whose answer was slow cannot
            # stretch this leadership into another candidate's.
            deadline = min(
                self._clock.now() + self._renew_deadline,
                self._observed_time + self._lease_duration - self._retry_period,
            )
            renewed = False
            while not renewed:
                remaining = deadline - self._clock.now()
                if remaining <= 0:
                    break
                attempt = self._try_acquire_or_renew()
                renewed = bool(await self._within(min(remaining, self._try_timeout), attempt))
                if not renewed:
                    remaining = deadline - self._clock.now()
                    if remaining <= 0:
                        break
                    await self._clock.sleep(min(self._retry_period, remaining))
            self._maybe_report_transition()
            if not renewed:
                self._metrics.off(self._name)
                logger.warning(
                    "%s: failed to renew lease %s within %gs: leadership lost",
                    self.identity,
                    desc,
                    self._renew_deadline,
                )
                return
            logger.debug("%s: renewed lease %s", self.identity, desc)
            await self._clock.sleep(self._retry_period)

    async def _try_acquire_or_renew(self) -> bool:
        """One try (client-go's ``tryAcquireOrRenew``): True if this candidate holds
        the lock afterwards."""
        lock = self._lock
        # A write of ours counts from when it was sent, not from when its answer
        # came: the server may have applied it at once and others may have seen
        # it then, however long the answer took (see _renew).
        sent = self._clock.now()
        now = micro_time()
        record = LeaderElectionRecord(
            holder_identity=lock.identity,
            lease_duration_seconds=int(self._lease_duration),
            acquire_time=now,
            renew_time=now,
        )
        # 1. The leader's fast path: update, assuming the record is still ours.
        if self.is_leader() and self._lease_valid():
            old = self._observed
            fast = replace(
                record, acquire_time=old.acquire_time, leader_transitions=old.leader_transitions
            )
            try:
                await lock.update(fast)
            except Exception as err:
                logger.info(
                    "%s: failed to update lock %s optimistically (%s); falling back to "
                    "the slow path",
                    lock.identity,
                    lock.describe(),
                    err,
                )
            else:
                self._set_observed(fast, at=sent)
                return True
        # 2. Read the record, or create it.
        try:
            old = await lock.get()
        except NotFoundError:
            try:
                await lock.create(record)
            except Exception as err:
                if isinstance(err, ApiError) and err.reason == "AlreadyExists":
                    # Candidates starting together: another one created it first (a
                    # lost race, like a failed update); the next try reads it.
                    logger.info(
                        "%s: lock %s was created by another candidate first",
                        lock.identity,
                        lock.describe(),
                    )
                else:
                    logger.error(
                        "%s: could not create lock %s: %s", lock.identity, lock.describe(), err
                    )
                return False
            self._set_observed(record, at=sent)
            return True
        except Exception as err:
            logger.error("%s: could not read lock %s: %s", lock.identity, lock.describe(), err)
            return False
        # 3. Note when the record last changed; leave a valid lease to its holder.
        if old != self._observed_raw:
            self._set_observed(old)
            self._observed_raw = old
        if old.holder_identity and self._lease_valid() and not self.is_leader():
            logger.debug(
                "%s: lock %s is held by %s and has not expired",
                lock.identity,
                lock.describe(),
                old.holder_identity,
            )
            return False
        # 4. Take it (or renew it) with the transitions carried over.
        if self.is_leader():
            record = replace(
                record, acquire_time=old.acquire_time, leader_transitions=old.leader_transitions
            )
            self._metrics.slowpath_exercised(self._name)
        else:
            record = replace(record, leader_transitions=old.leader_transitions + 1)
        try:
            await lock.update(record)
        except Exception as err:
            logger.info("%s: failed to update lock %s: %s", lock.identity, lock.describe(), err)
            return False
        self._set_observed(record, at=sent)
        return True

    async def _release(self) -> None:
        """Give the lock up if this candidate holds it (client-go's ``release``)."""
        if not self.is_leader():
            return
        now = micro_time()
        record = LeaderElectionRecord(
            holder_identity="",
            lease_duration_seconds=_RELEASED_LEASE_SECONDS,
            acquire_time=now,
            renew_time=now,
            leader_transitions=self._observed.leader_transitions,
        )
        try:
            done = await self._within(self._try_timeout, self._update(record))
        except Exception as err:
            logger.error(
                "%s: failed to release lock %s: %s", self.identity, self._lock.describe(), err
            )
            return
        if done is None:
            logger.error(
                "%s: releasing lock %s took longer than %gs; gave up",
                self.identity,
                self._lock.describe(),
                self._try_timeout,
            )
            return
        self._set_observed(record)
        logger.info("%s: released lock %s", self.identity, self._lock.describe())

    async def _update(self, record: LeaderElectionRecord) -> bool:
        await self._lock.update(record)
        return True

    # -- helpers ----------------------------------------------------------------------

    def _lease_valid(self) -> bool:
        duration = self._observed.lease_duration_seconds
        return self._observed_time + duration > self._clock.now()

    def _set_observed(self, record: LeaderElectionRecord, at: float | None = None) -> None:
        """Note ``record`` as observed ``at`` (default: now)."""
        self._observed = record
        self._observed_time = self._clock.now() if at is None else at

    def _maybe_report_transition(self) -> None:
        holder = self._observed.holder_identity
        if not holder or holder == self._reported_leader:
            return
        self._reported_leader = holder
        if self._on_new_leader is not None:
            self._call_plain("on_new_leader", self._on_new_leader, holder)

    async def _within(self, seconds: float, coro: Coroutine[Any, Any, T]) -> T | None:
        """``coro``'s result, or ``None`` if ``seconds`` of the clock pass first
        (``coro`` is then cancelled)."""
        work = asyncio.ensure_future(coro)
        timer = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not work.done():
                work.cancel()
            await asyncio.wait({work, timer})
        if work.cancelled():
            return None
        return work.result()

    def _call_plain(self, label: str, fn: Callable[..., object], *args: Any) -> None:
        try:
            result = fn(*args)
        except Exception:
            logger.exception("%s: %s failed", self._name, label)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(self._guarded(label, result))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _call(self, label: str, fn: Callable[[], object] | None) -> None:
        if fn is None:
            return
        try:
            result = fn()
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("%s: %s failed", self._name, label)

    async def _guarded(self, label: str, awaitable: Awaitable[Any]) -> None:
        try:
            await awaitable
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("%s: %s failed", self._name, label)

    def __repr__(self) -> str:
        state = "leading" if self.is_leader() else "following"
        return f"<LeaderElector {self._name} identity={self.identity!r} {state}>"
