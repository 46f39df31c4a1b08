"""The garbage-collector window of bulk syncs (``cache._gc``) and where the Reflector opens it.

Nothing here is timed: the contract is about the collector's thresholds, which
are process state, so every test restores them (fixture) whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from kubereflector import (
    MODIFIED,
    ApiError,
    Backoff,
    Cache,
    ExpiredError,
    ListOptions,
    ListResult,
    ListWatch,
    Reflector,
    ReflectorOptions,
    SharedIndexInformer,
    WatchEvent,
    wait_for_cache_sync,
)
from kubereflector.cache import _gc
from kubereflector.cache._gc import (
    FULL_THRESHOLD_FACTOR,
    SYNC_MIDDLE_THRESHOLD,
    defer_full_collections,
    is_effective,
)
from kubereflector.testing import FakeClock, settle
from running_task import running
from scripted_lw import BLOCK, ScriptedListerWatcher, bookmark, pod

needs_generational_gc = pytest.mark.skipif(
    not is_effective(), reason="this interpreter's collector has no window to open"
)


@pytest.fixture(autouse=True)
def restore_gc_state() -> Iterator[None]:
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(700, 10, 10)  # CPython's defaults, whatever the runner set
    try:
        yield
    finally:
        assert _gc._depth == 0, "a test left a window open"
        gc.set_threshold(*thresholds)
        (gc.enable if enabled else gc.disable)()


def raised() -> tuple[int, int, int]:
    return (700, 10, 10 * FULL_THRESHOLD_FACTOR)


def sync_raised() -> tuple[int, int, int]:
    """A sync window's thresholds: the middle generation in batches of
    SYNC_MIDDLE_THRESHOLD, the oldest raised so that a full collection still comes
    after as many young collections as in a plain window."""
    middle = SYNC_MIDDLE_THRESHOLD
    return (700, middle, -(-10 * FULL_THRESHOLD_FACTOR * 10 // middle))


# -- the window itself ---------------------------------------------------------------


@needs_generational_gc
def test_a_window_defers_only_full_collections_and_restores_the_thresholds() -> None:
    enabled = gc.isenabled()
    with defer_full_collections():
        assert gc.get_threshold() == raised()  # the young generations are untouched
        assert gc.isenabled() == enabled
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.isenabled() == enabled


@needs_generational_gc
@pytest.mark.parametrize("sync", [False, True])
def test_the_thresholds_come_back_after_an_exception(sync: bool) -> None:
    seen = []

    def fails_inside() -> None:
        with defer_full_collections(), defer_full_collections(sync=sync):
            seen.append(gc.get_threshold())
            raise KeyError("boom")

    with pytest.raises(KeyError):
        fails_inside()
    assert seen == [sync_raised() if sync else raised()]
    assert gc.get_threshold() == (700, 10, 10)


@needs_generational_gc
def test_nested_windows_restore_once_the_outermost_closes() -> None:
    gc.set_threshold(500, 7, 3)
    with defer_full_collections():
        outer = gc.get_threshold()
        assert outer == (500, 7, 3 * FULL_THRESHOLD_FACTOR)
        with contextlib.suppress(ValueError), defer_full_collections():
            assert gc.get_threshold() == outer
            raise ValueError
        assert gc.get_threshold() == outer  # the inner exit kept the outer window
    assert gc.get_threshold() == (500, 7, 3)


@needs_generational_gc
def test_windows_of_several_threads_are_counted_together() -> None:
    opened = threading.Event()
    release = threading.Event()
    closed = threading.Event()

    def other_thread() -> None:
        with defer_full_collections():
            opened.set()
            release.wait(10)
        closed.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    try:
        assert opened.wait(10)
        with defer_full_collections():
            assert gc.get_threshold() == raised()
            release.set()
            assert closed.wait(10)
            # The other thread's window closed first: this one still holds.
            assert gc.get_threshold() == raised()
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        release.set()
        thread.join(10)


@needs_generational_gc
def test_thresholds_someone_else_set_during_a_window_are_kept() -> None:
    with defer_full_collections():
        gc.set_threshold(1000, 20, 30)  # the application changed its mind meanwhile
    assert gc.get_threshold() == (1000, 20, 30)


@needs_generational_gc
def test_a_sync_window_collects_the_middle_generation_in_smaller_batches() -> None:
    with defer_full_collections(sync=True):
        young, middle, old = gc.get_threshold()
        assert (young, middle) == (700, SYNC_MIDDLE_THRESHOLD)
        assert middle < 10
        # As many young collections before a full one as in a plain window.
        assert middle * old >= 10 * raised()[2] > middle * (old - 1)
    assert gc.get_threshold() == (700, 10, 10)


@needs_generational_gc
def test_plain_and_sync_windows_nest_in_any_order_and_restore_once() -> None:
    with defer_full_collections():
        assert gc.get_threshold() == raised()
        with defer_full_collections(sync=True):
            assert gc.get_threshold() == sync_raised()
            with defer_full_collections():
                assert gc.get_threshold() == sync_raised()  # a sync is still under way
            assert gc.get_threshold() == sync_raised()
        assert gc.get_threshold() == raised()  # the sync ended, the plain window holds
    assert gc.get_threshold() == (700, 10, 10)
    with defer_full_collections(sync=True):
        with defer_full_collections():
            assert gc.get_threshold() == sync_raised()
        assert gc.get_threshold() == sync_raised()
    assert gc.get_threshold() == (700, 10, 10)


@needs_generational_gc
def test_sync_windows_of_several_threads_overlap_and_restore_after_the_last() -> None:
    opened = threading.Event()
    release = threading.Event()

    def other_thread() -> None:
        with defer_full_collections(sync=True):
            opened.set()
            release.wait(10)

    thread = threading.Thread(target=other_thread)
    thread.start()
    try:
        assert opened.wait(10)
        with defer_full_collections(sync=True):
            assert gc.get_threshold() == sync_raised()
            release.set()
            thread.join(10)
            assert gc.get_threshold() == sync_raised()  # this sync still runs
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        release.set()
        thread.join(10)


@needs_generational_gc
def test_a_sync_window_keeps_an_application_s_lower_middle_threshold() -> None:
    gc.set_threshold(700, 2, 10)
    with defer_full_collections(sync=True):
        assert gc.get_threshold() == (700, 2, 10 * FULL_THRESHOLD_FACTOR)
    assert gc.get_threshold() == (700, 2, 10)


@needs_generational_gc
def test_thresholds_the_application_sets_during_windows_are_left_alone_until_the_end() -> None:
    with defer_full_collections():
        gc.set_threshold(1000, 20, 30)  # the application's decision, mid-window
        with defer_full_collections(sync=True):
            assert gc.get_threshold() == (1000, 20, 30)  # not overridden by a later window
        assert gc.get_threshold() == (1000, 20, 30)
    assert gc.get_threshold() == (1000, 20, 30)
    with defer_full_collections():  # the next window starts from the application's
        assert gc.get_threshold() == (1000, 20, 30 * FULL_THRESHOLD_FACTOR)
    assert gc.get_threshold() == (1000, 20, 30)


@needs_generational_gc
def test_automatic_collection_switched_off_by_threshold_zero_stays_off() -> None:
    gc.set_threshold(0, 10, 10)
    with defer_full_collections(), defer_full_collections(sync=True):
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)


def test_a_window_changes_nothing_where_it_is_not_effective(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_gc, "_SUPPORTED", False)
    with defer_full_collections():
        assert gc.get_threshold() == (700, 10, 10)
        assert _gc._depth == 0
    assert gc.get_threshold() == (700, 10, 10)


def test_windows_are_not_effective_on_python_3_14_or_free_threaded_builds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys
    import sysconfig

    monkeypatch.setattr(sys, "version_info", (3, 14, 0, "final", 0))
    assert not _gc._supported()
    monkeypatch.undo()
    monkeypatch.setattr(
        sysconfig, "get_config_var", lambda name: 1 if name == "Py_GIL_DISABLED" else None
    )
    assert not _gc._supported()


# -- where the Reflector opens it ----------------------------------------------------


class ThresholdStore(Cache):
    """A Cache that records the collector's thresholds at every write."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, tuple[int, ...]]] = []

    def add(self, obj: Any) -> None:
        self.seen.append(("add", gc.get_threshold()))
        super().add(obj)

    def update(self, obj: Any) -> None:
        self.seen.append(("update", gc.get_threshold()))
        super().update(obj)

    def replace(self, items: list[Any], resource_version: str) -> None:
        self.seen.append(("replace", gc.get_threshold()))
        super().replace(items, resource_version)


class ThresholdListerWatcher(ScriptedListerWatcher):
    """Records the thresholds at every list call."""

    def __init__(self) -> None:
        super().__init__()
        self.list_thresholds: list[tuple[int, ...]] = []

    async def list(self, options: Any) -> ListResult:
        self.list_thresholds.append(gc.get_threshold())
        return await super().list(options)


def make(
    lw: ScriptedListerWatcher, *, use_watch_list: bool
) -> tuple[Reflector, ThresholdStore, list[BaseException]]:
    clock = FakeClock()
    store = ThresholdStore()
    errors: list[BaseException] = []
    reflector = Reflector(
        lw,
        store,
        clock=clock,
        backoff=Backoff(clock=clock, random=lambda: 0.0),
        on_watch_error=lambda _r, err: errors.append(err),
        options=ReflectorOptions(idle_timeout=None, use_watch_list=use_watch_list),
    )
    return reflector, store, errors


@needs_generational_gc
@pytest.mark.asyncio
async def test_a_paged_list_and_its_replace_run_in_a_window_and_the_watch_does_not() -> None:
    lw = ThresholdListerWatcher()
    lw.lists.append(ListResult([pod("a", "1")], "5", continue_="next"))
    lw.lists.append(ListResult([pod("b", "2")], "5"))
    lw.watches.append([WatchEvent("MODIFIED", pod("a", "6")), BLOCK])
    reflector, store, errors = make(lw, use_watch_list=False)
    async with running(reflector):
        assert lw.list_thresholds == [sync_raised(), sync_raised()]
        assert store.seen == [("replace", sync_raised()), ("update", (700, 10, 10))]
        assert gc.get_threshold() == (700, 10, 10)
    assert errors == []


@needs_generational_gc
@pytest.mark.asyncio
async def test_a_failed_or_cancelled_list_closes_its_window() -> None:
    lw = ThresholdListerWatcher()
    lw.lists.append(ApiError(500, "InternalError", "boom"))
    lw.lists.append(asyncio.Event())  # the retry hangs until cancelled
    reflector, _store, errors = make(lw, use_watch_list=False)
    clock = reflector.clock
    assert isinstance(clock, FakeClock)
    async with running(reflector):
        assert [type(e) for e in errors] == [ApiError]
        assert lw.list_thresholds == [sync_raised()]
        assert gc.get_threshold() == (700, 10, 10)  # backing off: no window
        await clock.advance(1.0)
        assert lw.list_thresholds == [sync_raised(), sync_raised()]
        assert gc.get_threshold() == sync_raised()  # the hanging retry holds its window
    assert gc.get_threshold() == (700, 10, 10)


@needs_generational_gc
@pytest.mark.asyncio
async def test_a_watch_list_window_ends_at_the_initial_events_end_bookmark() -> None:
    lw = ScriptedListerWatcher()
    lw.watches.append(
        [
            WatchEvent("ADDED", pod("a", "1")),
            WatchEvent("ADDED", pod("b", "2")),
            bookmark("3", initial_end=True),
            WatchEvent("MODIFIED", pod("a", "4")),
            BLOCK,
        ]
    )
    reflector, store, errors = make(lw, use_watch_list=True)
    async with running(reflector):
        assert store.seen == [("replace", sync_raised()), ("update", (700, 10, 10))]
        assert sorted(store.list_keys()) == ["default/a", "default/b"]
        assert gc.get_threshold() == (700, 10, 10)
    assert errors == []


@needs_generational_gc
@pytest.mark.asyncio
async def test_a_watch_list_cut_before_its_bookmark_closes_its_window() -> None:
    lw = ScriptedListerWatcher()
    gate = asyncio.Event()
    lw.watches.append([WatchEvent("ADDED", pod("a", "1")), gate, ExpiredError("gone")])
    lw.watches.append([BLOCK])  # the retry: a watch-list that stays silent
    reflector, _store, _errors = make(lw, use_watch_list=True)
    async with running(reflector):
        assert gc.get_threshold() == sync_raised()  # initial events are flowing
        gate.set()
        await settle()
        # The retry's watch-list is open and silent: a new window, the old one closed.
        assert gc.get_threshold() == sync_raised()
        assert _gc._depth == 1
    assert gc.get_threshold() == (700, 10, 10)  # cancelled: closed too


# -- keeping watched objects young: each event is in the cache before the next is read


@pytest.mark.asyncio
async def test_each_event_is_in_the_cache_before_the_next_is_read() -> None:
    # Objects an informer holds while reading ahead survive young collections,
    # and once enough of them have, CPython runs full collections over the
    # cache again and again. So, once synced, each watch event is applied to
    # the cache before the Reflector takes the next one from the stream.
    synced = asyncio.Event()
    seen_when_read: list[str | None] = []
    informer: SharedIndexInformer

    def cached_rv() -> str | None:
        obj = informer.indexer.get_by_key("default/p")
        return None if obj is None else str(obj["metadata"]["resourceVersion"])

    async def list_pods(options: ListOptions) -> ListResult:
        raise AssertionError("a watch-list needs no list")

    async def events() -> AsyncIterator[WatchEvent]:
        yield bookmark("1", initial_end=True)  # an empty initial state
        await synced.wait()
        for rv in range(2, 7):
            seen_when_read.append(cached_rv())
            yield WatchEvent(MODIFIED, pod("p", str(rv)))
        seen_when_read.append(cached_rv())
        await asyncio.Event().wait()  # then the stream stays open and silent

    @contextlib.asynccontextmanager
    async def watch_pods(options: ListOptions) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        yield events()

    informer = SharedIndexInformer(ListWatch(list_pods, watch_pods))
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(wait_for_cache_sync(informer), 5)
        synced.set()
        await settle()
        assert seen_when_read == [None, "2", "3", "4", "5", "6"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# -- where informers keep it open: until a relist's notifications are handled


class GatedHandler:
    """A plain handler that blocks on ``gate`` at the update of ``default/b``."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.waiting = threading.Event()
        self.seen: list[str] = []

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self.seen.append(f"add {obj['metadata']['name']}")

    def on_update(self, old: Any, new: Any) -> None:
        name = new["metadata"]["name"]
        if name == "b":
            self.waiting.set()
            assert self.gate.wait(10), "never released"
        self.seen.append(f"update {name}")

    def on_delete(self, obj: Any) -> None:
        self.seen.append("delete")


async def until(predicate: Any) -> None:
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never met")


@needs_generational_gc
@pytest.mark.asyncio
@pytest.mark.parametrize("end", ["drained", "removed"])
async def test_a_relist_window_lasts_until_its_notifications_are_handled(end: str) -> None:
    from kubereflector.testing import FakeControllerSource

    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    for name in ("a", "b", "c"):
        source.add(pod(name, "1"))
    informer = SharedIndexInformer(source, clock=clock)
    handler = GatedHandler()
    registration = informer.add_event_handler(handler)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(wait_for_cache_sync(registration), 5)
        await until(lambda: _gc._depth == 0)  # the initial list is handled
        assert gc.get_threshold() == (700, 10, 10)
        source.modify_drop_watch(pod("c", "1"))  # seen only by the relist
        source.compact()
        source.reset_watch()  # the re-watch gets a 410: relist
        await clock.advance(5)
        assert await asyncio.to_thread(handler.waiting.wait, 10)
        # The handler holds the relist's notifications: no full collection now.
        assert gc.get_threshold() == raised()
        assert _gc._depth == 1
        if end == "removed":
            informer.remove_event_handler(registration)
        handler.gate.set()
        await until(lambda: _gc._depth == 0)
        assert gc.get_threshold() == (700, 10, 10)
        if end == "drained":
            assert handler.seen[-3:] == ["update a", "update b", "update c"]
    finally:
        handler.gate.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
