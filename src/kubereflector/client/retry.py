"""Retrying a read-modify-write when it loses a race (client-go's ``util/retry``).

An update that carries the ``metadata.resourceVersion`` it read fails with
:class:`~kubereflector.ConflictError` when someone else wrote in between. The
cure is to read again, re-apply the change and write again: wrap those three
steps in a function and hand it to :func:`retry_on_conflict`::

    async def add_label():
        cm = await configmaps.get("settings")
        cm["metadata"].setdefault("labels", {})["tier"] = "gold"
        return await configmaps.update(cm)

    updated = await retry_on_conflict(add_label)

The same works with a plain function (blocking, e.g. with a
:class:`~kubereflector.client.SyncClient`).
"""

from __future__ import annotations

import asyncio
import inspect
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, Final, TypeVar, overload

from ..errors import ConflictError

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_RETRY",
    "RetryBackoff",
    "retry_on_conflict",
    "retry_on_error",
]

T = TypeVar("T")

SleepFunc = Callable[[float], Any]
"""Waits the given seconds: a plain function (``time.sleep``) or one returning an
awaitable (``asyncio.sleep``, ``FakeClock.sleep``), which is awaited."""


@dataclass(frozen=True, slots=True)
class RetryBackoff:
    """How often and how long to wait between attempts (client-go's ``wait.Backoff``).

    At most ``steps`` attempts; before attempt n+1 the wait is
    ``duration * factor**(n-1)`` (capped at ``cap`` seconds if set, which also
    ends the growth), stretched by up to ``jitter`` of itself at random.
    Immutable; share it freely.
    """

    duration: float = 0.010
    factor: float = 1.0
    jitter: float = 0.0
    steps: int = 1
    cap: float | None = None

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1 (got {self.steps})")
        if self.duration < 0 or self.factor < 0 or self.jitter < 0:
            raise ValueError("duration, factor and jitter must be >= 0")
        if self.cap is not None and self.cap < 0:
            raise ValueError(f"cap must be >= 0 or None (got {self.cap})")

    def delays(self, rand: Callable[[], float] = random.random) -> Iterator[float]:
        """The ``steps - 1`` waits between the attempts, in seconds."""
        duration = self.duration
        for _ in range(self.steps - 1):
            wait = duration
            if self.factor:
                duration *= self.factor
                if self.cap is not None and duration > self.cap:
                    duration = self.cap
            if self.jitter > 0:
                wait += rand() * self.jitter * wait
            yield wait


DEFAULT_RETRY: Final = RetryBackoff(duration=0.010, factor=1.0, jitter=0.1, steps=5)
"""client-go's ``retry.DefaultRetry``: 5 attempts, about 10 ms apart. For
conflicts, which a fresh read usually resolves at once."""

DEFAULT_BACKOFF: Final = RetryBackoff(duration=0.010, factor=5.0, jitter=0.1, steps=4)
"""client-go's ``retry.DefaultBackoff``: 4 attempts, 10 ms, 50 ms, 250 ms apart.
For errors a busy server causes."""


@overload
def retry_on_error(
    fn: Callable[[], Awaitable[T]],
    *,
    retriable: Callable[[Exception], bool],
    backoff: RetryBackoff = ...,
    sleep: SleepFunc | None = ...,
) -> Coroutine[Any, Any, T]: ...


@overload
def retry_on_error(
    fn: Callable[[], T],
    *,
    retriable: Callable[[Exception], bool],
    backoff: RetryBackoff = ...,
    sleep: SleepFunc | None = ...,
) -> T: ...


def retry_on_error(
    fn: Callable[[], Any],
    *,
    retriable: Callable[[Exception], bool],
    backoff: RetryBackoff = DEFAULT_BACKOFF,
    sleep: SleepFunc | None = None,
) -> Any:
    """Call ``fn`` until it returns, raises an error ``retriable`` rejects, or
    ``backoff.steps`` attempts have failed (client-go's ``retry.OnError``).

    ``fn`` takes no arguments. If calling it gives an awaitable (a coroutine
    function, or a lambda returning a coroutine), this returns a coroutine to
    await, which awaits each attempt and sleeps with ``sleep`` (default
    :func:`asyncio.sleep`); otherwise it runs the attempts here, blocking, with
    ``sleep`` (default :func:`time.sleep`). Either way the result is the
    successful attempt's, and after the last failed attempt its exception is
    raised. ``sleep`` is injectable so tests wait no wall time: pass a
    :class:`~kubereflector.testing.FakeClock`'s ``sleep`` (async only), or a
    function that records the delays.
    """
    delays = backoff.delays()
    try:
        first = fn()
    except Exception as err:
        if not retriable(err):
            raise
        return _retry_blocking(fn, retriable, delays, sleep or time.sleep, err)
    if inspect.isawaitable(first):
        return _retry_async(fn, first, retriable, delays, sleep or asyncio.sleep)
    return first


def _retry_blocking(
    fn: Callable[[], T],
    retriable: Callable[[Exception], bool],
    delays: Iterator[float],
    sleep: SleepFunc,
    error: Exception,
) -> T:
    for delay in delays:
        waited = sleep(delay)
        if inspect.isawaitable(waited):
            if inspect.iscoroutine(waited):
                waited.close()
            raise TypeError("retrying a plain function needs a plain sleep function")
        try:
            return fn()
        except Exception as err:
            if not retriable(err):
                raise
            error = err
    raise error


async def _retry_async(
    fn: Callable[[], Any],
    first: Awaitable[T],
    retriable: Callable[[Exception], bool],
    delays: Iterator[float],
    sleep: SleepFunc,
) -> T:
    attempt = first
    while True:
        try:
            return await attempt
        except Exception as err:
            if not retriable(err):
                raise
            delay = next(delays, None)
            if delay is None:
                raise
        waited = sleep(delay)
        if inspect.isawaitable(waited):
            await waited
        attempt = fn()


def _is_conflict(err: Exception) -> bool:
    return isinstance(err, ConflictError)


@overload
def retry_on_conflict(
    fn: Callable[[], Awaitable[T]],
    *,
    backoff: RetryBackoff = ...,
    sleep: SleepFunc | None = ...,
) -> Coroutine[Any, Any, T]: ...


@overload
def retry_on_conflict(
    fn: Callable[[], T], *, backoff: RetryBackoff = ..., sleep: SleepFunc | None = ...
) -> T: ...


def retry_on_conflict(
    fn: Callable[[], Any],
    *,
    backoff: RetryBackoff = DEFAULT_RETRY,
    sleep: SleepFunc | None = None,
) -> Any:
    """Call ``fn`` again while it raises :class:`~kubereflector.ConflictError`, up
    to ``backoff.steps`` attempts in all (client-go's ``retry.RetryOnConflict``:
    5 attempts about 10 ms apart by default); any other exception ends it.

    ``fn`` must do the whole read-modify-write each time (a conflict means what
    it read is stale). Async or blocking as :func:`retry_on_error` explains:
    ``await retry_on_conflict(coroutine_function)``, or
    ``retry_on_conflict(plain_function)``. Returns what ``fn`` returned; raises
    the last ConflictError when every attempt conflicted.
    """
    return retry_on_error(fn, retriable=_is_conflict, backoff=backoff, sleep=sleep)
