"""Task helpers (private): the running-loop check, cancel-and-wait, and tasks that
can tell "I am being stopped" from "my callee raised CancelledError", the same on
every supported Python.

A consumer task awaits user coroutines. A ``CancelledError`` coming out of one is
either a stop (someone cancelled the consumer's task) or the coroutine's own
(it awaited a future a third party cancelled): the first must end the consumer,
the second is just a failed call. Python 3.11+ tells them apart with
``Task.cancelling()``; Python 3.10 has no such count, so there :func:`create_task`
makes a task that keeps it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Final

__all__ = ["cancel_and_wait", "cancel_requested", "create_task", "running_loop"]


running_loop: Final[Callable[[], asyncio.AbstractEventLoop | None]] = asyncio._get_running_loop
"""The event loop running in the calling thread, or ``None`` on a thread without one.

asyncio's own C function, bound here once: no exception raised and caught, no
Python frame, so it is fit for hot paths (the handler hand-off calls it per event).
"""


async def cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` (if still running) and wait until it has finished; what it
    returned or raised is discarded (and marked retrieved).

    Unlike ``task.cancel(); await task`` this never swallows a cancellation of the
    caller itself: if the caller is cancelled while waiting, ``CancelledError``
    propagates to it (``task`` has been asked to cancel all the same).
    """
    if not task.done():
        task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()


if sys.version_info >= (3, 11):

    def create_task(
        loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None], *, name: str
    ) -> asyncio.Task[None]:
        """``loop.create_task(coro)``; call on ``loop``'s thread."""
        return loop.create_task(coro, name=name)

    def cancel_requested(task: asyncio.Task[Any] | None) -> bool:
        """Whether ``task`` (made by :func:`create_task`) has been asked to cancel."""
        return task is not None and task.cancelling() > 0

else:

    class _CountingTask(asyncio.Task):  # type: ignore[type-arg]
        """Python 3.10: counts ``cancel()`` calls, as 3.11's ``cancelling()`` does
        (3.10 has no ``uncancel()``, so the count never goes down)."""

        _cancel_requests = 0

        def cancel(self, msg: Any = None) -> bool:
            self._cancel_requests += 1
            return super().cancel(msg)

    def create_task(
        loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None], *, name: str
    ) -> asyncio.Task[None]:
        """A task of ``coro`` on ``loop`` that counts cancel requests; call on
        ``loop``'s thread."""
        return _CountingTask(coro, loop=loop, name=name)

    def cancel_requested(task: asyncio.Task[Any] | None) -> bool:
        """Whether ``task`` (made by :func:`create_task`) has been asked to cancel."""
        return task is not None and getattr(task, "_cancel_requests", 0) > 0
