"""Fan-out of an informer's notifications to its listeners (private).

client-go's ``sharedProcessor``: it keeps the listeners with, for each, whether
it takes part in the current resync; ``distribute`` appends a batch of
notifications to the buffer of every listener (resync updates: of the syncing
ones only), and never waits for a handler. ``should_resync`` is what the
Reflector asks before each periodic resync: it marks the listeners whose
resync is due and moves their next resync on.

Thread-safety: every method may be called from any thread; one lock guards the
listener table (listeners' resync fields included).
"""

from __future__ import annotations

import asyncio
import logging
import threading

from ..clock import Clock
from ._listener import UPDATE, Listener, Notification
from .keys import get_resource_version

__all__ = ["Processor", "determine_resync_period"]

logger = logging.getLogger("kubereflector.shared_informer")


def determine_resync_period(desired: float, check: float) -> float:
    """A handler's effective resync period given the informer's check period.

    ``0`` stays ``0`` (never); with a check period of ``0`` the informer does not
    resync at all; a period shorter than the check period becomes the check period.
    """
    if desired == 0:
        return 0.0
    if check == 0:
        logger.warning(
            "a resync period of %gs has no effect: this informer does not resync", desired
        )
        return 0.0
    if desired < check:
        logger.warning(
            "resync period %gs raised to the informer's resync check period %gs", desired, check
        )
        return check
    return desired


def _is_sync(notification: Notification) -> bool:
    """Whether ``notification`` is an update that did not change the resourceVersion."""
    kind, old, new = notification
    return kind == UPDATE and get_resource_version(old) == get_resource_version(new)


class Processor:
    """The listeners of one informer, and the distribution of notifications to them."""

    __slots__ = ("_clock", "_listeners", "_lock", "_loop", "_started", "_stopped", "_targets")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        # listener -> whether it takes part in the current resync
        self._listeners: dict[Listener, bool] = {}
        # A snapshot of _listeners' items, replaced (under the lock) on every
        # change, so that distribute reads it without the lock or a copy.
        self._targets: tuple[tuple[Listener, bool], ...] = ()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._stopped = False

    @property
    def clock(self) -> Clock:
        return self._clock

    def listeners(self) -> list[Listener]:
        with self._lock:
            return list(self._listeners)

    def add_listener(self, listener: Listener) -> None:
        """Add a listener; its consumer starts now if the processor runs."""
        with self._lock:
            self._listeners[listener] = True
            self._targets = tuple(self._listeners.items())
            if self._started and not self._stopped:
                assert self._loop is not None
                listener.start(self._loop)

    def remove_listener(self, listener: Listener) -> bool:
        """Remove and stop a listener; ``False`` if it was not registered."""
        with self._lock:
            if listener not in self._listeners:
                return False
            del self._listeners[listener]
            self._targets = tuple(self._listeners.items())
        listener.stop()
        return True

    def distribute(
        self, notifications: list[Notification], initial_adds: int, *, bulk: bool = False
    ) -> None:
        """Buffer ``notifications`` (in order; ``initial_adds`` of them are adds of
        the initial list; ``bulk``: those of a whole list or relist, see
        :meth:`Listener.add_batch`) for every listener.

        An update whose resourceVersion did not change (a periodic resync, or a
        relist of an unchanged object) goes only to the listeners taking part in
        the current resync; the versions are compared only when some listener
        does not. The caller serializes distributions (the informer's delta lock,
        which also guards handler joins and removals).
        """
        changes: list[Notification] | None = None
        for listener, syncing in self._targets:
            if syncing:
                listener.add_batch(notifications, initial_adds, bulk=bulk)
                continue
            if changes is None:
                changes = [n for n in notifications if not _is_sync(n)]
            if changes:
                listener.add_batch(changes, initial_adds, bulk=bulk)

    def should_resync(self) -> bool:
        """Mark the listeners whose resync is due; whether there is any."""
        with self._lock:
            now = self._clock.now()
            needed = False
            for listener in self._listeners:
                due = listener.should_resync(now)
                self._listeners[listener] = due
                if due:
                    needed = True
                    listener.determine_next_resync(now)
            self._targets = tuple(self._listeners.items())
            return needed

    def resync_check_period_changed(self, check: float) -> None:
        """Recompute every listener's effective period for a new check period."""
        with self._lock:
            for listener in self._listeners:
                listener.resync_period = determine_resync_period(
                    listener.requested_resync_period, check
                )

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the consumer of every listener on ``loop``."""
        with self._lock:
            self._loop = loop
            self._started = True
            for listener in self._listeners:
                listener.start(loop)

    async def stop(self) -> None:
        """Stop every listener (cancelling coroutine handlers in flight) and wait
        for their consumers to end. Later listeners are not started."""
        with self._lock:
            self._stopped = True
            listeners = list(self._listeners)
        for listener in listeners:
            listener.stop(cancel=True)
        for listener in listeners:
            await listener.wait_stopped()
