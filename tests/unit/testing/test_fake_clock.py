"""FakeClock and settle (``kubereflector.testing``): virtual time for tests."""

from __future__ import annotations

import asyncio

import pytest

from kubereflector.testing import FakeClock, settle

pytestmark = pytest.mark.asyncio


async def sleeper(
    clock: FakeClock, seconds: float, log: list[tuple[str, float]], name: str
) -> None:
    await clock.sleep(seconds)
    log.append((name, clock.now()))


async def test_sleep_parks_until_advanced_past_its_deadline() -> None:
    clock = FakeClock()
    assert clock.now() == 0.0
    task = asyncio.create_task(clock.sleep(5.0))
    await clock.wait_for_sleepers(1)
    assert clock.pending == [5.0]
    await settle()
    assert not task.done()
    await clock.advance(4.9)
    assert not task.done()
    assert clock.now() == pytest.approx(4.9)
    await clock.advance(0.1)
    assert task.done()
    assert clock.pending == []
    assert clock.now() == pytest.approx(5.0)


async def test_start_time() -> None:
    clock = FakeClock(start=100.0)
    assert clock.now() == 100.0
    task = asyncio.create_task(clock.sleep(1.0))
    await clock.wait_for_sleepers(1)
    assert clock.pending == [101.0]
    await clock.advance(1.0)
    assert task.done()


async def test_sleep_of_zero_or_less_does_not_park() -> None:
    clock = FakeClock()
    await clock.sleep(0)
    await clock.sleep(-3.0)
    assert clock.pending == []
    assert clock.next_deadline() is None


async def test_advance_stops_at_intermediate_deadlines() -> None:
    clock = FakeClock()
    log: list[tuple[str, float]] = []
    tasks = [
        asyncio.create_task(sleeper(clock, 5.0, log, "five")),
        asyncio.create_task(sleeper(clock, 2.0, log, "two")),
        asyncio.create_task(sleeper(clock, 20.0, log, "twenty")),
    ]
    await clock.wait_for_sleepers(3)
    assert clock.next_deadline() == 2.0
    await clock.advance(10.0)
    assert log == [("two", 2.0), ("five", 5.0)]  # each woke at its own deadline
    assert clock.now() == 10.0
    assert clock.pending == [20.0]
    await clock.advance(10.0)
    assert log[-1] == ("twenty", 20.0)
    await asyncio.gather(*tasks)


async def test_chained_sleeps_fire_in_order_within_one_advance() -> None:
    clock = FakeClock()
    log: list[float] = []

    async def chain() -> None:
        for _ in range(4):
            await clock.sleep(1.5)
            log.append(clock.now())

    task = asyncio.create_task(chain())
    await clock.wait_for_sleepers(1)
    await clock.advance(5.0)
    assert log == [1.5, 3.0, 4.5]
    assert not task.done()
    await clock.advance(1.0)
    assert log == [1.5, 3.0, 4.5, 6.0]
    assert task.done()


async def test_equal_deadlines_wake_in_sleep_order() -> None:
    clock = FakeClock()
    log: list[tuple[str, float]] = []
    tasks = []
    for name in ("a", "b", "c"):
        tasks.append(asyncio.create_task(sleeper(clock, 1.0, log, name)))
        await clock.wait_for_sleepers(len(tasks))
    await clock.advance(1.0)
    assert [name for name, _ in log] == ["a", "b", "c"]
    await asyncio.gather(*tasks)


async def test_step_wakes_due_sleepers_without_running_them() -> None:
    clock = FakeClock()
    log: list[float] = []

    async def chain() -> None:
        await clock.sleep(1.0)
        log.append(clock.now())
        await clock.sleep(1.0)
        log.append(clock.now())

    task = asyncio.create_task(chain())
    await clock.wait_for_sleepers(1)
    clock.step(5.0)
    assert log == []  # woken, but runs only when the caller yields
    await settle()
    assert log == [5.0]  # step jumps: the wake-up sees the new time
    assert clock.pending == [6.0]  # the chained sleep starts from there
    clock.step(0.5)
    await settle()
    assert log == [5.0]
    clock.step(0.5)
    await settle()
    assert log == [5.0, 6.0]
    assert task.done()


async def test_wait_for_sleepers_blocks_until_enough_are_parked() -> None:
    clock = FakeClock()
    waiter = asyncio.create_task(clock.wait_for_sleepers(2))
    await settle()
    assert not waiter.done()
    first = asyncio.create_task(clock.sleep(1.0))
    await settle()
    assert not waiter.done()
    second = asyncio.create_task(clock.sleep(3.0))
    await settle()
    assert waiter.done()
    assert clock.now() == 0.0  # no time passed
    await clock.advance(3.0)
    assert first.done()
    assert second.done()


async def test_cancelled_sleeps_are_dropped() -> None:
    clock = FakeClock()
    early = asyncio.create_task(clock.sleep(1.0))
    late = asyncio.create_task(clock.sleep(2.0))
    await clock.wait_for_sleepers(2)
    early.cancel()
    await asyncio.wait({early})
    assert early.cancelled()
    assert clock.pending == [2.0]
    assert clock.next_deadline() == 2.0
    # Cancelled sleeps do not count towards wait_for_sleepers.
    counting = asyncio.create_task(clock.wait_for_sleepers(2))
    await settle()
    assert not counting.done()
    again = asyncio.create_task(clock.sleep(5.0))
    await settle()
    assert counting.done()
    await clock.advance(2.0)
    assert late.done()
    assert not again.done()
    again.cancel()
    await asyncio.wait({again})
    assert clock.pending == []
    assert clock.next_deadline() is None


async def test_time_only_moves_forward() -> None:
    clock = FakeClock(start=7.0)
    with pytest.raises(ValueError, match="forward"):
        await clock.advance(-1.0)
    with pytest.raises(ValueError, match="forward"):
        clock.step(-0.1)
    assert clock.now() == 7.0
    await clock.advance(0)
    clock.step(0)
    assert clock.now() == 7.0


async def test_settle_runs_ready_chains_without_time() -> None:
    clock = FakeClock()
    reached: list[int] = []

    async def hop(n: int) -> None:
        for i in range(n):
            await asyncio.sleep(0)
            reached.append(i)

    task = asyncio.create_task(hop(10))
    await settle()
    assert task.done()
    assert reached == list(range(10))
    slow = asyncio.create_task(hop(10))
    await settle(rounds=3)
    assert not slow.done()  # fewer rounds, fewer hops
    await settle()
    assert slow.done()
    assert clock.now() == 0.0


async def test_repr() -> None:
    clock = FakeClock(start=1.5)
    task = asyncio.create_task(clock.sleep(1.0))
    await clock.wait_for_sleepers(1)
    assert repr(clock) == "FakeClock(now=1.5, pending=1)"
    await clock.advance(1.0)
    assert task.done()
