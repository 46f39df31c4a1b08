"""retry_on_conflict / retry_on_error: client-go's util/retry, for coroutines and plain functions.

No test waits for wall time: sleeps go to a recorder or a FakeClock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kubereflector import ApiError, ConflictError, NotFoundError, TooManyRequestsError
from kubereflector.client import (
    DEFAULT_BACKOFF,
    DEFAULT_RETRY,
    RetryBackoff,
    retry_on_conflict,
    retry_on_error,
)
from kubereflector.testing import FakeClock


def conflict() -> ConflictError:
    return ConflictError(409, "Conflict", "the object has been modified", url="https://k/x")


def failing(times: int, error: Callable[[], Exception] = conflict) -> Callable[[], str]:
    """A plain function that raises ``error()`` ``times`` times, then returns "done"."""
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if calls["n"] <= times:
            raise error()
        return "done"

    fn.calls = calls  # type: ignore[attr-defined]
    return fn


def test_default_retry_is_client_gos() -> None:
    assert RetryBackoff(duration=0.010, factor=1.0, jitter=0.1, steps=5) == DEFAULT_RETRY
    assert RetryBackoff(duration=0.010, factor=5.0, jitter=0.1, steps=4) == DEFAULT_BACKOFF
    assert list(DEFAULT_RETRY.delays(lambda: 0.0)) == [0.010] * 4
    assert list(DEFAULT_RETRY.delays(lambda: 1.0)) == pytest.approx([0.011] * 4)
    assert list(DEFAULT_BACKOFF.delays(lambda: 0.0)) == pytest.approx([0.010, 0.050, 0.250])


def test_the_cap_stops_the_growth() -> None:
    backoff = RetryBackoff(duration=1.0, factor=3.0, steps=5, cap=5.0)
    assert list(backoff.delays()) == [1.0, 3.0, 5.0, 5.0]


@pytest.mark.parametrize(
    "kwargs",
    [{"steps": 0}, {"duration": -1.0}, {"factor": -1.0}, {"jitter": -0.1}, {"cap": -1.0}],
)
def test_invalid_backoffs_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        RetryBackoff(**kwargs)


def test_a_plain_function_is_retried_while_it_conflicts() -> None:
    slept: list[float] = []
    fn = failing(3)
    assert retry_on_conflict(fn, sleep=slept.append) == "done"
    assert fn.calls["n"] == 4  # type: ignore[attr-defined]
    assert len(slept) == 3
    assert all(0.010 <= s <= 0.011 for s in slept)


def test_it_gives_up_after_the_last_step_with_the_last_conflict() -> None:
    slept: list[float] = []
    fn = failing(10)
    with pytest.raises(ConflictError):
        retry_on_conflict(fn, sleep=slept.append)
    assert fn.calls["n"] == 5  # type: ignore[attr-defined]
    assert len(slept) == 4


def test_other_errors_end_it_at_once() -> None:
    slept: list[float] = []
    fn = failing(1, lambda: NotFoundError(404, "NotFound", "gone"))
    with pytest.raises(NotFoundError):
        retry_on_conflict(fn, sleep=slept.append)
    assert slept == []


def test_a_plain_function_needs_a_plain_sleep() -> None:
    with pytest.raises(TypeError, match="plain sleep"):
        retry_on_conflict(failing(1), sleep=asyncio.sleep)


@pytest.mark.asyncio
async def test_a_coroutine_function_is_awaited_and_retried_on_the_clock() -> None:
    clock = FakeClock()
    calls = 0

    async def fn() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise conflict()
        return "done"

    task = asyncio.create_task(retry_on_conflict(fn, sleep=clock.sleep))
    for _ in range(2):
        await clock.wait_for_sleepers()
        await clock.advance(0.011)
    assert await task == "done"
    assert calls == 3


@pytest.mark.asyncio
async def test_a_lambda_returning_a_coroutine_counts_as_async() -> None:
    attempts: list[int] = []

    async def write(n: int) -> int:
        attempts.append(n)
        if len(attempts) < 2:
            raise conflict()
        return n

    slept: list[float] = []
    assert await retry_on_conflict(lambda: write(7), sleep=slept.append) == 7
    assert attempts == [7, 7]
    assert len(slept) == 1


@pytest.mark.asyncio
async def test_async_gives_up_with_the_last_conflict() -> None:
    async def always() -> None:
        raise conflict()

    slept: list[float] = []
    with pytest.raises(ConflictError):
        await retry_on_conflict(always, backoff=RetryBackoff(steps=3), sleep=slept.append)
    assert len(slept) == 2


@pytest.mark.asyncio
async def test_retry_on_error_takes_any_predicate() -> None:
    calls = 0

    async def busy() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TooManyRequestsError("slow down")
        if calls == 2:
            raise ApiError(500, "InternalError", "etcd")
        return "ok"

    def retriable(err: Exception) -> bool:
        return isinstance(err, ApiError) and err.status in (429, 500)

    assert await retry_on_error(busy, retriable=retriable, sleep=lambda _s: None) == "ok"
    assert calls == 3
