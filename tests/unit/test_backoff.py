"""Backoff (``kubereflector.backoff``): exponential delays with jitter and reset.

Time is a FakeClock and ``random`` is a constant, so every delay is exact.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubereflector import Backoff, Clock, RealClock
from kubereflector.testing import FakeClock


def zero() -> float:
    return 0.0


def half() -> float:
    return 0.5


def delays(backoff: Backoff, n: int) -> list[float]:
    return [round(backoff.next_delay(), 9) for _ in range(n)]


def test_sequence_doubles_up_to_the_cap() -> None:
    backoff = Backoff(clock=FakeClock(), random=zero)
    assert delays(backoff, 9) == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0]


def test_jitter_multiplies_by_one_plus_jitter_times_random() -> None:
    backoff = Backoff(clock=FakeClock(), random=half)
    assert delays(backoff, 8) == [1.2, 2.4, 4.8, 9.6, 19.2, 38.4, 45.0, 45.0]
    smaller = Backoff(jitter=0.5, clock=FakeClock(), random=half)
    assert delays(smaller, 3) == [1.0, 2.0, 4.0]
    none = Backoff(jitter=0.0, clock=FakeClock(), random=lambda: 0.99)
    assert delays(none, 3) == [0.8, 1.6, 3.2]


def test_custom_parameters() -> None:
    backoff = Backoff(initial=1.0, factor=3.0, cap=10.0, clock=FakeClock(), random=zero)
    assert delays(backoff, 4) == [1.0, 3.0, 9.0, 10.0]
    flat = Backoff(initial=2.0, factor=1.0, cap=2.0, clock=FakeClock(), random=zero)
    assert delays(flat, 3) == [2.0, 2.0, 2.0]


def test_default_random_stays_within_the_jitter_range() -> None:
    backoff = Backoff(clock=FakeClock())
    for base in (0.8, 1.6, 3.2, 6.4):
        delay = backoff.next_delay()
        assert base <= delay < 2 * base


def test_reset_after_a_quiet_period() -> None:
    clock = FakeClock()
    backoff = Backoff(reset_after=120.0, clock=clock, random=zero)
    assert delays(backoff, 3) == [0.8, 1.6, 3.2]
    clock.step(120.0)  # exactly reset_after since the last wait began: no reset
    assert delays(backoff, 1) == [6.4]
    clock.step(120.5)  # more than reset_after
    assert delays(backoff, 2) == [0.8, 1.6]


def test_reset_is_measured_from_the_last_wait_start() -> None:
    clock = FakeClock()
    backoff = Backoff(reset_after=10.0, clock=clock, random=zero)
    for expected in (0.8, 1.6, 3.2, 6.4):
        assert round(backoff.next_delay(), 9) == expected
        clock.step(9.0)  # each wait begins within reset_after of the previous one
    clock.step(1.5)  # now 10.5 s since the last one began
    assert round(backoff.next_delay(), 9) == 0.8


def test_explicit_reset() -> None:
    backoff = Backoff(clock=FakeClock(), random=zero)
    assert delays(backoff, 4) == [0.8, 1.6, 3.2, 6.4]
    backoff.reset()
    assert delays(backoff, 2) == [0.8, 1.6]


@pytest.mark.asyncio
async def test_wait_sleeps_on_the_clock() -> None:
    clock = FakeClock()
    backoff = Backoff(clock=clock, random=zero)
    first = asyncio.create_task(backoff.wait())
    await clock.wait_for_sleepers(1)
    assert clock.pending == [0.8]
    await clock.advance(0.5)
    assert not first.done()
    await clock.advance(0.3)
    assert first.done()
    assert first.result() == 0.8
    second = asyncio.create_task(backoff.wait())
    await clock.wait_for_sleepers(1)
    assert clock.pending == [pytest.approx(0.8 + 1.6)]
    await clock.advance(1.6)
    assert second.result() == pytest.approx(1.6)


@pytest.mark.asyncio
async def test_wait_honours_at_least() -> None:
    clock = FakeClock()
    backoff = Backoff(clock=clock, random=zero)
    task = asyncio.create_task(backoff.wait(at_least=5.0))
    await clock.wait_for_sleepers(1)
    assert clock.pending == [5.0]
    await clock.advance(4.9)
    assert not task.done()
    await clock.advance(0.1)
    assert task.result() == 5.0
    # A smaller minimum does not shorten the backoff, and the sequence went on.
    task = asyncio.create_task(backoff.wait(at_least=0.5))
    await clock.wait_for_sleepers(1)
    assert clock.pending == [pytest.approx(5.0 + 1.6)]
    await clock.advance(1.6)
    assert task.result() == pytest.approx(1.6)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial": 0.0},
        {"initial": -1.0},
        {"factor": 0.5},
        {"cap": 0.5},
        {"jitter": -0.1},
        {"reset_after": 0.0},
    ],
)
def test_invalid_parameters(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        Backoff(**kwargs)


def test_defaults() -> None:
    backoff = Backoff()
    assert (backoff.initial, backoff.factor, backoff.cap, backoff.jitter, backoff.reset_after) == (
        0.8,
        2.0,
        30.0,
        1.0,
        120.0,
    )
    assert isinstance(backoff.clock, RealClock)
    assert isinstance(backoff.clock, Clock)
    assert isinstance(FakeClock(), Clock)
    assert repr(backoff) == (
        "Backoff(initial=0.8, factor=2.0, cap=30.0, jitter=1.0, reset_after=120.0)"
    )


@pytest.mark.asyncio
async def test_real_clock_is_monotonic_and_sleep_zero_returns() -> None:
    clock = RealClock()
    before = clock.now()
    await clock.sleep(0)
    await clock.sleep(-1.0)
    assert clock.now() >= before
    assert repr(clock) == "RealClock()"
