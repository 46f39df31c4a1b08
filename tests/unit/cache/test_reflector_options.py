"""ReflectorOptions: its defaults and checks, and each knob reaching the Reflector
through a SharedIndexInformer and changing what it does (on a FakeClock).

The factory's default and per-resource options are tested in test_factory.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubereflector import (
    ApiError,
    Backoff,
    ReflectorOptions,
    SharedIndexInformer,
    wait_for_cache_sync,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle

WAIT = 10.0


def pod(name: str) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "default"}}


@contextlib.asynccontextmanager
async def running(
    options: ReflectorOptions | None, *names: str
) -> AsyncIterator[tuple[SharedIndexInformer, FakeControllerSource, FakeClock]]:
    """An informer with ``options`` over a FakeControllerSource holding ``names``,
    running (and synced, unless its first list fails) on a FakeClock."""
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    for name in names:
        source.add(pod(name))
    informer = SharedIndexInformer(source, clock=clock, reflector_options=options)
    informer.set_watch_error_handler(lambda _r, _e: None)
    task = asyncio.create_task(informer.run())
    await settle()
    try:
        yield informer, source, clock
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# -- the value itself ---------------------------------------------------------------------


def test_defaults_are_client_gos_and_documented() -> None:
    options = ReflectorOptions()
    assert dataclasses.asdict(options) == {
        "idle_timeout": 90.0,
        "min_watch_timeout": 300.0,
        "page_size": None,
        "use_watch_list": True,
        "max_internal_error_retry_duration": 30.0,
        "backoff_initial": 0.8,
        "backoff_factor": 2.0,
        "backoff_cap": 30.0,
        "backoff_jitter": 1.0,
        "backoff_reset_after": 120.0,
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.idle_timeout = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        ReflectorOptions(30)  # type: ignore[misc]  # keywords only


@pytest.mark.parametrize(
    ("values", "error", "match"),
    [
        ({"idle_timeout": 0}, ValueError, "idle_timeout must be > 0"),
        ({"idle_timeout": "90"}, TypeError, "idle_timeout must be a number"),
        ({"min_watch_timeout": -1}, ValueError, "min_watch_timeout must be > 0"),
        ({"page_size": 0}, ValueError, "page_size must be > 0"),
        ({"page_size": 2.5}, TypeError, "page_size must be an int"),
        ({"page_size": True}, TypeError, "page_size must be an int"),
        ({"use_watch_list": "yes"}, TypeError, "use_watch_list must be a bool"),
        ({"max_internal_error_retry_duration": -1}, ValueError, "must be >= 0"),
        ({"backoff_initial": 0}, ValueError, "backoff_initial must be > 0"),
        ({"backoff_factor": 0.5}, ValueError, "backoff_factor must be >= 1"),
        ({"backoff_cap": 0.1}, ValueError, "backoff_cap must be >= backoff_initial"),
        ({"backoff_jitter": -0.1}, ValueError, "backoff_jitter must be >= 0"),
        ({"backoff_reset_after": float("nan")}, ValueError, "backoff_reset_after"),
    ],
)
def test_bad_values_are_refused_naming_the_field(
    values: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        ReflectorOptions(**values)


def test_options_must_be_reflector_options() -> None:
    with pytest.raises(TypeError, match="reflector_options must be ReflectorOptions, not dict"):
        SharedIndexInformer(FakeControllerSource(), reflector_options={"page_size": 5})  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_the_backoff_follows_initial_factor_cap_jitter_and_reset() -> None:
    clock = FakeClock()
    options = ReflectorOptions(
        backoff_initial=1, backoff_factor=3, backoff_cap=5, backoff_jitter=0, backoff_reset_after=60
    )
    backoff = options.new_backoff(clock)
    assert [backoff.next_delay() for _ in range(4)] == [1, 3, 5, 5]
    await clock.advance(61)  # quiet for longer than backoff_reset_after
    assert backoff.next_delay() == 1
    jittery = dataclasses.replace(options, backoff_jitter=0.5).new_backoff(clock)
    delays = [jittery.next_delay() for _ in range(3)]
    assert all(base <= d < base * 1.5 for base, d in zip([1, 3, 5], delays, strict=True))


# -- each knob reaches the Reflector -------------------------------------------------------


@pytest.mark.asyncio
async def test_the_informer_hands_its_options_to_its_reflector() -> None:
    options = ReflectorOptions(page_size=7, idle_timeout=None)
    async with running(options, "a") as (informer, _, _):
        assert informer.reflector_options is options
        assert informer._controller is not None
        assert informer._controller.reflector.options is options


@pytest.mark.asyncio
@pytest.mark.parametrize("idle_timeout", [10.0, None])
async def test_idle_timeout_detects_a_stalled_watch(idle_timeout: float | None) -> None:
    options = ReflectorOptions(idle_timeout=idle_timeout, backoff_jitter=0)
    async with running(options, "a") as (informer, source, clock):
        assert await wait_for_cache_sync(informer, timeout=WAIT, clock=clock)
        watches = len(source.watch_requests)
        source.stall_watches()
        await clock.advance(12.5)  # the watchdog looks every idle_timeout / 4
        if idle_timeout is None:
            await clock.advance(200)  # still short of the server's watch timeout
            assert informer.stats().stalls == 0
            assert len(source.watch_requests) == watches
        else:
            assert informer.stats().stalls == 1
            assert len(source.watch_requests) == watches + 1  # opened again at once


@pytest.mark.asyncio
@pytest.mark.parametrize("minimum", [20.0, 600.0])
async def test_min_watch_timeout_sets_how_long_the_server_keeps_a_watch(minimum: float) -> None:
    options = ReflectorOptions(min_watch_timeout=minimum, idle_timeout=None)
    async with running(options, "a") as (informer, source, clock):
        assert await wait_for_cache_sync(informer, timeout=WAIT, clock=clock)
        (first,) = source.watch_requests
        assert first.timeout_seconds is not None
        assert minimum <= first.timeout_seconds < 2 * minimum
        await clock.advance(first.timeout_seconds)  # the server ends it; a new one opens
        assert len(source.watch_requests) == 2


@pytest.mark.asyncio
@pytest.mark.parametrize(("page_size", "limits"), [(2, [2, 2, 2]), (None, [500])])
async def test_page_size_sets_the_list_limit(page_size: int | None, limits: list[int]) -> None:
    options = ReflectorOptions(page_size=page_size, use_watch_list=False, idle_timeout=None)
    async with running(options, *"abcde") as (informer, source, clock):
        assert await wait_for_cache_sync(informer, timeout=WAIT, clock=clock)
        assert [r.limit for r in source.list_requests] == limits
        assert len(informer.indexer) == 5


@pytest.mark.asyncio
@pytest.mark.parametrize("use_watch_list", [True, False])
async def test_use_watch_list_picks_how_the_informer_syncs(use_watch_list: bool) -> None:
    options = ReflectorOptions(use_watch_list=use_watch_list, idle_timeout=None)
    async with running(options, "a") as (informer, source, clock):
        assert await wait_for_cache_sync(informer, timeout=WAIT, clock=clock)
        first_watch = source.watch_requests[0]
        assert (first_watch.send_initial_events is True) is use_watch_list
        assert len(source.list_requests) == (0 if use_watch_list else 1)


@pytest.mark.asyncio
@pytest.mark.parametrize(("retry_for", "lists"), [(30.0, 1), (0.0, 2)])
async def test_max_internal_error_retry_duration_rewatches_or_relists(
    retry_for: float, lists: int
) -> None:
    options = ReflectorOptions(
        max_internal_error_retry_duration=retry_for,
        use_watch_list=False,
        idle_timeout=None,
        backoff_jitter=0,
    )
    async with running(options, "a") as (informer, source, clock):
        assert await wait_for_cache_sync(informer, timeout=WAIT, clock=clock)
        await clock.advance(2)  # a watch that lasted (a very short one would relist)
        source.fail_next_watch(ApiError(500, "InternalError", "etcdserver: no leader"))
        source.reset_watch()  # the watch ends; the next one gets the 500
        await settle()
        await clock.advance(0.8)  # the backoff before the next attempt
        assert informer.stats().lists == lists
        assert len(source.watch_requests) == 3


@pytest.mark.asyncio
@pytest.mark.parametrize("initial", [0.8, 5.0])
async def test_the_backoff_knobs_set_the_wait_after_a_failure(initial: float) -> None:
    options = ReflectorOptions(
        backoff_initial=initial, backoff_jitter=0, use_watch_list=False, idle_timeout=None
    )
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a"))
    source.fail_next_list(ApiError(503, "ServiceUnavailable"))
    informer = SharedIndexInformer(source, clock=clock, reflector_options=options)
    informer.set_watch_error_handler(lambda _r, _e: None)
    task = asyncio.create_task(informer.run())
    try:
        await settle()
        assert len(source.list_requests) == 1  # failed
        await clock.advance(initial - 0.1)
        assert len(source.list_requests) == 1
        await clock.advance(0.1)
        assert len(source.list_requests) == 2
        assert await wait_for_cache_sync(informer, timeout=WAIT, clock=clock)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.asyncio
async def test_a_backoff_object_of_your_own_replaces_the_options_backoff() -> None:
    waits: list[float] = []

    class Recording(Backoff):
        async def wait(self, at_least: float = 0.0) -> float:
            waits.append(at_least)
            return await super().wait(at_least)

    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.fail_next_list(ApiError(503, "ServiceUnavailable"))
    options = ReflectorOptions(
        backoff_initial=50, backoff_cap=50, use_watch_list=False, idle_timeout=None
    )
    backoff = Recording(initial=1, jitter=0, clock=clock)
    informer = SharedIndexInformer(source, clock=clock, reflector_options=options, backoff=backoff)
    informer.set_watch_error_handler(lambda _r, _e: None)
    task = asyncio.create_task(informer.run())
    try:
        await settle()
        await clock.advance(1)  # the Backoff given, not backoff_initial=50
        assert len(source.list_requests) == 2
        assert waits == [0.0]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
