"""Randomized, across the wire: whatever the API server does wrong and whenever,
an informer over HTTP converges to the server, and its handlers see every change
exactly once.

Each schedule, drawn from a seeded ``random.Random``, interleaves writes (single,
in bursts, and in bursts right after the history was compacted and the watches
dropped, so that they land while the informer relists) with the emulator's
faults: dropped (cleanly or abruptly), stalled and slowed watches, compaction,
the next requests failing with 500/429/410/503/504/401, restarts, and watch
events carrying a resourceVersion that is an object, a number, or a string the
server then refuses (also as the last event before a re-watch, issue 16's
livelock), with virtual time passing (one FakeClock drives the emulator's
bookmarks and watch timeouts and the informer's backoff and stall detection;
HTTP crosses the loopback in real time). At the end the faults stop and every
object is written once more; then the cache and every handler's view must
equal the server, no handler may have seen a change lost or doubled, no task
may have died, nothing may be logged at ERROR.

The seed is in each test's id and in the failure message with the schedule.
``make fault-campaign`` (or ``KUBEREFLECTOR_FAULT_SEED=<first seed>
KUBEREFLECTOR_FAULT_SCHEDULES=<count>``) runs a longer campaign; CI runs a few.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from collections.abc import Callable
from typing import Any

import pytest
from handler_views import AsyncView, View, key_of, rv_of

from kubereflector import ApiError, ReflectorOptions, SharedIndexInformer
from kubereflector.client import Client, ResourceListWatch, load_config
from kubereflector.testing import ApiServerEmulator, FakeClock, settle

FIRST_SEED = int(os.environ.get("KUBEREFLECTOR_FAULT_SEED", "0"))
SCHEDULES = int(os.environ.get("KUBEREFLECTOR_FAULT_SCHEDULES", "8"))
OPERATIONS = 30
NAMESPACE = "faults"
NAMES = [f"p{i}" for i in range(6)]
CONVERGE = 20.0
"""Seconds (real time) allowed to converge once the faults stop; a few are used."""

FAILURES = [500, 500, 429, 410, 503, 504, 401]
BAD_RESOURCE_VERSIONS: list[Any] = [{"rv": 1}, 7, 7.5, ["1"], "abc"]


def schedule(seed: int) -> tuple[ReflectorOptions, list[tuple[Any, ...]]]:
    """The informer's knobs and the operations of one schedule (times in the
    schedule's virtual seconds)."""
    rng = random.Random(seed)
    options = ReflectorOptions(
        idle_timeout=5.0,  # the emulator sends a bookmark every second
        min_watch_timeout=rng.choice([3.0, 300.0]),
        page_size=rng.choice([None, 2]),
        use_watch_list=rng.random() < 0.5,
        max_internal_error_retry_duration=rng.choice([0.0, 2.0]),
        backoff_initial=0.1,
        backoff_cap=2.0,
        backoff_reset_after=10.0,
    )
    ops: list[tuple[Any, ...]] = []
    for _ in range(OPERATIONS):
        roll = rng.random()
        if roll < 0.25:
            ops.append(("write", rng.choice(NAMES), rng.choice("xyz")))
        elif roll < 0.32:
            ops.append(("burst", [(rng.choice(NAMES), rng.choice("xyz")) for _ in range(8)]))
        elif roll < 0.37:
            ops.append(("relist_burst", [(rng.choice(NAMES), rng.choice("xy")) for _ in range(6)]))
        elif roll < 0.44:
            ops.append(("drop", rng.random() < 0.5))
        elif roll < 0.48:
            ops.append(("stall",))
        elif roll < 0.52:
            ops.append(("compact",))
        elif roll < 0.60:
            ops.append(("fail", rng.randint(1, 3), rng.choice(FAILURES)))
        elif roll < 0.63:
            ops.append(("restart",))
        elif roll < 0.66:
            ops.append(("corrupt", rng.randint(1, 2), rng.choice(BAD_RESOURCE_VERSIONS)))
        elif roll < 0.68:  # issue 16's livelock: the last event before a re-watch
            ops.append(("corrupt_last", rng.choice(BAD_RESOURCE_VERSIONS), rng.choice(NAMES)))
        elif roll < 0.70:
            ops.append(("slow", rng.choice([0.05, None])))
        else:
            ops.append(("advance", rng.choice([0.05, 0.3, 1.0, 2.5, 6.0])))
    return options, ops


def _write(server: ApiServerEmulator, name: str, label: str) -> None:
    """Create, update (labels ``x``/``y``) or delete (``z``) one pod."""
    try:
        server.get("pods", name, NAMESPACE)
    except ApiError:
        if label != "z":
            body = {"metadata": {"name": name, "labels": {"v": label}}, "spec": {}}
            server.create("pods", body, namespace=NAMESPACE)
        return
    if label == "z":
        server.delete("pods", name, NAMESPACE)
    else:
        server.patch("pods", name, {"metadata": {"labels": {"v": label}}}, namespace=NAMESPACE)


async def _apply(server: ApiServerEmulator, clock: FakeClock, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "write":
        _write(server, op[1], op[2])
    elif kind == "burst":
        for name, label in op[1]:
            _write(server, name, label)
            await asyncio.sleep(0)
    elif kind == "relist_burst":
        server.compact()
        server.drop_watches()  # the re-watch gets a 410: the writes land during the relist
        for name, label in op[1]:
            await asyncio.sleep(0)
            _write(server, name, label)
    elif kind == "drop":
        server.drop_watches(abrupt=op[1])
    elif kind == "stall":
        server.stall_watches()
    elif kind == "compact":
        server.compact()
    elif kind == "fail":
        server.fail_next(op[1], op[2], retry_after=0 if op[2] == 429 else None)
    elif kind == "restart":
        await server.restart()
    elif kind == "corrupt":
        server.corrupt_resource_versions(op[1], op[2])
    elif kind == "corrupt_last":
        server.corrupt_resource_versions(1, op[1])
        _write(server, op[2], "x")
        await settle(20)
        server.drop_watches()
    elif kind == "slow":
        server.slow_streams(op[1])
    elif kind == "advance":
        await clock.advance(op[1])
    await settle(20)  # lets requests and responses cross the loopback


async def _run_schedule(seed: int, errors: list[logging.LogRecord]) -> None:
    options, ops = schedule(seed)
    loop_errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: loop_errors.append(ctx))
    clock = FakeClock()
    async with ApiServerEmulator(history_limit=12, bookmark_interval=1.0, clock=clock) as server:
        server.create("namespaces", {"metadata": {"name": NAMESPACE}})
        for name in NAMES[:3]:
            _write(server, name, "x")
        async with Client(load_config(server.kubeconfig_path)) as client:
            pods = ResourceListWatch(client, "pods", namespace=NAMESPACE)
            informer = SharedIndexInformer(
                pods, expected_kind="Pod", reflector_options=options, clock=clock
            )
            informer.set_watch_error_handler(lambda _r, _e: None)
            views = [View(), AsyncView()]
            for view in views:
                informer.add_event_handler(view)
            task = asyncio.create_task(informer.run())
            try:
                for op in ops:
                    await _apply(server, clock, op)
                # The faults stop, and every object changes once more (one seen with
                # a bad resourceVersion is cached as it was sent until it changes).
                server.reset_faults()
                server.drop_watches()
                touch = {"metadata": {"labels": {"end": "1"}}}
                for name in NAMES:
                    with contextlib.suppress(ApiError):  # deleted
                        server.patch("pods", name, touch, namespace=NAMESPACE)
                _write(server, "last", "x")
                expected = {
                    f"{NAMESPACE}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
                    for o in server.objects("pods", NAMESPACE)
                }
                await _converge(
                    clock, views, lambda: all(v.snapshot()[0] == expected for v in views)
                )
                cached = {key_of(o): rv_of(o) for o in informer.store.list()}
                assert cached == expected
                for view in views:
                    assert view.snapshot() == (expected, [])
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    assert informer.is_stopped()
    assert loop_errors == []
    assert [r.getMessage() for r in errors] == []


async def _converge(clock: FakeClock, views: list[View], done: Callable[[], bool]) -> None:
    """Until ``done()``, for at most CONVERGE real seconds: virtual time moves on
    half a second at a time (past backoffs and stall timers), each step followed
    by a short wait for a change (plain handlers run on threads)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CONVERGE
    while not done() and loop.time() < deadline:
        await clock.advance(0.5)
        await views[0].until(lambda _objects: done(), timeout=0.01)


class _ErrorRecords(logging.Handler):
    """Every record at ERROR or above from the library (the emulator's excluded)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith("kubereflector.testing"):
            self.records.append(record)


@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + SCHEDULES))
def test_an_informer_over_http_converges_whatever_the_server_does(seed: int) -> None:
    handler = _ErrorRecords()
    library = logging.getLogger("kubereflector")
    library.addHandler(handler)
    try:
        asyncio.run(_run_schedule(seed, handler.records))
    except BaseException as err:
        options, ops = schedule(seed)
        raise AssertionError(
            f"fault schedule seed={seed} failed (rerun: KUBEREFLECTOR_FAULT_SEED={seed} "
            f"KUBEREFLECTOR_FAULT_SCHEDULES=1 pytest {__file__})\n"
            f"options: {options}\noperations:\n" + "\n".join(map(repr, ops))
        ) from err
    finally:
        library.removeHandler(handler)
