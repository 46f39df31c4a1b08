"""SharedIndexInformer: handlers, resync, late joins, removal, sync tracking, stats.

The behaviours of client-go's ``shared_informer_test.go``, staged on a
FakeControllerSource and a FakeClock. Plain handlers run on worker threads: the
tests wait for what they record through a threading.Condition with a timeout,
and prove that something did *not* happen by event order (a sentinel object
added afterwards reaches every handler after anything that came before it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any, Literal

import pytest

from kubereflector import (
    NAMESPACE_INDEX,
    AlreadyStartedError,
    DeletedFinalStateUnknown,
    ForbiddenError,
    InformerStoppedError,
    Reflector,
    Registration,
    ResourceEventHandlerDetailedFuncs,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    meta_namespace_index_func,
    wait_for_cache_sync,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle
from running_task import running

pytestmark = pytest.mark.asyncio

WAIT = 10.0
"""Upper bound (seconds) on waiting for a worker thread; never reached when things work."""

Event = tuple[Any, ...]


def pod(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta}


def key(obj: Any) -> str:
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def rv(obj: Any) -> str:
    return str(obj["metadata"]["resourceVersion"])


class Recorder:
    """A plain-function handler recording what it gets, thread-safely.

    ``gate``: when given, the handler waits on it before handling anything
    (a stuck or slow handler); ``fail_on``: keys whose notifications raise.
    """

    def __init__(
        self, gate: threading.Event | None = None, fail_on: frozenset[str] = frozenset()
    ) -> None:
        self.events: list[Event] = []
        self.threads: set[int] = set()
        self.gate = gate
        self.fail_on = fail_on
        self.entered = threading.Event()
        self._cond = threading.Condition()

    def _record(self, event: Event) -> None:
        self.entered.set()
        if self.gate is not None and not self.gate.wait(WAIT):
            raise AssertionError("the gate was never opened")
        with self._cond:
            self.events.append(event)
            self.threads.add(threading.get_ident())
            self._cond.notify_all()
        if event[1] in self.fail_on:
            raise RuntimeError(f"handler failure on {event[1]}")

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._record(("add", key(obj), is_in_initial_list))

    def on_update(self, old: Any, new: Any) -> None:
        self._record(("update", key(new), rv(old), rv(new)))

    def on_delete(self, obj: Any) -> None:
        self._record(("delete", key(obj), type(obj).__name__))

    def snapshot(self) -> list[Event]:
        with self._cond:
            return list(self.events)

    async def wait_until(self, predicate: Callable[[list[Event]], bool]) -> list[Event]:
        def wait() -> bool:
            with self._cond:
                return self._cond.wait_for(lambda: predicate(self.events), WAIT)

        if not await asyncio.to_thread(wait):
            raise AssertionError(f"condition never met; events: {self.snapshot()}")
        return self.snapshot()

    async def wait_for(self, count: int) -> list[Event]:
        return await self.wait_until(lambda events: len(events) >= count)


class AsyncRecorder(Recorder):
    """The same, with coroutine methods (run on the event loop)."""

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        super().on_add(obj, is_in_initial_list)

    async def on_update(self, old: Any, new: Any) -> None:  # type: ignore[override]
        super().on_update(old, new)

    async def on_delete(self, obj: Any) -> None:  # type: ignore[override]
        super().on_delete(obj)


def after(events: list[Event], sentinel: str) -> list[Event]:
    """The events before the add of ``sentinel`` (which must be there)."""
    marker = ("add", f"default/{sentinel}", False)
    return events[: events.index(marker)]


async def barrier(source: FakeControllerSource, name: str, *recorders: Recorder) -> None:
    """Add a sentinel object and wait until every recorder has seen it: whatever
    was sent to them before has then been handled."""
    source.add(pod(name))
    marker = ("add", f"default/{name}", False)
    for recorder in recorders:
        await recorder.wait_until(lambda events: marker in events)


def setup(
    *names: str, **kwargs: Any
) -> tuple[SharedIndexInformer, FakeControllerSource, FakeClock]:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    for name in names:
        source.add(pod(name))
    informer = SharedIndexInformer(source, clock=clock, **kwargs)
    return informer, source, clock


# -- notifications ------------------------------------------------------------------------


async def test_every_handler_gets_every_change_in_order() -> None:
    informer, source, _ = setup("a", "b")
    plain, coro = Recorder(), AsyncRecorder()
    informer.add_event_handler(plain)
    informer.add_event_handler(coro)
    async with running(informer):
        source.modify(pod("a", v="1"))
        source.delete(pod("b"))
        await settle()
        for recorder in (plain, coro):
            assert await recorder.wait_for(4) == [
                ("add", "default/a", True),
                ("add", "default/b", True),
                ("update", "default/a", "1", "3"),
                ("delete", "default/b", "dict"),
            ]
    assert threading.get_ident() not in plain.threads
    assert coro.threads == {threading.get_ident()}


async def test_each_plain_handler_has_a_thread_of_its_own() -> None:
    informer, _source, _ = setup("a")
    first, second = Recorder(), Recorder()
    informer.add_event_handler(first)
    informer.add_event_handler(second)
    async with running(informer):
        await first.wait_for(1)
        await second.wait_for(1)
    assert len(first.threads) == len(second.threads) == 1
    assert first.threads != second.threads


async def test_handlers_with_different_resync_periods() -> None:
    informer, source, clock = setup("a", "b", default_resync=1)
    never, every2, every3 = Recorder(), Recorder(), Recorder()
    informer.add_event_handler(never, resync_period=0)
    informer.add_event_handler(every2, resync_period=2)
    informer.add_event_handler(every3, resync_period=3)
    recorders = (never, every2, every3)
    resyncs = [("update", "default/a", "1", "1"), ("update", "default/b", "2", "2")]
    async with running(informer):
        await barrier(source, "s0", *recorders)
        await clock.advance(1)  # a check, but nobody is due
        await barrier(source, "s1", *recorders)
        await clock.advance(1)  # t=2: every2 is due
        await barrier(source, "s2", *recorders)
        await clock.advance(1)  # t=3: every3 is due
        await barrier(source, "s3", *recorders)

    def between(events: list[Event], start: str, end: str) -> list[Event]:
        begin = events.index(("add", f"default/{start}", False)) + 1
        return events[begin : events.index(("add", f"default/{end}", False))]

    for recorder in recorders:
        events = recorder.snapshot()
        assert events[:2] == [("add", "default/a", True), ("add", "default/b", True)]
        assert between(events, "s0", "s1") == []
    # The resync covers the objects cached when it is queued (sentinels included).
    assert between(never.snapshot(), "s1", "s2") == []
    assert sorted(between(every2.snapshot(), "s1", "s2"))[:2] == resyncs
    assert between(every3.snapshot(), "s1", "s2") == []
    assert between(never.snapshot(), "s2", "s3") == []
    assert between(every2.snapshot(), "s2", "s3") == []
    assert sorted(between(every3.snapshot(), "s2", "s3"))[:2] == resyncs


async def test_resync_check_period_follows_the_handlers() -> None:
    informer, _, _clock = setup(default_resync=12 * 3600)
    h1 = informer.add_event_handler(Recorder(), resync_period=0)
    assert h1.resync_period == 0
    h2 = informer.add_event_handler(Recorder(), resync_period=60)
    assert (h1.resync_period, h2.resync_period) == (0, 60)
    h3 = informer.add_event_handler(Recorder(), resync_period=55)
    assert (h1.resync_period, h2.resync_period, h3.resync_period) == (0, 60, 55)
    h4 = informer.add_event_handler(Recorder(), resync_period=5)
    periods = [h.resync_period for h in (h1, h2, h3, h4)]
    assert periods == [0, 60, 55, 5]
    tiny = informer.add_event_handler(Recorder(), resync_period=0.01)
    assert tiny.resync_period == 1  # the minimum
    default = informer.add_event_handler(Recorder())
    assert default.resync_period == 12 * 3600
    async with running(informer):
        late = informer.add_event_handler(Recorder(), resync_period=2)
        assert late.resync_period == 2
        shorter = informer.add_event_handler(Recorder(), resync_period=0.5)
        assert shorter.resync_period == 1  # raised to the check period once started


async def test_a_relist_re_announces_unchanged_objects_only_to_handlers_in_the_resync() -> None:
    informer, source, clock = setup("a", "b", default_resync=10)
    never, resyncing = Recorder(), Recorder()
    informer.add_event_handler(never, resync_period=0)
    informer.add_event_handler(resyncing)
    async with running(informer):
        await clock.advance(10)  # the first check: only `resyncing` is due
        await barrier(source, "s0", never, resyncing)
        source.modify_drop_watch(pod("a", v="1"))  # seen only by the relist
        source.compact()
        source.reset_watch()
        await clock.advance(5)  # past the backoff: relist
        await barrier(source, "s1", never, resyncing)

    def since_s0(recorder: Recorder) -> list[Event]:
        events = after(recorder.snapshot(), "s1")
        return sorted(events[events.index(("add", "default/s0", False)) + 1 :])

    assert since_s0(never) == [("update", "default/a", "1", "4")]
    assert since_s0(resyncing) == [
        ("update", "default/a", "1", "4"),
        ("update", "default/b", "2", "2"),
        ("update", "default/s0", "3", "3"),
    ]


async def test_an_informer_without_a_resync_period_never_resyncs() -> None:
    informer, source, clock = setup("a")
    recorder = Recorder()
    registration = informer.add_event_handler(recorder, resync_period=10)
    assert registration.resync_period == 0
    async with running(informer):
        await clock.advance(30)
        await barrier(source, "s", recorder)
    assert after(recorder.snapshot(), "s") == [("add", "default/a", True)]


async def test_a_late_handler_gets_the_cache_once_then_the_changes() -> None:
    informer, source, _ = setup("a", "b")
    early = Recorder()
    informer.add_event_handler(early)
    async with running(informer):
        assert await wait_for_cache_sync(informer)
        source.modify(pod("a", v="1"))
        await settle()
        late = Recorder()
        registration = informer.add_event_handler(late)
        source.add(pod("c"))
        source.delete(pod("b"))
        await settle()
        events = await late.wait_for(4)
        assert sorted(events[:2]) == [("add", "default/a", True), ("add", "default/b", True)]
        assert events[2:] == [("add", "default/c", False), ("delete", "default/b", "dict")]
        assert await wait_for_cache_sync(registration)
        await barrier(source, "s", early, late)
    assert len(late.snapshot()) == 5


async def test_a_late_registration_has_synced_once_its_replay_is_handled() -> None:
    informer, _, _ = setup("a", "b")
    async with running(informer):
        assert informer.has_synced()
        gate = threading.Event()
        late = Recorder(gate=gate)
        registration = informer.add_event_handler(late)
        assert await asyncio.to_thread(late.entered.wait, WAIT)
        assert not registration.has_synced()
        waiting = asyncio.create_task(wait_for_cache_sync(registration))
        await settle()
        assert not waiting.done()
        gate.set()
        assert await asyncio.wait_for(waiting, WAIT) is True
        assert len(late.snapshot()) == 2


class Mirror:
    """A handler rebuilding the cache from its notifications, noting any step that
    shows a lost or doubled event."""

    def __init__(self) -> None:
        self.objects: dict[str, str] = {}
        self.violations: list[str] = []
        self._cond = threading.Condition()

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        with self._cond:
            if key(obj) in self.objects:
                self.violations.append(f"doubled add of {key(obj)}")
            self.objects[key(obj)] = rv(obj)
            self._cond.notify_all()

    def on_update(self, old: Any, new: Any) -> None:
        with self._cond:
            if self.objects.get(key(new)) != rv(old):
                self.violations.append(f"update of {key(new)} from {rv(old)}: lost an event")
            self.objects[key(new)] = rv(new)

    def on_delete(self, obj: Any) -> None:
        with self._cond:
            if self.objects.pop(key(obj), None) is None:
                self.violations.append(f"delete of {key(obj)}, never added")

    async def wait_for_key(self, wanted: str) -> None:
        def wait() -> bool:
            with self._cond:
                return self._cond.wait_for(lambda: wanted in self.objects, WAIT)

        assert await asyncio.to_thread(wait), f"{wanted} never reached the handler"


async def test_handlers_added_from_other_threads_while_events_flow_miss_nothing() -> None:
    informer, source, _ = setup(*(f"p{i}" for i in range(20)))
    witness = Recorder()
    informer.add_event_handler(witness)
    mirrors = [Mirror() for _ in range(64)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        async with running(informer):

            async def write() -> None:
                for i in range(400):
                    name = f"p{i % 40}"
                    if source.get(f"default/{name}") is None:
                        source.add(pod(name))
                    else:
                        source.modify(pod(name, v=str(i)))
                    await asyncio.sleep(0)

            writer = asyncio.create_task(write())
            registrations = await asyncio.gather(
                *(asyncio.to_thread(informer.add_event_handler, m) for m in mirrors)
            )
            await writer
            await barrier(source, "s", witness)
            assert await wait_for_cache_sync(*registrations, timeout=WAIT)
            expected = {key(o): rv(o) for o in informer.store.list()}
            for registration, mirror in zip(registrations, mirrors, strict=True):
                # The sentinel is the last change: handled, so is everything before.
                await mirror.wait_for_key("default/s")
                assert mirror.violations == []
                assert mirror.objects == expected
                assert registration.has_synced()
    finally:
        sys.setswitchinterval(interval)


async def test_removal_stops_delivery_and_drops_what_is_pending() -> None:
    informer, source, _ = setup("a")
    gate = threading.Event()
    stuck, other = Recorder(gate=gate), Recorder()
    registration = informer.add_event_handler(stuck)
    informer.add_event_handler(other)
    async with running(informer):
        assert await asyncio.to_thread(stuck.entered.wait, WAIT)
        for name in ("b", "c", "d"):
            source.add(pod(name))
        await settle()
        assert registration.pending == 3
        informer.remove_event_handler(registration)
        assert registration.is_removed()
        assert registration.pending == 0
        gate.set()
        source.add(pod("e"))
        await barrier(source, "s", other)
        assert len(informer.stats().handlers) == 1
    assert stuck.snapshot() == [("add", "default/a", True)]
    assert len(other.snapshot()) == 6
    with pytest.raises(ValueError, match="not registered"):
        informer.remove_event_handler(registration)


async def test_removing_a_registration_of_another_informer_is_an_error() -> None:
    first, _, _ = setup()
    second, _, _ = setup()
    registration = first.add_event_handler(Recorder())
    with pytest.raises(ValueError, match="not registered"):
        second.remove_event_handler(registration)


async def test_each_registration_has_synced_on_its_own() -> None:
    informer, _source, clock = setup("a", "b")
    gate = threading.Event()
    slow, fast = Recorder(gate=gate), Recorder()
    slow_registration = informer.add_event_handler(slow)
    fast_registration = informer.add_event_handler(fast)
    assert not slow_registration.has_synced()
    async with running(informer):
        assert informer.has_synced()
        assert await wait_for_cache_sync(informer, fast_registration)
        assert not slow_registration.has_synced()
        waiting = asyncio.create_task(
            wait_for_cache_sync(slow_registration, timeout=5, clock=clock)
        )
        await settle()
        assert not waiting.done()
        await clock.advance(5)
        assert waiting.done()
        assert waiting.result() is False
        waiting = asyncio.create_task(wait_for_cache_sync(informer, slow_registration))
        await settle()
        assert not waiting.done()
        gate.set()
        assert await asyncio.wait_for(waiting, WAIT) is True
        assert slow_registration.has_synced()


async def test_a_slow_handler_does_not_delay_the_others() -> None:
    informer, source, _ = setup()
    gate = threading.Event()
    slow, fast = Recorder(gate=gate), Recorder()
    informer.add_event_handler(slow)
    informer.add_event_handler(fast)
    async with running(informer):
        for i in range(6):
            source.add(pod(f"p{i}"))
        await settle()
        assert await asyncio.to_thread(slow.entered.wait, WAIT)
        fast_events = await fast.wait_for(6)
        assert slow.snapshot() == []  # stuck in its first notification
        assert informer.stats().handlers[0].pending == 5
        gate.set()
        assert await slow.wait_for(6) == fast_events


@pytest.mark.parametrize("recorder_type", [Recorder, AsyncRecorder])
async def test_a_raising_handler_is_logged_and_keeps_going(
    recorder_type: type[Recorder], caplog: pytest.LogCaptureFixture
) -> None:
    informer, source, _ = setup("a")
    failing = recorder_type(fail_on=frozenset({"default/bad"}))
    other = Recorder()
    informer.add_event_handler(failing)
    informer.add_event_handler(other)
    with caplog.at_level(logging.ERROR, logger="kubereflector.shared_informer"):
        async with running(informer):
            source.add(pod("bad"))
            source.modify(pod("bad", v="1"))
            source.add(pod("good"))
            await barrier(source, "s", failing, other)
            stats = informer.stats()
    assert [e[:2] for e in failing.snapshot()] == [e[:2] for e in other.snapshot()]
    assert len(failing.snapshot()) == 5
    assert stats.handlers[0].failures == 2
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "'default/bad'" in messages[0]
    assert "add" in messages[0]
    assert "update" in messages[1]
    assert all(r.exc_info is not None for r in caplog.records)


@pytest.mark.parametrize("queue", ["real", "delta"])
async def test_a_relist_that_missed_a_delete_reaches_on_delete_as_a_tombstone(
    queue: Literal["real", "delta"],
) -> None:
    informer, source, clock = setup("a", "b", queue=queue)
    recorder = Recorder()
    informer.add_event_handler(recorder)
    assert informer.full_syncs() == 0
    async with running(informer):
        await recorder.wait_for(2)
        assert informer.full_syncs() == 1
        last_a = informer.store.get_by_key("default/a")
        source.delete_drop_watch(pod("a"))
        source.compact()  # the watch's history is gone: the next watch gets 410
        source.reset_watch()
        await clock.advance(5)  # past the backoff before the relist
        await barrier(source, "s", recorder)
        # The relist also re-announces b, unchanged: with no resync configured,
        # every handler takes part in "resyncs" (as in client-go).
        assert sorted(after(recorder.snapshot(), "s")[2:]) == [
            ("delete", "default/a", "DeletedFinalStateUnknown"),
            ("update", "default/b", "2", "2"),
        ]
        assert sorted(informer.store.list_keys()) == ["default/b", "default/s"]
        assert informer.stats().relists == 1
        assert informer.full_syncs() == informer.stats().lists == 2
    assert last_a is not None


class StoreWitness(Recorder):
    """A Recorder that also notes, as each notification arrives, the cache's keys
    and the resourceVersion it holds for ``watched``."""

    def __init__(self, informer: SharedIndexInformer, watched: str) -> None:
        super().__init__()
        self.informer = informer
        self.watched = watched
        self.cache_seen: list[tuple[list[str], str | None]] = []

    def _record(self, event: Event) -> None:
        store = self.informer.store
        obj = store.get_by_key(self.watched)
        self.cache_seen.append((sorted(store.list_keys()), None if obj is None else rv(obj)))
        super()._record(event)


class AsyncStoreWitness(StoreWitness):
    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:  # type: ignore[override]
        super().on_add(obj, is_in_initial_list)

    async def on_update(self, old: Any, new: Any) -> None:  # type: ignore[override]
        super().on_update(old, new)

    async def on_delete(self, obj: Any) -> None:  # type: ignore[override]
        super().on_delete(obj)


@pytest.mark.parametrize("kind", ["def", "async def"])
async def test_a_relist_is_atomic_the_cache_holds_the_new_list_before_any_notification(
    kind: str,
) -> None:
    # More objects than a pop batch holds (1,000), the changes at the end of the
    # list: a relist queued per object would reach the handlers while the cache
    # still held the old end of the list.
    fillers = [f"f{i:04}" for i in range(1_200)]
    informer, source, clock = setup("b", *fillers, "y")
    witness = (AsyncStoreWitness if kind == "async def" else StoreWitness)(informer, "default/y")
    informer.add_event_handler(witness)
    async with running(informer):
        first = len(fillers) + 2
        await witness.wait_for(first)
        source.delete_drop_watch(pod("b"))
        source.modify_drop_watch(pod("y", v="2"))
        source.add_drop_watch(pod("z"))
        source.compact()
        source.reset_watch()
        await clock.advance(5)  # past the backoff: relist
        await barrier(source, "s", witness)
        events = witness.snapshot()
        relist = events[first : events.index(("add", "default/s", False))]
        # Deletions first, then the list in its order (client-go's processReplacedAllInfo).
        assert relist == [
            ("delete", "default/b", "DeletedFinalStateUnknown"),
            *[("update", f"default/{f}", str(i + 2), str(i + 2)) for i, f in enumerate(fillers)],
            ("update", "default/y", "1202", "1204"),
            ("add", "default/z", False),
        ]
        new_keys = sorted([f"default/{f}" for f in fillers] + ["default/y", "default/z"])
        # (The sentinel may have arrived by the time a handler runs: the cache is
        # at least as fresh as the notification.)
        seen = witness.cache_seen[first : first + len(relist)]
        assert all(
            ([k for k in keys if k != "default/s"], y_rv) == (new_keys, "1204")
            for keys, y_rv in seen
        )
        assert informer.stats().relists == 1


async def test_the_tombstone_carries_the_last_known_object() -> None:
    informer, source, clock = setup("a")
    tombstones: list[Any] = []
    done = threading.Event()

    def on_delete(obj: Any) -> None:
        tombstones.append(obj)
        done.set()

    informer.add_event_handler(ResourceEventHandlerFuncs(on_delete=on_delete))
    async with running(informer):
        cached = informer.store.get_by_key("default/a")
        source.delete_drop_watch(pod("a"))
        source.compact()
        source.reset_watch()
        await clock.advance(5)
        assert await asyncio.to_thread(done.wait, WAIT)
    (tombstone,) = tombstones
    assert tombstone == DeletedFinalStateUnknown("default/a", cached)
    assert tombstone.obj is cached


async def test_the_transform_is_applied_once_before_anyone_sees_an_object() -> None:
    informer, source, _ = setup("a", "b")
    raw_seen: list[str] = []

    def transform(obj: Any) -> Any:
        if obj.get("transformed"):
            return obj  # idempotent (a watch-list's initial objects come back)
        raw_seen.append(f"{key(obj)}@{rv(obj)}")
        return {**obj, "transformed": True}

    informer.set_transform(transform)
    seen: list[Any] = []
    done = threading.Event()

    def on_update(old: Any, new: Any) -> None:
        seen.extend((old, new))
        done.set()

    informer.add_event_handler(
        ResourceEventHandlerFuncs(on_add=seen.append, on_update=on_update, on_delete=seen.append)
    )
    async with running(informer):
        source.modify(pod("a", v="1"))
        await settle()
        assert await asyncio.to_thread(done.wait, WAIT)
        cached = informer.store.list()
    assert sorted(raw_seen) == ["default/a@1", "default/a@3", "default/b@2"]
    assert all(obj["transformed"] for obj in seen + cached)
    assert any(obj is new for obj in cached for new in seen[-1:])


async def test_indexers_are_usable_through_the_lister() -> None:
    def by_app(obj: Any) -> list[str]:
        return [obj["metadata"].get("labels", {}).get("app", "")]

    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a", "ns1", app="web", tier="front"))
    source.add(pod("b", "ns1", app="db"))
    source.add(pod("c", "ns2", app="web"))
    informer = SharedIndexInformer(
        source, clock=clock, indexers={NAMESPACE_INDEX: meta_namespace_index_func}
    )
    informer.add_indexers({"app": by_app})
    async with running(informer):
        lister = informer.lister
        assert sorted(key(o) for o in lister.by_index("app", "web")) == ["ns1/a", "ns2/c"]
        assert [key(o) for o in lister.namespaced("ns1").list("app=web")] == ["ns1/a"]
        assert lister.namespaced("ns2").get("c") is informer.store.get_by_key("ns2/c")
        # An index added after the start covers what is cached at once...
        informer.add_indexers({"tier": lambda o: [o["metadata"].get("labels", {}).get("tier", "")]})
        assert [key(o) for o in lister.by_index("tier", "front")] == ["ns1/a"]
        # ... and what comes later.
        source.add(pod("d", "ns2", app="web", tier="front"))
        await settle()
        assert sorted(key(o) for o in lister.by_index("tier", "front")) == ["ns1/a", "ns2/d"]
        assert sorted(key(o) for o in lister.list("app=web")) == ["ns1/a", "ns2/c", "ns2/d"]
    assert informer.lister is lister


# -- lifecycle ------------------------------------------------------------------------


async def test_settings_that_must_come_before_the_start() -> None:
    informer, _, _ = setup()
    async with running(informer):
        with pytest.raises(AlreadyStartedError):
            informer.set_transform(lambda o: o)
        with pytest.raises(AlreadyStartedError):
            informer.set_watch_error_handler(lambda r, e: None)


async def test_the_watch_error_handler_gets_the_errors() -> None:
    informer, source, _ = setup("a")
    errors: list[BaseException] = []
    got_one = asyncio.Event()

    def on_error(reflector: Reflector, err: BaseException) -> None:
        errors.append(err)
        got_one.set()

    informer.set_watch_error_handler(on_error)
    source.fail_next_watch(ForbiddenError(403, "Forbidden", "access denied"))
    source.fail_next_list(ForbiddenError(403, "Forbidden", "access denied"))
    async with running(informer):
        await asyncio.wait_for(got_one.wait(), WAIT)
        assert not informer.has_synced()
    assert "access denied" in str(errors[0])


async def test_run_once_then_stopped_for_good() -> None:
    informer, source, _ = setup("a")
    assert not informer.has_started()
    async with running(informer):
        assert informer.has_started()
        assert source.open_watches == 1
        with pytest.raises(AlreadyStartedError, match="already running"):
            await informer.run()
        assert not informer.is_stopped()
    assert informer.is_stopped()
    assert source.open_watches == 0
    assert informer.has_synced()
    with pytest.raises(AlreadyStartedError, match="cannot be restarted"):
        await informer.run()
    with pytest.raises(InformerStoppedError):
        informer.add_event_handler(Recorder())
    with pytest.raises(InformerStoppedError):
        informer.add_indexers({"x": lambda o: []})


async def test_stopping_cancels_coroutine_handlers_and_waits_for_plain_ones() -> None:
    informer, _source, _ = setup("a")
    cancelled = asyncio.Event()
    entered = asyncio.Event()

    async def on_add(obj: Any) -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    gate = threading.Event()
    plain = Recorder(gate=gate)
    informer.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add))
    informer.add_event_handler(plain)
    task = asyncio.create_task(informer.run())
    await entered.wait()
    assert await asyncio.to_thread(plain.entered.wait, WAIT)
    task.cancel()
    await settle()
    assert cancelled.is_set()
    assert not task.done()  # the plain handler is still in its notification
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT)
    assert informer.is_stopped()
    assert plain.snapshot() == [("add", "default/a", True)]


async def test_stopping_cancels_the_coroutine_method_of_a_mixed_handler() -> None:
    """A handler with plain and coroutine methods has a worker thread that waits
    for its coroutines on the loop: stopping cancels the one in flight."""
    informer, _, _ = setup("a")
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    class Mixed:
        async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
            entered.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

        def on_update(self, old: Any, new: Any) -> None:
            pass

        def on_delete(self, obj: Any) -> None:
            pass

    informer.add_event_handler(Mixed())
    task = asyncio.create_task(informer.run())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT)
    assert cancelled.is_set()
    assert informer.is_stopped()


@pytest.mark.parametrize("consumer", ["task", "thread"])
async def test_a_cancelled_error_of_the_handler_own_is_a_failure_not_a_stop(
    consumer: str,
) -> None:
    """A coroutine handler that raises CancelledError by itself (it awaited a future
    someone else cancelled) failed on that object; its consumer goes on, on every
    Python (3.10 has no Task.cancelling() to tell this from a stop)."""
    informer, source, _ = setup()
    seen: list[str] = []
    got_good = asyncio.Event()

    async def add(obj: Any, is_in_initial_list: bool) -> None:
        seen.append(obj["metadata"]["name"])
        if obj["metadata"]["name"] == "bad":
            cancelled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            cancelled.cancel()
            await cancelled
        got_good.set()

    class Mixed:  # a plain method too: the coroutine runs for a worker thread
        on_add = staticmethod(add)

        def on_update(self, old: Any, new: Any) -> None:
            pass

        def on_delete(self, obj: Any) -> None:
            pass

    handler = Mixed() if consumer == "thread" else ResourceEventHandlerDetailedFuncs(on_add=add)
    informer.add_event_handler(handler)
    async with running(informer):
        source.add({"kind": "Pod", "metadata": {"name": "bad", "namespace": "default"}})
        source.add({"kind": "Pod", "metadata": {"name": "good", "namespace": "default"}})
        await asyncio.wait_for(got_good.wait(), WAIT)
    (stats,) = informer.stats().handlers  # final: the informer stopped
    assert seen == ["bad", "good"]
    assert (stats.failures, stats.delivered, stats.pending) == (1, 1, 0)


async def test_wait_for_cache_sync_gives_up_when_the_informer_stops_first() -> None:
    informer, source, _ = setup("a")
    source.fail_next_watch(ForbiddenError(403, "Forbidden", "no"))
    source.fail_next_list(ForbiddenError(403, "Forbidden", "no"), times=10)
    registration = informer.add_event_handler(Recorder())
    informer.set_watch_error_handler(lambda r, e: None)
    waiting = asyncio.create_task(wait_for_cache_sync(informer, registration))
    async with running(informer):
        assert not waiting.done()
    assert await asyncio.wait_for(waiting, WAIT) is False


async def test_wait_for_cache_sync_refuses_what_cannot_sync() -> None:
    with pytest.raises(TypeError, match="str"):
        await wait_for_cache_sync("informer")  # type: ignore[arg-type]
    assert await wait_for_cache_sync() is True


async def test_stats_report_the_cache_the_reflector_and_each_handler() -> None:
    informer, source, clock = setup("a", "b")
    gate = threading.Event()
    slow = Recorder(gate=gate)
    informer.add_event_handler(slow)
    fast = Recorder()
    informer.add_event_handler(fast)
    before = informer.stats()
    assert (before.objects, before.deltas, before.lists, before.last_event_at) == (0, 0, 0, None)
    assert before.pending == 0
    async with running(informer):
        await clock.advance(7)
        source.add(pod("c"))
        await fast.wait_for(3)
        assert await asyncio.to_thread(slow.entered.wait, WAIT)  # the first in hand
        stats = informer.stats()
        gate.set()
    assert stats.objects == 3
    assert stats.deltas == 3
    assert stats.lists == 1
    assert stats.relists == 0
    assert stats.events >= 3
    assert stats.last_event_at == 7
    assert stats.last_sync_resource_version == "3"
    slow_stats, fast_stats = stats.handlers
    assert slow_stats.pending == 2  # one in hand, two buffered
    assert fast_stats.pending == 0
    assert fast_stats.delivered == 3
    assert stats.pending == 2


async def test_a_registration_describes_itself() -> None:
    informer, _, _ = setup()
    handler = Recorder()
    registration = informer.add_event_handler(handler, resync_period=0)
    assert isinstance(registration, Registration)
    assert registration.handler is handler
    assert registration.informer is informer
    assert "Recorder" in registration.name
    assert informer.registrations == [registration]
    assert "pending=0" in repr(registration)


async def test_an_informer_hosted_on_a_background_loop_thread() -> None:
    """As a sync facade will: the loop runs in a thread, the caller uses the
    thread-safe methods from outside it."""
    source = FakeControllerSource()
    source.add(pod("a"))
    informer = SharedIndexInformer(source)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        ready: concurrent.futures.Future[asyncio.Event] = concurrent.futures.Future()
        hosted = asyncio.run_coroutine_threadsafe(_host(informer, ready), loop)
        recorder = Recorder()

        def use_from_outside() -> None:
            informer.add_event_handler(recorder)
            synced = asyncio.run_coroutine_threadsafe(
                wait_for_cache_sync(informer, timeout=WAIT), loop
            ).result(WAIT)
            assert synced
            assert informer.store.list_keys() == ["default/a"]
            source.add(pod("b"))

        await asyncio.to_thread(use_from_outside)
        await recorder.wait_for(2)
        stop = await asyncio.wrap_future(ready)
        loop.call_soon_threadsafe(stop.set)
        await asyncio.wrap_future(hosted)
        assert informer.is_stopped()
        assert recorder.threads.isdisjoint({threading.get_ident(), thread.ident})
    finally:
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, WAIT)
        loop.close()


async def _host(
    informer: SharedIndexInformer, ready: concurrent.futures.Future[asyncio.Event]
) -> None:
    """Run ``informer`` until the event handed out through ``ready`` is set."""
    stop = asyncio.Event()
    ready.set_result(stop)
    task = asyncio.create_task(informer.run())
    await stop.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_several_informers_start_and_stop_together() -> None:
    first, source1, _ = setup("a")
    second, source2, _ = setup("x", "y", queue="delta")
    tasks = [asyncio.create_task(i.run()) for i in (first, second)]
    assert await wait_for_cache_sync(first, second, timeout=WAIT)
    assert len(first.store.list()) == 1
    assert len(second.store.list()) == 2
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert first.is_stopped()
    assert second.is_stopped()
    assert source1.open_watches == source2.open_watches == 0


@pytest.mark.parametrize("queue", ["real", "delta"])
async def test_an_empty_initial_list_still_wakes_a_sync_waiter(
    queue: Literal["real", "delta"],
) -> None:
    informer, _, _ = setup(queue=queue)  # nothing to list, so nothing is ever popped
    waiting = asyncio.create_task(wait_for_cache_sync(informer))
    try:
        async with running(informer):
            await settle()
            assert waiting.done()
            assert waiting.result() is True
            assert informer.has_synced()
    finally:
        waiting.cancel()
