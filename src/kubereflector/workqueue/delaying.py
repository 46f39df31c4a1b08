"""DelayingQueue: a WorkQueue that can add an item later (client-go's ``DelayingInterface``).

``add_after(item, delay)`` keeps the item aside until the queue's clock reaches
``now + delay``, then adds it (with the dedup and processing rules of
:class:`~kubereflector.workqueue.WorkQueue`). Added again after a different
delay before that, the earliest time wins.

The timer: one task per queue that has delayed items moves them into the queue
when they are due, sleeping on the queue's :class:`~kubereflector.Clock` until
the earliest one (so :class:`~kubereflector.testing.FakeClock` drives it in
tests). It runs on the queue's event loop: the loop that was running where the
queue was created, else the loop of the first ``add_after`` that needed it,
else (plain threads, no loop anywhere) a shared background thread's loop. It
ends when nothing is delayed any more and starts again on demand; a get that
has to wait makes sure it runs, so delayed items survive the end of a loop.
Items that are due are also moved in by any ``get``/``len`` that looks.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import threading
from typing import Any, Final

from .._aio.loop_thread import LoopThread
from .._aio.tasks import running_loop
from .._aio.wakeup import ThreadWaiter, Waiters
from ..clock import Clock
from .metrics import MetricsProvider
from .queue import T, WorkQueue

__all__ = ["DelayingQueue"]

logger = logging.getLogger("kubereflector.workqueue")

_background_lock: Final = threading.Lock()
_background: LoopThread | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    """The loop of the shared thread that runs the timers of loop-less queues."""
    global _background
    with _background_lock:
        if _background is None or not _background.is_running():
            _background = LoopThread(name="kubereflector-workqueue-timers")
            _background.start()
        return _background.loop


class DelayingQueue(WorkQueue[T]):
    """A :class:`~kubereflector.workqueue.WorkQueue` with :meth:`add_after`.

    ``clock`` times the delays (and the metrics). Thread-safety as
    :class:`~kubereflector.workqueue.WorkQueue`: ``add_after`` may be called
    from any thread and any loop.
    """

    __slots__ = (
        "_delayed",
        "_delayed_entries",
        "_home",
        "_seq",
        "_timer_loop",
        "_timer_task",
        "_timer_waiters",
    )

    def __init__(
        self,
        *,
        name: str = "",
        metrics_provider: MetricsProvider | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(name=name, metrics_provider=metrics_provider, clock=clock)
        # A heap of [ready_at, seq, item, priority]; an entry is live while
        # _delayed_entries maps its item to it (an earlier add_after replaces it).
        self._delayed: list[list[Any]] = []
        self._delayed_entries: dict[T, list[Any]] = {}
        self._seq = itertools.count()
        self._home = running_loop()
        self._timer_loop: asyncio.AbstractEventLoop | None = None  # set while a timer runs
        self._timer_task: asyncio.Task[None] | None = None
        self._timer_waiters = Waiters()  # the timer's own wakeup, when it waits

    def add_after(self, item: T, delay: float, *, priority: int = 0) -> None:
        """Add ``item`` (with ``priority``) once ``delay`` seconds of the queue's
        clock have passed; at once when ``delay <= 0``.

        If ``item`` is already waiting, the earlier time and the higher priority
        win. Never blocks. Ignored after :meth:`shut_down`. Counts a retry in the
        queue's metrics.
        """
        with self._lock:
            if self._shutting_down:
                return
            if self._metrics is not None:
                self._metrics.retry()
            if delay <= 0:
                self.add(item, priority)
                return
            ready_at = self.clock.now() + delay
            entries = self._delayed_entries
            entry = entries.get(item)
            if entry is not None:
                if priority > entry[3]:
                    entry[3] = priority
                if ready_at >= entry[0]:
                    return
                priority = entry[3]
            entry = [ready_at, next(self._seq), item, priority]
            entries[item] = entry
            heapq.heappush(self._delayed, entry)
            if self._delayed[0] is entry:  # a new earliest time: the timer must know
                if self._timer_waiters:
                    self._timer_waiters.wake()
                else:
                    self._ensure_timer_locked()

    def _promote_locked(self) -> None:
        """Move every delayed item that is due into the queue."""
        delayed = self._delayed
        now = self.clock.now()
        entries = self._delayed_entries
        while delayed and delayed[0][0] <= now:
            entry = heapq.heappop(delayed)
            item = entry[2]
            if entries.get(item) is entry:
                del entries[item]
                self.add(item, entry[3])

    def _ready_locked(self) -> bool:
        if self._delayed:
            self._promote_locked()
            if not self._queued and self._delayed:
                self._ensure_timer_locked()  # whoever waits makes sure the timer runs
        return super()._ready_locked()

    def __len__(self) -> int:
        with self._lock:
            if self._delayed:
                self._promote_locked()
            return len(self._queued)

    def shut_down(self) -> None:
        """As :meth:`WorkQueue.shut_down`; items still waiting for their time are
        dropped (client-go's waiting loop stops too)."""
        with self._lock:
            self._drop_delayed_locked()
        super().shut_down()

    async def shut_down_with_drain(self) -> None:
        """As :meth:`WorkQueue.shut_down_with_drain`; items still waiting for their
        time are dropped."""
        with self._lock:
            self._drop_delayed_locked()
        await super().shut_down_with_drain()

    def _drop_delayed_locked(self) -> None:
        self._delayed.clear()
        self._delayed_entries.clear()
        self._timer_waiters.wake_all()

    # -- the timer ---------------------------------------------------------------------

    def _ensure_timer_locked(self) -> None:
        """Start the timer unless it runs (on a loop that is still open)."""
        if self._timer_loop is not None and not self._timer_loop.is_closed():
            return
        running = running_loop()
        home = self._home
        if home is None or home.is_closed():
            home = self._home = running if running is not None else _background_loop()
        if home is running:
            self._timer_loop = home
            self._timer_task = home.create_task(self._run_timer(), name=self._timer_name())
            return
        try:
            home.call_soon_threadsafe(self._spawn_timer)
        except RuntimeError:  # closed since the check above
            home = self._home = _background_loop()
            home.call_soon_threadsafe(self._spawn_timer)
        self._timer_loop = home

    def _spawn_timer(self) -> None:
        """Start the timer task (on the loop that calls this)."""
        with self._lock:
            loop = asyncio.get_running_loop()
            if self._timer_loop is loop and self._timer_task is None:
                self._timer_task = loop.create_task(self._run_timer(), name=self._timer_name())

    def _timer_name(self) -> str:
        return f"kubereflector workqueue timer {self.name!r}"

    async def _run_timer(self) -> None:
        loop = asyncio.get_running_loop()
        clock = self.clock
        try:
            while True:
                with self._lock:
                    if self._delayed:
                        self._promote_locked()
                    if not self._delayed or self._shutting_down:
                        self._timer_stopped_locked()
                        return
                    delay = self._delayed[0][0] - clock.now()
                    wake: asyncio.Future[None] = loop.create_future()
                    self._timer_waiters.append(wake)
                sleep = loop.create_task(clock.sleep(delay))
                try:
                    await asyncio.wait((sleep, wake), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    sleep.cancel()
                    wake.cancel()
                    with self._lock:
                        if wake in self._timer_waiters:
                            self._timer_waiters.remove(wake)
                if sleep.done() and not sleep.cancelled() and sleep.exception() is not None:
                    raise RuntimeError(f"{clock!r}.sleep() failed") from sleep.exception()
        except asyncio.CancelledError:  # its loop is going away
            with self._lock:
                self._timer_stopped_locked()
                if self._delayed and any(
                    isinstance(w, ThreadWaiter) or w.get_loop() is not loop for w in self._waiters
                ):
                    # Threads or other loops wait for delayed items: time them elsewhere.
                    self._home = _background_loop()
                    self._ensure_timer_locked()
            raise
        except Exception:
            logger.exception(
                "%s: the timer of delayed items failed; the next add_after or get restarts it",
                self._describe(),
            )
            with self._lock:
                self._timer_stopped_locked()

    def _timer_stopped_locked(self) -> None:
        self._timer_loop = None
        self._timer_task = None

    def __repr__(self) -> str:
        with self._lock:
            text = super().__repr__()
            return f"{text[:-1]} delayed={len(self._delayed_entries)}>"
