"""The injectable clock: monotonic time and a sleep on that time.

Everything in kubereflector that waits or reads the time does it through a
:class:`Clock`, so tests drive time with :class:`kubereflector.testing.FakeClock`
instead of sleeping.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "RealClock"]


@runtime_checkable
class Clock(Protocol):
    """Monotonic time in seconds and an awaitable sleep on that time."""

    def now(self) -> float:
        """Seconds on this clock; never goes backwards. Any thread."""

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed on this clock; cancellable."""


class RealClock:
    """The process' monotonic clock and :func:`asyncio.sleep`."""

    __slots__ = ()

    def now(self) -> float:
        """:func:`time.monotonic`."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """:func:`asyncio.sleep`."""
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "RealClock()"
