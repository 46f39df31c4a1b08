"""Tasks that can tell "I am being stopped" from "my callee raised CancelledError",
the same on every supported Python (private).

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
from collections.abc import Coroutine
from typing import Any

__all__ = ["cancel_requested", "create_task"]

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
