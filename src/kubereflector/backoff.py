"""Exponential backoff with jitter, as the Reflector waits between retries."""

from __future__ import annotations

import random
from collections.abc import Callable

from .clock import Clock, RealClock

__all__ = ["Backoff"]


class Backoff:
    """Exponential backoff with jitter and reset, as client-go's Reflector uses.

    The n-th consecutive wait has a base of ``initial * factor**(n-1)``, capped
    at ``cap``, and lasts ``base * (1 + jitter * U[0, 1))``: with the defaults
    (0.8 s, x2, 30 s, jitter 1.0) that is [0.8, 1.6) s, then [1.6, 3.2) s, ...
    up to [30, 60) s. When more than ``reset_after`` seconds passed since the
    previous wait began, the base starts over at ``initial`` (the server has been
    healthy that long). Not thread-safe: one Backoff belongs to one Reflector.
    """

    __slots__ = (
        "_base",
        "_last_start",
        "cap",
        "clock",
        "factor",
        "initial",
        "jitter",
        "random",
        "reset_after",
    )

    def __init__(
        self,
        initial: float = 0.8,
        factor: float = 2.0,
        cap: float = 30.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        *,
        clock: Clock | None = None,
        random: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or factor < 1 or cap < initial or jitter < 0 or reset_after <= 0:
            raise ValueError(
                "backoff needs initial > 0, factor >= 1, cap >= initial, jitter >= 0, "
                f"reset_after > 0 (got initial={initial}, factor={factor}, cap={cap}, "
                f"jitter={jitter}, reset_after={reset_after})"
            )
        self.initial = initial
        self.factor = factor
        self.cap = cap
        self.jitter = jitter
        self.reset_after = reset_after
        self.clock: Clock = clock if clock is not None else RealClock()
        self.random = random
        self._base: float | None = None
        self._last_start: float | None = None

    def next_delay(self) -> float:
        """The next wait in seconds; records that a wait starts now."""
        now = self.clock.now()
        if (
            self._base is None
            or self._last_start is None
            or now - self._last_start > self.reset_after
        ):
            base = self.initial
        else:
            base = min(self._base * self.factor, self.cap)
        self._base = base
        self._last_start = now
        return base * (1.0 + self.jitter * self.random())

    async def wait(self, at_least: float = 0.0) -> float:
        """Sleep for the next delay (or ``at_least``, if longer); returns the seconds slept."""
        delay = max(self.next_delay(), at_least)
        await self.clock.sleep(delay)
        return delay

    def reset(self) -> None:
        """Start over at ``initial`` on the next wait."""
        self._base = None
        self._last_start = None

    def __repr__(self) -> str:
        return (
            f"Backoff(initial={self.initial}, factor={self.factor}, cap={self.cap}, "
            f"jitter={self.jitter}, reset_after={self.reset_after})"
        )
