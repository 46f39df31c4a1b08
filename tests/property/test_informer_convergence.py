"""Randomized: whatever the source does, whatever fails, and whenever handlers come
and go, the informer's cache and every handler's view of it converge to the source.

Hypothesis draws interleavings of writes (some missed by the open watches), watch
resets, history compaction, stalls, injected list/watch errors, the passing of
(fake) time, and handlers added (from the loop or from another thread) or removed
while all that happens. Each handler rebuilds the cache from its notifications
and checks every step as it goes: an add for a key it already holds, an update
whose old object is not the one it holds, or a delete of a key it does not hold
would mean an event lost or doubled. One exception is client-go's own: with the
RealFIFO every watched delete is handed on, so when the add was missed (and the
next list has not repaired it yet) a handler hears a delete of a key it never
held; the DeltaFIFO drops such a delete, since its known objects lack the key.
At the end the history expires and time runs on until the informer has caught
up; then the cache and every remaining handler's view must hold exactly the
source's objects at their resourceVersions.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from handler_views import AsyncView, View, key_of, rv_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from source_ops import FAULTS, NAMESPACES, apply, end_outage, pod, writes

from kubereflector import Registration, SharedIndexInformer
from kubereflector.testing import FakeClock, FakeControllerSource, settle

WAIT = 20.0
NAMES = [f"pod-{i}" for i in range(5)]

fault = st.sampled_from(FAULTS)
tick = st.tuples(st.just("advance"), st.sampled_from([0.5, 1.0, 5.0, 30.0]))
handlers = st.one_of(
    st.tuples(
        st.just("add_handler"),
        st.sampled_from(["plain", "async"]),
        st.sampled_from([None, 0, 2]),
        st.booleans(),
    ),
    st.tuples(st.just("remove_handler"), st.integers(0, 5)),
)
write = writes(NAMES)
operations = st.lists(st.one_of(write, write, fault, tick, handlers), max_size=40)


async def _scenario(
    ops: list[tuple[Any, ...]], queue: str, default_resync: float, initial: int
) -> None:
    loop_errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: loop_errors.append(ctx))
    clock = FakeClock()
    source = FakeControllerSource(history_limit=8, bookmark_interval=20, clock=clock)
    for i in range(initial):
        source.add(pod(NAMESPACES[i % 2], NAMES[i], "x"))
    informer = SharedIndexInformer(
        source,
        clock=clock,
        default_resync=default_resync,
        queue="delta" if queue == "delta" else "real",
    )
    informer.set_watch_error_handler(lambda _r, _e: None)
    views: dict[Registration, View] = {}
    unheld = queue == "real"
    for view in (View(unheld_deletes=unheld), AsyncView(unheld_deletes=unheld)):
        views[informer.add_event_handler(view)] = view
    removed: list[View] = []
    task = asyncio.create_task(informer.run())
    await settle()
    try:
        for op in ops:
            kind = op[0]
            if kind == "add_handler":
                _, flavour, resync, from_thread = op
                view = (View if flavour == "plain" else AsyncView)(unheld_deletes=unheld)
                if from_thread:
                    registration = await asyncio.to_thread(informer.add_event_handler, view, resync)
                else:
                    registration = informer.add_event_handler(view, resync)
                views[registration] = view
            elif kind == "remove_handler":
                if views:
                    registration = list(views)[op[1] % len(views)]
                    informer.remove_event_handler(registration)
                    removed.append(views.pop(registration))
            else:
                await apply(source, clock, op)
            await settle(5)

        # Catch up (a stalled watch is given up by the idle watchdog).
        end_outage(source)
        for _ in range(20):
            await clock.advance(10)
        # A sentinel written last: once a handler holds it, it has handled
        # everything before it.
        source.add(pod("z", "sentinel", "x"))
        await settle()
        for view in views.values():
            held = await view.until(lambda objects: "z/sentinel" in objects, WAIT)
            assert held, "the sentinel never reached the handler"

        expected = {key_of(o): rv_of(o) for o in source.list_objects()}
        cached = {key_of(o): rv_of(o) for o in informer.store.list()}
        assert cached == expected
        for registration, view in views.items():
            assert view.snapshot() == (expected, []), registration
            assert registration.has_synced()
        for view in removed:
            assert view.snapshot()[1] == []
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert informer.is_stopped()
    assert source.open_watches == 0
    assert loop_errors == []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=operations,
    queue=st.sampled_from(["real", "delta"]),
    default_resync=st.sampled_from([0, 3]),
    initial=st.integers(0, 4),
)
def test_cache_and_handlers_converge_to_the_source(
    ops: list[tuple[Any, ...]], queue: str, default_resync: float, initial: int
) -> None:
    asyncio.run(_scenario(ops, queue, default_resync, initial))
