"""A deadline on an injectable clock: :func:`within`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from ..clock import Clock

__all__ = ["within"]

_T = TypeVar("_T")


async def within(clock: Clock, seconds: float | None, work: Awaitable[_T]) -> _T:
    """``await work``, but raise ``TimeoutError`` once ``seconds`` of ``clock``
    have passed first (``None``: no limit).

    ``work`` is cancelled, and has finished, before ``TimeoutError`` is raised;
    cancelling the caller cancels it too. Unlike ``asyncio.wait_for`` the time
    is measured on ``clock``, so tests drive it with a ``FakeClock``.
    """
    task = asyncio.ensure_future(work)
    if seconds is None:
        return await task
    timer = asyncio.ensure_future(clock.sleep(seconds))
    timed_out = False
    try:
        await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        timed_out = not task.done()
    finally:
        timer.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
    if timed_out:
        if not task.cancelled():
            task.exception()  # retrieved: what it raised while cancelled is moot
        raise TimeoutError
    return task.result()
