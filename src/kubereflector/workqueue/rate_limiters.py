"""Rate limiters: how long an item waits before it is retried (client-go's
``default_rate_limiters.go``).

A rate limiter answers ``when(item)``: the seconds to wait before the item's next
try, counting the try. ``forget(item)`` ends the item's failures (call it when
the item succeeded); ``num_requeues(item)`` tells how many it has had. They are
small values that compose: :class:`MaxOfRateLimiter` waits for the longest of
several, and :func:`default_controller_rate_limiter` is client-go's default for
controllers, an exponential backoff per item capped by an overall token bucket.

Every limiter here is thread-safe.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar, runtime_checkable

from ..clock import Clock, RealClock

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
]

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


@runtime_checkable
class RateLimiter(Protocol[T_contra]):
    """client-go's ``TypedRateLimiter``."""

    def when(self, item: T_contra) -> float:
        """Seconds to wait before ``item`` is tried again; counts one more requeue."""
        ...

    def forget(self, item: T_contra) -> None:
        """Forget ``item``'s failures (it succeeded, or was given up on)."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """How many times ``item`` was requeued since it was last forgotten."""
        ...


class _PerItemFailures(Generic[T]):
    """Counts each item's failures, under a lock."""

    __slots__ = ("_failures", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: dict[T, int] = {}

    def _fail(self, item: T) -> int:
        """Count a failure of ``item``; the count before it."""
        with self._lock:
            before = self._failures.get(item, 0)
            self._failures[item] = before + 1
            return before

    def forget(self, item: T) -> None:
        """Forget ``item``'s failures: its next requeue waits the shortest delay again.
        Thread-safe."""
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        """How many times ``item`` was requeued since it was last forgotten. Thread-safe."""
        with self._lock:
            return self._failures.get(item, 0)


class ItemExponentialFailureRateLimiter(_PerItemFailures[T]):
    """``base_delay * 2**failures`` per item, capped at ``max_delay``.

    With the defaults (5 ms, 1000 s): 0.005, 0.01, 0.02, ... 1000 s from the
    19th requeue on. Raises :class:`ValueError` unless 0 <= base_delay <= max_delay.
    """

    __slots__ = ("base_delay", "max_delay")

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if not 0 <= base_delay <= max_delay:
            raise ValueError(
                f"need 0 <= base_delay <= max_delay (got base_delay={base_delay}, "
                f"max_delay={max_delay})"
            )
        super().__init__()
        self.base_delay = base_delay
        self.max_delay = max_delay

    def when(self, item: T) -> float:
        """``base_delay * 2**n`` for the ``n``-th requeue of ``item`` since it was forgotten
        (from 0), capped at ``max_delay``; counts this requeue. Thread-safe."""
        exponent = self._fail(item)
        if exponent >= 1024:  # 2.0**1024 overflows a float
            return self.max_delay
        return min(self.base_delay * 2.0**exponent, self.max_delay)

    def __repr__(self) -> str:
        return (
            f"ItemExponentialFailureRateLimiter(base_delay={self.base_delay}, "
            f"max_delay={self.max_delay})"
        )


class ItemFastSlowRateLimiter(_PerItemFailures[T]):
    """``fast_delay`` for an item's first ``max_fast_attempts`` requeues, then
    ``slow_delay``. Raises :class:`ValueError` for negative arguments."""

    __slots__ = ("fast_delay", "max_fast_attempts", "slow_delay")

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        if fast_delay < 0 or slow_delay < 0 or max_fast_attempts < 0:
            raise ValueError(
                "delays and max_fast_attempts must not be negative (got "
                f"fast_delay={fast_delay}, slow_delay={slow_delay}, "
                f"max_fast_attempts={max_fast_attempts})"
            )
        super().__init__()
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts

    def when(self, item: T) -> float:
        """``fast_delay`` for the first ``max_fast_attempts`` requeues of ``item``,
        ``slow_delay`` after; counts this requeue. Thread-safe."""
        attempt = self._fail(item) + 1
        return self.fast_delay if attempt <= self.max_fast_attempts else self.slow_delay

    def __repr__(self) -> str:
        return (
            f"ItemFastSlowRateLimiter(fast_delay={self.fast_delay}, "
            f"slow_delay={self.slow_delay}, max_fast_attempts={self.max_fast_attempts})"
        )


class BucketRateLimiter:
    """An overall token bucket shared by every item (golang.org/x/time/rate):
    ``burst`` tokens, refilled at ``qps`` per second of ``clock``.

    Each ``when`` takes a token and returns 0 while the bucket has one, else the
    wait until the token it took (on credit) will have been refilled: a burst
    of ``burst`` items goes at once, later ones are spaced ``1/qps`` apart. It
    keeps no per-item state (``num_requeues`` is 0, ``forget`` does nothing).
    ``qps=math.inf`` never waits. Raises :class:`ValueError` unless qps > 0 and
    burst >= 1.
    """

    __slots__ = ("_last", "_lock", "_tokens", "burst", "clock", "qps")

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock | None = None) -> None:
        if not qps > 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1 (got qps={qps}, burst={burst})")
        self.qps = qps
        self.burst = burst
        self.clock: Clock = clock if clock is not None else RealClock()
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last: float | None = None

    def when(self, item: object) -> float:
        """Take a token: 0 while the bucket has one, else the seconds until the token taken on
        credit is refilled (whatever ``item``). Thread-safe."""
        if math.isinf(self.qps):
            return 0.0
        with self._lock:
            now = self.clock.now()
            tokens = self._tokens
            if self._last is not None and now > self._last:
                tokens = min(float(self.burst), tokens + (now - self._last) * self.qps)
            tokens -= 1.0
            self._tokens = tokens
            self._last = now
            return 0.0 if tokens >= 0 else -tokens / self.qps

    def forget(self, item: object) -> None:
        """Nothing: the bucket keeps no per-item state."""
        pass

    def num_requeues(self, item: object) -> int:
        """Always 0: the bucket keeps no per-item state."""
        return 0

    def __repr__(self) -> str:
        return f"BucketRateLimiter(qps={self.qps}, burst={self.burst})"


class MaxOfRateLimiter(Generic[T]):
    """The longest wait of ``limiters`` (each is asked, so each counts the
    requeue); ``num_requeues`` is their largest count, ``forget`` forgets in
    each. Raises :class:`ValueError` without limiters."""

    __slots__ = ("limiters",)

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one rate limiter")
        self.limiters = limiters

    def when(self, item: T) -> float:
        """The longest of the limiters' waits for ``item`` (each one counts the requeue)."""
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: T) -> None:
        """Forget ``item`` in every limiter."""
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """The largest of the limiters' counts for ``item``."""
        return max(limiter.num_requeues(item) for limiter in self.limiters)

    def __repr__(self) -> str:
        return f"MaxOfRateLimiter({', '.join(map(repr, self.limiters))})"


def default_controller_rate_limiter(*, clock: Clock | None = None) -> RateLimiter[Hashable]:
    """client-go's ``DefaultControllerRateLimiter``: the longer of an exponential
    backoff per item (5 ms doubling up to 1000 s) and an overall bucket of 10
    qps with a burst of 100 (on ``clock``, default the real one)."""
    return MaxOfRateLimiter[Hashable](
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )
