"""Runnables a Manager starts and stops together (private): see
:class:`~kubereflector.runtime.Runnable`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from .._aio.timeout import within
from ..clock import Clock
from .runnable import Runnable

__all__ = ["Runnables"]

logger = logging.getLogger("kubereflector.runtime")


class Runnables:
    """Runnables started together and stopped together, on the manager's loop; the
    error of one that fails goes to ``failed`` (the manager stops with it)."""

    def __init__(
        self, runnables: list[Runnable], clock: Clock, failed: Callable[[BaseException], None]
    ) -> None:
        self.runnables = runnables
        self._clock = clock
        self._failed = failed
        self._stopping = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> set[asyncio.Task[None]]:
        """Start each runnable in a task of its own; returns the tasks."""
        for runnable in self.runnables:
            task = asyncio.create_task(
                runnable.run(self._stopping), name=f"runnable {type(runnable).__name__}"
            )
            task.add_done_callback(self._ended)
            self._tasks.add(task)
        return set(self._tasks)

    def _ended(self, task: asyncio.Task[None]) -> None:
        err = None if task.cancelled() else task.exception()
        if err is not None:
            logger.error("%s failed: %s", task.get_name(), err, exc_info=err)
            self._failed(err)

    async def stop(self, timeout: float) -> bool:
        """Ask them to stop and wait up to ``timeout`` seconds on the manager's clock;
        returns whether all ended (the rest are left to :meth:`cancel`)."""
        self._stopping.set()
        if not self._tasks:
            return True
        with contextlib.suppress(TimeoutError):
            await within(self._clock, timeout, asyncio.wait(self._tasks))
        return all(task.done() for task in self._tasks)

    async def cancel(self) -> None:
        """Cancel those still running and wait for them."""
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
