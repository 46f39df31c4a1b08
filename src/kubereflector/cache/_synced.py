"""Event-driven waiting for ``has_synced`` (private).

Whatever can turn synced (a Controller, a SharedIndexInformer, a handler
registration) owns, or shares, a :class:`SyncSignal` and calls
:meth:`SyncSignal.notify` whenever its answer may have changed: the last item of
the initial list processed, the last initial notification handled, a stop.
:func:`kubereflector.wait_for_cache_sync` parks one future per wait on the
signals of what it waits for, re-checks every time it is woken, and so never
polls.

Thread-safety: ``notify`` may be called from any thread (a handler's worker
thread finishing the initial list, for one); each waiter is resolved on its own
event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

__all__ = ["SyncSignal"]


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class SyncSignal:
    """Futures to resolve when some ``has_synced`` answer may have changed."""

    __slots__ = ("_lock", "_waiters")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: set[asyncio.Future[None]] = set()

    def subscribe(self, fut: asyncio.Future[None]) -> None:
        """Resolve ``fut`` (on its loop) at the next :meth:`notify`."""
        with self._lock:
            self._waiters.add(fut)

    def unsubscribe(self, fut: asyncio.Future[None]) -> None:
        with self._lock:
            self._waiters.discard(fut)

    def notify(self) -> None:
        """Wake every subscribed future (each is then dropped). Never blocks."""
        with self._lock:
            if not self._waiters:
                return
            waiters = list(self._waiters)
            self._waiters.clear()
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for fut in waiters:
            loop = fut.get_loop()
            if loop is running:
                _resolve(fut)
            else:
                with contextlib.suppress(RuntimeError):  # that loop is closed
                    loop.call_soon_threadsafe(_resolve, fut)
