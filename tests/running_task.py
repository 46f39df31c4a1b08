"""Running a Reflector, a Controller or an informer for the length of an ``async with``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Protocol

from kubereflector.testing import settle


class Runnable(Protocol):
    async def run(self) -> None: ...


@contextlib.asynccontextmanager
async def running(runner: Runnable) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``runner.run()`` as a task on the running loop and give the task, once the
    loop has settled (its first list from an in-memory source is done); on leaving,
    cancel the task and wait for it to end. An exception the run ended with other
    than the cancellation is raised there."""
    task = asyncio.create_task(runner.run())
    await settle()
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
