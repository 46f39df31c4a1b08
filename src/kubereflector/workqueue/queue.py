"""WorkQueue: client-go's ``util/workqueue`` queue, with controller-runtime's priorities.

Handlers add keys; workers get a key, work on it and call ``done``. The queue
guarantees what makes a controller correct:

* an item that is queued is not queued twice: bursts of adds of one key
  collapse into one piece of work (dedup);
* an item is never handed to two workers at once: an item added again while a
  worker processes it is queued again only once that worker calls ``done``
  (client-go's *dirty* and *processing* sets);
* items come out in the order of their first add, higher priorities first
  (controller-runtime's priority queue): first-add order within a priority, and
  adding a queued item with a higher priority moves it to the end of that
  higher priority's line.

Items are any hashable values; controllers use ``namespace/name`` keys or
``(namespace, name)`` requests.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from .._aio.wakeup import (
    QueueClosed,
    QueueEmpty,
    Waiters,
    pop_blocking,
    pop_blocking_thread,
    pop_nowait,
)
from .._compiled import caused_by, mypyc_attr
from ..clock import Clock, RealClock
from .metrics import MetricsProvider, _queue_metrics

__all__ = ["NotProcessingError", "QueueEmpty", "QueueShutDown", "WorkQueue"]

T = TypeVar("T", bound=Hashable)


@mypyc_attr(native_class=False)
class QueueShutDown(QueueClosed):
    """The work queue was shut down and holds nothing more to hand out.

    A :class:`~kubereflector.QueueClosed`, so code that handles the FIFOs'
    closing handles this too.
    """


@mypyc_attr(native_class=False)
class NotProcessingError(ValueError):
    """``done(item)`` for an item that no worker was handed (or that is done already)."""


def _nothing(_: None) -> None:
    return None


@mypyc_attr(allow_interpreted_subclasses=True)
class WorkQueue(Generic[T]):
    """client-go's work queue (``TypedInterface``) with priorities.

    * ``add(item, priority=0)`` queues ``item`` unless it is queued already (then
      a higher ``priority`` raises it) or being processed (then it is queued
      again when the worker calls ``done``). Ignored once the queue shuts down.
    * ``await get()`` / ``get_nowait()`` / ``get_blocking(timeout)`` hand out the
      next item and mark it as being processed; the worker must call
      ``done(item)`` when it has finished with it, whatever happened.
    * ``shut_down()``: adds are ignored from now on; what is queued is still
      handed out, then every get raises :class:`QueueShutDown`.
      ``await shut_down_with_drain()`` also waits until every queued item has
      been handed out and is done.

    Thread-safety: every method may be called from any thread and from any event
    loop. ``await get()`` waits without polling and without blocking its loop,
    and is woken by an ``add`` from any thread; cancelling it takes nothing.
    ``get_blocking`` is for plain threads.

    ``name`` and ``metrics_provider`` select the queue's metrics (see
    :mod:`kubereflector.workqueue.metrics`: none without a name); ``clock``
    (default: the real monotonic clock) times them.
    """

    __slots__ = (
        "_buckets",
        "_default",
        "_drain_waiters",
        "_draining",
        "_lock",
        "_metrics",
        "_order",
        "_processing",
        "_queued",
        "_readd",
        "_shutting_down",
        "_stale",
        "_waiters",
        "clock",
        "name",
    )

    def __init__(
        self,
        *,
        name: str = "",
        metrics_provider: MetricsProvider | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self.clock: Clock = clock if clock is not None else RealClock()
        # The hot methods (add, get, done) take the lock with acquire() and
        # try/finally release(): on CPython 3.11 a `with` statement costs twice as
        # much (it looks up and calls __enter__/__exit__ with parsed arguments).
        self._lock = threading.RLock()
        self._waiters = Waiters()
        self._drain_waiters = Waiters()
        # What is queued: item -> its priority. Each priority has a line (a deque)
        # in which an item raised to a higher priority leaves a stale entry
        # behind, counted in _stale and skipped when reached.
        self._queued: dict[T, int] = {}
        self._default: deque[T] = deque()
        self._buckets: dict[int, deque[T]] = {0: self._default}
        self._order: list[tuple[int, deque[T]]] = [(0, self._default)]  # highest first
        self._stale: dict[tuple[T, int], int] = {}
        self._processing: set[T] = set()
        self._readd: dict[T, int] = {}  # added again while processing -> priority
        self._shutting_down = False
        self._draining = False
        self._metrics = _queue_metrics(metrics_provider, name, self.clock.now)

    # -- adding ------------------------------------------------------------------------

    def add(self, item: T, priority: int = 0) -> None:
        """Mark ``item`` as needing processing, with ``priority`` (higher first).

        Never blocks. Ignored after :meth:`shut_down`. Raises :class:`TypeError`
        if ``item`` is not hashable. (``priority`` is not keyword-only, unlike
        ``add_after``'s: a keyword-only argument would cost this hot method a
        third of its time on CPython 3.11.)
        """
        current = self._queued.get(item)
        if current is not None and current >= priority:
            # Queued already, at this priority or a higher one: nothing to do. No
            # lock needed: the add takes effect (as a no-op) at this read.
            return
        lock = self._lock
        lock.acquire()
        try:
            if self._shutting_down:
                return
            queued = self._queued
            if item in queued or item in self._processing:
                self._add_again_locked(item, priority)
                return
            queued[item] = priority
            if priority == 0:
                self._default.append(item)
            else:
                self._line(priority).append(item)
            if self._metrics is not None:
                self._metrics.add(item)
            if self._waiters:
                self._waiters.wake()
        finally:
            lock.release()

    def _add_again_locked(self, item: T, priority: int) -> None:
        """Add an item that is queued or being processed."""
        current = self._queued.get(item)
        if current is not None:
            if priority > current:  # raise it: to the end of the higher line
                stale = (item, current)
                self._stale[stale] = self._stale.get(stale, 0) + 1
                self._queued[item] = priority
                self._line(priority).append(item)
            return
        again = self._readd.get(item)
        if again is None:
            self._readd[item] = priority
            if self._metrics is not None:
                self._metrics.add(item)
        elif priority > again:
            self._readd[item] = priority

    def _line(self, priority: int) -> deque[T]:
        line = self._buckets.get(priority)
        if line is None:
            line = self._buckets[priority] = deque()
            order = self._order
            # _order is sorted by descending priority.
            at = bisect.bisect_left([-p for p, _ in order], -priority)
            order.insert(at, (priority, line))
        return line

    # -- getting -----------------------------------------------------------------------

    def _ready_locked(self) -> bool:
        """Whether an item can be handed out; raises QueueShutDown when none ever will."""
        if self._queued:
            return True
        if self._shutting_down:
            raise QueueShutDown(f"{self._describe()} is shut down")
        return False

    def _get_locked(self, _: None = None) -> T:
        """Hand out the next item (there is one: ``_queued`` is not empty)."""
        if self._stale or len(self._order) > 1:
            item = self._next_by_priority_locked()
        else:  # only priority 0, nothing raised: the default line is in order
            item = self._default.popleft()
        del self._queued[item]
        self._processing.add(item)
        if self._metrics is not None:
            self._metrics.get(item)
        return item

    def _next_by_priority_locked(self) -> T:
        for priority, line in self._order:
            while line:
                item = line.popleft()
                if priority != 0 and not line:
                    self._drop_line(priority)
                if not (self._stale and self._drop_stale(item, priority)):
                    return item
        raise AssertionError("_get_locked called with nothing queued")  # pragma: no cover

    def _drop_stale(self, item: T, priority: int) -> bool:
        """Whether this entry of ``item`` in the line of ``priority`` is stale.

        An item raised out of a line leaves its entry there; any later entry of
        the same item in that line comes after it, so the first entries reached
        are the stale ones.
        """
        key = (item, priority)
        count = self._stale.get(key)
        if count is None:
            return False
        if count == 1:
            del self._stale[key]
        else:
            self._stale[key] = count - 1
        return True

    def _drop_line(self, priority: int) -> None:
        del self._buckets[priority]
        self._order = [(p, line) for p, line in self._order if p != priority]

    async def get(self) -> T:
        """Wait for the next item and hand it out (mark it as being processed).

        Raises :class:`QueueShutDown` once the queue is shut down and nothing is
        queued. Waiting does not block the event loop; cancelling it takes nothing.
        """
        lock = self._lock
        lock.acquire()
        try:
            if self._queued:  # no need to wait: spare pop_blocking's coroutine
                if self._stale or len(self._order) > 1:
                    return self._get_locked()
                # _get_locked's plain case, inlined (one call less per item):
                item = self._default.popleft()
                del self._queued[item]
                self._processing.add(item)
                if self._metrics is not None:
                    self._metrics.get(item)
                return item
        finally:
            lock.release()
        return await pop_blocking(
            self._lock, self._waiters, self._ready_locked, self._get_locked, None
        )

    def _get_with_priority_locked(self, _: None = None) -> tuple[T, int]:
        """:meth:`_get_locked`, with the priority the item was queued at."""
        if self._stale or len(self._order) > 1:
            item = self._next_by_priority_locked()
        else:
            item = self._default.popleft()
        priority = self._queued.pop(item)
        self._processing.add(item)
        if self._metrics is not None:
            self._metrics.get(item)
        return item, priority

    async def get_with_priority(self) -> tuple[T, int]:
        """:meth:`get`, and the priority the item was queued at (controller-runtime's
        ``GetWithPriority``): a worker that queues the item again keeps it there."""
        lock = self._lock
        lock.acquire()
        try:
            if self._queued:
                return self._get_with_priority_locked()
        finally:
            lock.release()
        return await pop_blocking(
            self._lock, self._waiters, self._ready_locked, self._get_with_priority_locked, None
        )

    def get_nowait(self) -> T:
        """The next item if one is queued (marked as being processed), else raise
        :class:`QueueEmpty`; :class:`QueueShutDown` once shut down and empty."""
        return pop_nowait(self._lock, self._ready_locked, self._get_locked, None)

    def get_blocking(self, timeout: float | None = None) -> T:
        """Block this thread until an item can be handed out, and hand it out.

        For plain threads: raises :class:`RuntimeError` on a thread that runs an
        event loop (use ``await get()`` there). Raises :class:`QueueEmpty` when
        ``timeout`` seconds (wall clock; ``None``: no limit) pass first, and
        :class:`QueueShutDown` once the queue is shut down and empty.
        """
        return pop_blocking_thread(
            self._lock, self._waiters, self._ready_locked, self._get_locked, None, timeout
        )

    def done(self, item: T) -> None:
        """Mark ``item`` as processed: a worker calls it once for every item it got.

        If ``item`` was added again meanwhile, it is queued again now. Raises
        :class:`NotProcessingError` if ``item`` is not being processed.
        """
        lock = self._lock
        lock.acquire()
        try:
            try:
                self._processing.remove(item)
            except KeyError:
                raise caused_by(  # noqa: B904 (the cause is set: mypyc drops `from`)
                    NotProcessingError(
                        f"done({item!r}) on {self._describe()}: that item is not being processed "
                        "(done twice, or never handed out)"
                    ),
                    None,
                )
            if self._metrics is not None:
                self._metrics.done(item)
            if self._readd:
                priority = self._readd.pop(item, None)
                if priority is not None:
                    self._queued[item] = priority
                    self._line(priority).append(item)
                    if self._waiters:
                        self._waiters.wake()
                    return
            if self._drain_waiters and not self._processing and not self._queued:
                self._drain_waiters.wake_all()
        finally:
            lock.release()

    def __len__(self) -> int:
        """How many items are queued (not counting those being processed)."""
        with self._lock:
            return len(self._queued)

    # -- shutting down -----------------------------------------------------------------

    def shut_down(self) -> None:
        """Ignore adds from now on; workers get what is still queued, then
        :class:`QueueShutDown`. Also ends a :meth:`shut_down_with_drain` that
        waits. Idempotent."""
        with self._lock:
            self._shutting_down = True
            self._draining = False
            self._waiters.wake_all()
            self._drain_waiters.wake_all()

    async def shut_down_with_drain(self) -> None:
        """:meth:`shut_down`, then wait until every queued item has been handed out
        and every item handed out is done (workers must call ``done``, or this
        waits for ever). A :meth:`shut_down` meanwhile ends the wait. From a plain
        thread: ``asyncio.run(queue.shut_down_with_drain())``."""
        with self._lock:
            self._shutting_down = True
            self._draining = True
            self._waiters.wake_all()
        await pop_blocking(self._lock, self._drain_waiters, self._drained_locked, _nothing, None)

    def _drained_locked(self) -> bool:
        return not self._draining or (not self._processing and not self._queued)

    def shutting_down(self) -> bool:
        """Whether :meth:`shut_down` (or :meth:`shut_down_with_drain`) was called."""
        return self._shutting_down

    # -- metrics -----------------------------------------------------------------------

    def update_unfinished_work(self) -> None:
        """Refresh the ``unfinished_work`` and ``longest_running_processor`` gauges
        (an exporter calls this before a scrape)."""
        with self._lock:
            if self._metrics is not None:
                self._metrics.update_unfinished_work()

    def _describe(self) -> str:
        return f"work queue {self.name!r}" if self.name else "the work queue"

    def __repr__(self) -> str:
        with self._lock:
            state = " shutting down" if self._shutting_down else ""
            return (
                f"<{type(self).__name__} {self.name!r} queued={len(self._queued)} "
                f"processing={len(self._processing)}{state}>"
            )
