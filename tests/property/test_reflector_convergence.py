"""Randomized: whatever the source does and whatever fails on the way, the Reflector's
store ends equal to the source.

Hypothesis draws interleavings of writes (some of them missed by the open
watches), watch resets, history compaction, stalls, injected list/watch errors
and the passing of (fake) time. At the end the history expires, the watches are reset and
time runs on until the Reflector has caught up (relisting); then the store must hold exactly
the source's objects at exactly their resourceVersions, and every index must
agree with one recomputed from scratch.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from source_ops import FAULTS, NAMESPACES, apply, end_outage, writes

from kubereflector import (
    NAMESPACE_INDEX,
    Backoff,
    Reflector,
    ReflectorOptions,
    meta_namespace_index_func,
    new_indexer,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle

NAMES = [f"pod-{i}" for i in range(6)]

fault = st.sampled_from([*FAULTS, ("fail_list", "410")])
tick = st.tuples(st.just("advance"), st.sampled_from([0.5, 1.0, 5.0, 30.0, 61.0]))
write = writes(NAMES)
operations = st.lists(st.one_of(write, write, fault, tick), max_size=40)


def _by_label(obj: Any) -> list[str]:
    return [obj["metadata"]["labels"]["app"]]


async def _scenario(ops: list[tuple[Any, ...]], use_watch_list: bool) -> None:
    loop_errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: loop_errors.append(ctx))
    clock = FakeClock()
    source = FakeControllerSource(history_limit=8, bookmark_interval=20, clock=clock)
    store = new_indexer(indexers={NAMESPACE_INDEX: meta_namespace_index_func, "app": _by_label})
    reflector = Reflector(
        source,
        store,
        clock=clock,
        backoff=Backoff(clock=clock, random=lambda: 0.5),
        options=ReflectorOptions(use_watch_list=use_watch_list, idle_timeout=60),
        on_watch_error=lambda _r, _e: None,
    )
    task = asyncio.create_task(reflector.run())
    await settle()
    for op in ops:
        await apply(source, clock, op)
        await settle(5)

    # Catch up: the outage ends, and time runs on until the Reflector has relisted.
    end_outage(source)
    deadline = clock.now() + 600  # past any backoff, stall and Retry-After drawn above
    while clock.now() < deadline and not _caught_up(store, source, reflector):
        await clock.advance(10)
    try:
        expected = {obj_key(o): o["metadata"]["resourceVersion"] for o in source.list_objects()}
        actual = {key: obj["metadata"]["resourceVersion"] for key, obj in _items(store)}
        assert actual == expected
        for value in NAMESPACES:
            assert sorted(store.index_keys(NAMESPACE_INDEX, value)) == sorted(
                k for k in expected if k.startswith(f"{value}/")
            )
        for label in ("x", "y"):
            assert sorted(store.index_keys("app", label)) == sorted(
                k for k, o in _items(store) if o["metadata"]["labels"]["app"] == label
            )
        assert reflector.last_sync_resource_version == source.resource_version
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert source.open_watches == 0
    assert loop_errors == []


def _caught_up(store: Any, source: FakeControllerSource, reflector: Reflector) -> bool:
    if reflector.last_sync_resource_version != source.resource_version:
        return False
    expected = {obj_key(o): o["metadata"]["resourceVersion"] for o in source.list_objects()}
    return {k: o["metadata"]["resourceVersion"] for k, o in _items(store)} == expected


def obj_key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def _items(store: Any) -> list[tuple[str, Any]]:
    return [(key, store.get_by_key(key)) for key in store.list_keys()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, use_watch_list=st.booleans())
def test_store_converges_to_the_source(ops: list[tuple[Any, ...]], use_watch_list: bool) -> None:
    asyncio.run(_scenario(ops, use_watch_list))
