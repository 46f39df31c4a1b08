"""FakeControllerSource (``kubereflector.testing``): the in-memory ListerWatcher.

No test waits for wall-clock time: deliveries are driven with ``settle()`` and
time with ``FakeClock``; threads are joined through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubereflector import (
    INITIAL_EVENTS_END_ANNOTATION,
    ApiError,
    ExpiredError,
    ListerWatcher,
    ListOptions,
    TooLargeResourceVersionError,
    WatchEvent,
    error_from_status,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle

pytestmark = pytest.mark.asyncio


def watch_list(resource_version: str = "") -> ListOptions:
    """The options of a watch-list request, as the Reflector sends them."""
    return ListOptions(
        resource_version=resource_version,
        resource_version_match="NotOlderThan",
        send_initial_events=True,
        allow_watch_bookmarks=True,
    )


def pod(name: str, namespace: str | None = "default", **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, **fields}


def rv_of(obj: Any) -> str:
    return str(obj["metadata"]["resourceVersion"])


def names(events: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.object["metadata"]["name"]) for e in events]


async def next_event(events: AsyncIterator[WatchEvent]) -> WatchEvent:
    """The next event, which must already be on its way (no time passes)."""
    task = asyncio.ensure_future(anext(events))
    await settle()
    if not task.done():
        task.cancel()
        await asyncio.wait({task})
        pytest.fail("no watch event arrived")
    return task.result()


async def take(events: AsyncIterator[WatchEvent], n: int) -> list[WatchEvent]:
    return [await next_event(events) for _ in range(n)]


async def assert_quiet(events: AsyncIterator[WatchEvent]) -> None:
    """Nothing arrives and the stream does not end."""
    task = asyncio.ensure_future(anext(events))
    await settle()
    if task.done():
        try:
            pytest.fail(f"unexpected event: {task.result()}")
        except StopAsyncIteration:
            pytest.fail("the stream ended")
    task.cancel()
    await asyncio.wait({task})


async def assert_ended(events: AsyncIterator[WatchEvent]) -> None:
    task = asyncio.ensure_future(anext(events))
    await settle()
    assert task.done(), "the stream did not end"
    with pytest.raises(StopAsyncIteration):
        task.result()


# -- construction, writes, reads ----------------------------------------------------


async def test_defaults_and_protocol() -> None:
    source = FakeControllerSource()
    assert isinstance(source, ListerWatcher)
    assert source.resource_version == "0"
    assert source.keys() == []
    assert source.list_objects() == []
    assert source.open_watches == 0
    result = await source.list(ListOptions())
    assert result.items == []
    assert result.resource_version == "0"
    assert result.continue_ == ""
    assert result.remaining_item_count is None


@pytest.mark.parametrize(
    "kwargs",
    [{"history_limit": -1}, {"bookmark_interval": 0}, {"bookmark_interval": -1.0}],
)
async def test_invalid_parameters(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        FakeControllerSource(**kwargs)


async def test_writes_stamp_rv_and_store_a_copy() -> None:
    source = FakeControllerSource()
    original = pod("a", spec={"x": [1]})
    stored = source.add(original)
    assert rv_of(stored) == "1"
    assert "resourceVersion" not in original["metadata"]  # the caller's object is untouched
    original["spec"]["x"].append(2)
    assert stored["spec"] == {"x": [1]}  # deep copy
    assert source.get("default/a") is stored
    assert source.resource_version == "1"

    cluster = source.add(pod("node-1", namespace=None))
    assert rv_of(cluster) == "2"
    assert source.get("node-1") is cluster

    modified = source.modify(pod("a", spec={"x": [3]}))
    assert rv_of(modified) == "3"
    assert source.get("default/a") is modified

    deleted = source.delete(pod("a"))
    assert rv_of(deleted) == "4"
    assert source.get("default/a") is None
    assert source.keys() == ["node-1"]
    assert source.resource_version == "4"


async def test_strict_writes_name_the_key_and_change_nothing() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    with pytest.raises(ValueError, match="'default/a'"):
        source.add(pod("a"))
    with pytest.raises(ValueError, match="'default/b'"):
        source.modify(pod("b"))
    with pytest.raises(ValueError, match="'default/b'"):
        source.delete(pod("b"))
    with pytest.raises(ValueError, match="'default/b'"):
        source.delete_drop_watch(pod("b"))
    with pytest.raises(ValueError, match="name"):
        source.add({"metadata": {"namespace": "default"}})
    assert source.resource_version == "1"
    assert source.keys() == ["default/a"]


async def test_list_objects_and_keys_are_sorted() -> None:
    source = FakeControllerSource()
    for name in ("c", "a", "b"):
        source.add(pod(name))
    source.add(pod("z", namespace="aaa"))
    assert source.keys() == ["aaa/z", "default/a", "default/b", "default/c"]
    assert [o["metadata"]["name"] for o in source.list_objects()] == ["z", "a", "b", "c"]


# -- list -----------------------------------------------------------------------------


async def test_list_current_state_sorted_and_recorded() -> None:
    source = FakeControllerSource()
    for name in ("b", "c", "a"):
        source.add(pod(name))
    source.delete(pod("c"))
    for rv in ("", "0", "2", "4"):
        result = await source.list(ListOptions(resource_version=rv))
        assert [o["metadata"]["name"] for o in result.items] == ["a", "b"], rv
        assert result.resource_version == "4"
        assert result.items[0] is source.get("default/a")
    options = ListOptions(resource_version="3", resource_version_match="NotOlderThan")
    assert (await source.list(options)).resource_version == "4"
    assert [r.resource_version for r in source.list_requests] == ["", "0", "2", "4", "3"]
    assert source.list_requests[-1] is options


async def test_list_too_large_resource_version() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    for match in (None, "NotOlderThan", "Exact"):
        with pytest.raises(TooLargeResourceVersionError) as info:
            await source.list(ListOptions(resource_version="2", resource_version_match=match))
        assert info.value.status == 504
        assert info.value.details is not None
        assert info.value.details["causes"][0]["reason"] == "ResourceVersionTooLarge"


async def test_list_exact_serves_retained_states() -> None:
    source = FakeControllerSource(history_limit=3)
    source.add(pod("a", spec={"v": 1}))  # 1
    source.add(pod("b"))  # 2
    source.modify(pod("a", spec={"v": 2}))  # 3
    source.delete(pod("b"))  # 4
    source.add(pod("c"))  # 5  (history now holds 3..5)

    async def exact(rv: str) -> list[tuple[str, Any]]:
        options = ListOptions(resource_version=rv, resource_version_match="Exact")
        result = await source.list(options)
        assert result.resource_version == rv
        return [(o["metadata"]["name"], o.get("spec")) for o in result.items]

    assert await exact("5") == [("a", {"v": 2}), ("c", None)]
    assert await exact("4") == [("a", {"v": 2})]
    assert await exact("3") == [("a", {"v": 2}), ("b", None)]
    assert await exact("2") == [("a", {"v": 1}), ("b", None)]
    with pytest.raises(ExpiredError) as info:
        await exact("1")
    assert info.value.status == 410
    assert info.value.reason == "Expired"


@pytest.mark.parametrize(
    ("options", "status"),
    [
        (ListOptions(resource_version="0", resource_version_match="Exact"), 422),
        (ListOptions(resource_version="", resource_version_match="NotOlderThan"), 422),
        (ListOptions(send_initial_events=True), 422),
        (ListOptions(resource_version="abc", limit=10), 400),
        (ListOptions(resource_version="-1", resource_version_match="Exact"), 400),
        (ListOptions(continue_="not-a-token"), 400),
    ],
)
async def test_list_rejects_invalid_options(options: ListOptions, status: int) -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    with pytest.raises(ApiError) as info:
        await source.list(options)
    assert info.value.status == status
    assert info.value.reason == ("Invalid" if status == 422 else "BadRequest")


async def test_selectors_are_refused_not_ignored() -> None:
    source = FakeControllerSource()
    with pytest.raises(ValueError, match="does not filter"):
        await source.list(ListOptions(label_selector="app=web"))
    with pytest.raises(ValueError, match="does not filter"):
        await source.list(ListOptions(field_selector="metadata.name=a"))
    with pytest.raises(ValueError, match="does not filter"):
        async with source.watch(ListOptions(label_selector="app=web")):
            pass
    assert source.open_watches == 0


async def test_paging_is_a_consistent_snapshot() -> None:
    source = FakeControllerSource()
    for name in ("e", "d", "c", "b", "a"):
        source.add(pod(name, spec={"v": 1}))
    first = await source.list(ListOptions(limit=2))
    assert [o["metadata"]["name"] for o in first.items] == ["a", "b"]
    assert first.resource_version == "5"
    assert first.remaining_item_count == 3
    assert first.continue_

    # Changes after the first page do not leak into later pages.
    source.add(pod("bb"))
    source.modify(pod("c", spec={"v": 2}))
    source.delete(pod("d"))

    second = await source.list(ListOptions(limit=2, continue_=first.continue_))
    assert [(o["metadata"]["name"], o["spec"]) for o in second.items] == [
        ("c", {"v": 1}),
        ("d", {"v": 1}),
    ]
    assert second.resource_version == "5"
    assert second.remaining_item_count == 1
    third = await source.list(ListOptions(limit=2, continue_=second.continue_))
    assert [o["metadata"]["name"] for o in third.items] == ["e"]
    assert third.continue_ == ""
    assert third.remaining_item_count is None
    # A token can be retried; a fresh list sees the new state.
    again = await source.list(ListOptions(limit=2, continue_=first.continue_))
    assert [o["metadata"]["name"] for o in again.items] == ["c", "d"]
    fresh = await source.list(ListOptions())
    assert [o["metadata"]["name"] for o in fresh.items] == ["a", "b", "bb", "c", "e"]
    assert fresh.resource_version == "8"


async def test_paging_without_more_items_has_no_token() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    source.add(pod("b"))
    result = await source.list(ListOptions(limit=2))
    assert len(result.items) == 2
    assert result.continue_ == ""
    assert result.remaining_item_count is None


async def test_continue_token_expires_after_compact() -> None:
    source = FakeControllerSource()
    for name in "abc":
        source.add(pod(name))
    first = await source.list(ListOptions(limit=1))
    # Still valid while the snapshot's history is retained, even after writes.
    source.add(pod("d"))
    assert (await source.list(ListOptions(limit=1, continue_=first.continue_))).items
    source.compact()
    with pytest.raises(ExpiredError) as info:
        await source.list(ListOptions(limit=1, continue_=first.continue_))
    assert info.value.status == 410
    assert info.value.reason == "Expired"
    assert "continue" in info.value.message


async def test_continue_token_expires_when_the_window_moves() -> None:
    source = FakeControllerSource(history_limit=2)
    for name in "abc":
        source.add(pod(name))
    first = await source.list(ListOptions(limit=1))
    source.add(pod("d"))
    assert (await source.list(ListOptions(limit=1, continue_=first.continue_))).items
    source.add(pod("e"))  # the event after the snapshot (rv 4) is still retained
    assert (await source.list(ListOptions(limit=1, continue_=first.continue_))).items
    source.add(pod("f"))  # now rv 4 is gone: the snapshot at rv 3 cannot be rebuilt
    with pytest.raises(ExpiredError):
        await source.list(ListOptions(limit=1, continue_=first.continue_))


async def test_continue_rejects_resource_version_and_match() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    source.add(pod("b"))
    token = (await source.list(ListOptions(limit=1))).continue_
    with pytest.raises(ApiError) as info:
        await source.list(ListOptions(resource_version="2", continue_=token))
    assert info.value.status == 400
    options = ListOptions(
        resource_version="2", resource_version_match="NotOlderThan", continue_=token
    )
    with pytest.raises(ApiError) as info:
        await source.list(options)
    assert info.value.status == 422


# -- watch ------------------------------------------------------------------------------


async def test_watch_from_empty_rv_sends_state_then_live_events() -> None:
    source = FakeControllerSource()
    source.add(pod("b"))
    source.add(pod("a"))
    async with source.watch(ListOptions()) as events:
        assert source.open_watches == 1
        initial = await take(events, 2)
        assert names(initial) == [("ADDED", "a"), ("ADDED", "b")]
        assert initial[0].object is source.get("default/a")
        await assert_quiet(events)
        added = source.add(pod("c"))
        source.modify(pod("a"))
        source.delete(pod("b"))
        live = await take(events, 3)
        assert names(live) == [("ADDED", "c"), ("MODIFIED", "a"), ("DELETED", "b")]
        assert live[0].object is added
        assert [rv_of(e.object) for e in live] == ["3", "4", "5"]
    assert source.open_watches == 0
    assert [r.resource_version for r in source.watch_requests] == [""]


async def test_watch_from_rv_replays_history_then_live() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    listed = await source.list(ListOptions())
    source.add(pod("b"))  # between the list and the watch
    source.modify(pod("a"))
    async with source.watch(ListOptions(resource_version=listed.resource_version)) as events:
        replay = await take(events, 2)
        assert names(replay) == [("ADDED", "b"), ("MODIFIED", "a")]
        source.delete(pod("a"))
        assert names(await take(events, 1)) == [("DELETED", "a")]
        await assert_quiet(events)


async def test_watch_from_current_rv_sends_only_new_events() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    async with source.watch(ListOptions(resource_version="1")) as events:
        await assert_quiet(events)
        source.add(pod("b"))
        assert names(await take(events, 1)) == [("ADDED", "b")]


async def test_two_watches_get_the_same_events() -> None:
    source = FakeControllerSource()
    async with source.watch(ListOptions()) as one, source.watch(ListOptions()) as two:
        assert source.open_watches == 2
        source.add(pod("a"))
        source.add(pod("b"))
        first, second = await take(one, 2), await take(two, 2)
        assert first == second
        assert names(first) == [("ADDED", "a"), ("ADDED", "b")]


async def test_watch_from_expired_rv_gets_a_410_error_event() -> None:
    source = FakeControllerSource(history_limit=2)
    for name in "abcd":
        source.add(pod(name))  # history keeps rv 3 and 4
    async with source.watch(ListOptions(resource_version="2")) as events:
        assert names(await take(events, 2)) == [("ADDED", "c"), ("ADDED", "d")]
    async with source.watch(ListOptions(resource_version="1")) as events:
        assert source.open_watches == 0
        event = await next_event(events)
        assert event.type == "ERROR"
        assert event.object["kind"] == "Status"
        assert event.object["status"] == "Failure"
        assert event.object["code"] == 410
        assert event.object["reason"] == "Expired"
        assert event.object["message"] == "too old resource version: 1 (2)"
        assert isinstance(error_from_status(event.object), ExpiredError)
        await assert_ended(events)


async def test_watch_after_compact_only_from_current_rv() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    source.add(pod("b"))
    source.compact()
    async with source.watch(ListOptions(resource_version="1")) as events:
        event = await next_event(events)
        assert event.type == "ERROR"
        assert event.object["code"] == 410
        await assert_ended(events)
    async with source.watch(ListOptions(resource_version="2")) as events:
        await assert_quiet(events)
        source.add(pod("c"))
        assert names(await take(events, 1)) == [("ADDED", "c")]


async def test_history_limit_zero_allows_only_current_rv() -> None:
    source = FakeControllerSource(history_limit=0)
    source.add(pod("a"))
    source.add(pod("b"))
    async with source.watch(ListOptions(resource_version="1")) as events:
        assert (await next_event(events)).object["code"] == 410
    async with source.watch(ListOptions(resource_version="2")) as events:
        source.add(pod("c"))
        assert names(await take(events, 1)) == [("ADDED", "c")]


async def test_watch_from_future_rv_gets_a_too_large_error_event() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    for options in (
        ListOptions(resource_version="5"),
        watch_list("5"),
    ):
        async with source.watch(options) as events:
            event = await next_event(events)
            assert event.type == "ERROR"
            assert event.object["code"] == 504
            assert event.object["reason"] == "Timeout"
            assert event.object["details"]["causes"] == [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ]
            assert isinstance(error_from_status(event.object), TooLargeResourceVersionError)
            await assert_ended(events)
            assert source.open_watches == 0


async def test_a_malformed_rv_gets_kube_apiservers_answers() -> None:
    """A watch, or a list the watch cache would serve, gets a 500 with no reason;
    a list with a limit (sent to etcd) a 400 BadRequest: as kube-apiserver 1.28."""
    source = FakeControllerSource()
    with pytest.raises(ApiError) as info:
        async with source.watch(ListOptions(resource_version="x1")):
            pass
    assert (info.value.status, info.value.reason) == (500, "")
    assert 'resourceVersion: Invalid value: "x1": strconv.ParseUint' in info.value.message
    assert source.open_watches == 0
    with pytest.raises(ApiError) as info:
        await source.list(ListOptions(resource_version="x1"))
    assert (info.value.status, info.value.reason) == (500, "")
    with pytest.raises(ApiError) as info:
        await source.list(ListOptions(resource_version="x1", limit=5))
    assert (info.value.status, info.value.reason) == (400, "BadRequest")
    assert info.value.message.startswith(
        'invalid resource version: resourceVersion: Invalid value: "x1"'
    )


@pytest.mark.parametrize("bookmark_kind", [None, "Pod"])
async def test_watch_list_sends_state_then_end_bookmark(bookmark_kind: str | None) -> None:
    source = FakeControllerSource(bookmark_kind=bookmark_kind)
    source.add(pod("b"))
    source.add(pod("a"))
    source.modify(pod("b"))
    for rv in ("", "0", "1", "3"):
        async with source.watch(watch_list(rv)) as events:
            initial = await take(events, 3)
            assert names(initial[:2]) == [("ADDED", "a"), ("ADDED", "b")], rv
            assert rv_of(initial[1].object) == "3"
            bookmark = initial[2]
            assert bookmark.type == "BOOKMARK"
            expected: dict[str, Any] = {
                "apiVersion": "v1",
                "metadata": {
                    "resourceVersion": "3",
                    "annotations": {INITIAL_EVENTS_END_ANNOTATION: "true"},
                },
            }
            if bookmark_kind is not None:
                expected["kind"] = bookmark_kind
            assert bookmark.object == expected
            await assert_quiet(events)
    async with source.watch(watch_list()) as events:
        await take(events, 3)
        source.delete(pod("a"))
        assert names(await take(events, 1)) == [("DELETED", "a")]


@pytest.mark.parametrize(
    "options",
    [
        ListOptions(send_initial_events=True, allow_watch_bookmarks=True),
        ListOptions(send_initial_events=True, resource_version_match="NotOlderThan"),
        ListOptions(send_initial_events=False, resource_version_match="Exact"),
        ListOptions(resource_version="1", resource_version_match="NotOlderThan"),
    ],
)
async def test_watch_list_validation_is_422(options: ListOptions) -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    with pytest.raises(ApiError) as info:
        async with source.watch(options):
            pass
    assert info.value.status == 422
    assert info.value.reason == "Invalid"
    assert source.watch_requests == [options]
    assert source.open_watches == 0


async def test_send_initial_events_false_starts_at_most_recent() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    source.add(pod("b"))
    options = ListOptions(send_initial_events=False, resource_version_match="NotOlderThan")
    async with source.watch(options) as events:
        await assert_quiet(events)
        source.add(pod("c"))
        assert names(await take(events, 1)) == [("ADDED", "c")]
    options = ListOptions(
        resource_version="1", send_initial_events=False, resource_version_match="NotOlderThan"
    )
    async with source.watch(options) as events:
        assert names(await take(events, 2)) == [("ADDED", "b"), ("ADDED", "c")]


async def test_periodic_bookmarks_on_the_clock() -> None:
    clock = FakeClock()
    source = FakeControllerSource(bookmark_interval=5.0, clock=clock)
    source.add(pod("a"))
    options = ListOptions(resource_version="1", allow_watch_bookmarks=True)
    async with source.watch(options) as events:
        await clock.advance(4.9)
        await assert_quiet(events)
        await clock.advance(0.1)
        bookmark = await next_event(events)
        assert bookmark == WatchEvent(
            "BOOKMARK", {"apiVersion": "v1", "metadata": {"resourceVersion": "1"}}
        )
        source.add(pod("b"))
        await clock.advance(5.0)
        assert [(e.type, rv_of(e.object)) for e in await take(events, 2)] == [
            ("ADDED", "2"),
            ("BOOKMARK", "2"),
        ]
        await clock.advance(10.0)  # stops at each interval: two more bookmarks
        assert [e.type for e in await take(events, 2)] == ["BOOKMARK", "BOOKMARK"]
        await assert_quiet(events)
    assert clock.pending == []


async def test_no_periodic_bookmarks_unless_allowed() -> None:
    clock = FakeClock()
    source = FakeControllerSource(bookmark_interval=5.0, clock=clock)
    async with source.watch(ListOptions()) as events:
        assert clock.pending == []
        await clock.advance(20.0)
        await assert_quiet(events)
    no_interval = FakeControllerSource(clock=clock)
    async with no_interval.watch(ListOptions(allow_watch_bookmarks=True)) as events:
        assert clock.pending == []
        await clock.advance(20.0)
        await assert_quiet(events)


async def test_timeout_seconds_ends_the_stream_on_the_clock() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    async with source.watch(ListOptions(timeout_seconds=10)) as events:
        await clock.wait_for_sleepers(1)
        await clock.advance(9.5)
        source.add(pod("a"))
        assert names(await take(events, 1)) == [("ADDED", "a")]
        await assert_quiet(events)
        assert source.open_watches == 1
        await clock.advance(0.5)
        await assert_ended(events)
        assert source.open_watches == 0
        source.add(pod("b"))  # nothing is delivered after the end
        await assert_ended(events)


async def test_timeout_with_bookmarks() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock, bookmark_interval=3.0)
    options = ListOptions(timeout_seconds=7, allow_watch_bookmarks=True)
    async with source.watch(options) as events:
        await clock.advance(7.0)
        assert [e.type for e in await take(events, 2)] == ["BOOKMARK", "BOOKMARK"]
        await assert_ended(events)
    assert clock.pending == []


# -- faults -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("write", "dropped", "change"),
    [
        ("add_drop_watch", "a", ("ADDED", "a")),
        ("modify_drop_watch", "old", ("MODIFIED", "old")),
        ("delete_drop_watch", "old", ("DELETED", "old")),
    ],
)
async def test_drop_watch_writes_are_missed_but_kept_in_history(
    write: str, dropped: str, change: tuple[str, str]
) -> None:
    source = FakeControllerSource()
    source.add(pod("old"))
    async with source.watch(ListOptions(resource_version="1")) as events:
        getattr(source, write)(pod(dropped))
        assert source.resource_version == "2"
        await assert_quiet(events)
        source.add(pod("later"))
        assert names(await take(events, 1)) == [("ADDED", "later")]
    assert (change[0] == "DELETED") == (source.get(f"default/{dropped}") is None)
    async with source.watch(ListOptions(resource_version="1")) as events:
        assert names(await take(events, 2)) == [change, ("ADDED", "later")]


async def test_reset_watch_ends_open_watches_after_earlier_events() -> None:
    source = FakeControllerSource()
    async with source.watch(ListOptions()) as one, source.watch(ListOptions()) as two:
        source.add(pod("a"))
        source.reset_watch()
        assert source.open_watches == 0
        source.add(pod("b"))
        for events in (one, two):
            assert names(await take(events, 1)) == [("ADDED", "a")]
            await assert_ended(events)
        async with source.watch(ListOptions(resource_version="1")) as three:
            assert names(await take(three, 1)) == [("ADDED", "b")]


async def test_fail_next_list() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    err = ApiError(500, "InternalError", "boom")
    source.fail_next_list(err, times=2)
    for _ in range(2):
        with pytest.raises(ApiError) as info:
            await source.list(ListOptions())
        assert info.value is err
    assert len((await source.list(ListOptions())).items) == 1
    assert len(source.list_requests) == 3
    with pytest.raises(ValueError, match="times"):
        source.fail_next_list(err, times=0)


async def test_fail_next_watch() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    source.fail_next_watch(ConnectionRefusedError("refused"))
    source.fail_next_watch(ExpiredError())
    with pytest.raises(ConnectionRefusedError):
        async with source.watch(ListOptions()):
            pass
    with pytest.raises(ExpiredError):
        async with source.watch(ListOptions()):
            pass
    assert source.open_watches == 0
    async with source.watch(ListOptions()) as events:
        assert names(await take(events, 1)) == [("ADDED", "a")]
    assert len(source.watch_requests) == 3
    # Lists are not affected by watch faults.
    source.fail_next_watch(ExpiredError())
    assert (await source.list(ListOptions())).items


async def test_error_watches_sends_the_status_then_ends() -> None:
    source = FakeControllerSource()
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": 500,
        "reason": "InternalError",
        "message": "etcd is sad",
    }
    async with source.watch(ListOptions()) as one, source.watch(ListOptions()) as two:
        source.add(pod("a"))
        source.error_watches(status)
        assert source.open_watches == 0
        for events in (one, two):
            added, error = await take(events, 2)
            assert names([added]) == [("ADDED", "a")]
            assert error.type == "ERROR"
            assert error.object == status
            err = error_from_status(error.object)
            assert (err.status, err.reason, err.message) == (500, "InternalError", "etcd is sad")
            await assert_ended(events)


async def test_stall_watches_silences_only_open_watches() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock, bookmark_interval=1.0)
    options = ListOptions(allow_watch_bookmarks=True, timeout_seconds=5)
    async with source.watch(options) as stalled:
        source.add(pod("a"))
        source.stall_watches()
        source.add(pod("b"))
        await settle()
        assert clock.pending == []  # its bookmark and timeout timer is gone
        assert names(await take(stalled, 1)) == [("ADDED", "a")]  # sent before the stall
        async with source.watch(ListOptions(resource_version="1")) as fresh:
            assert names(await take(fresh, 1)) == [("ADDED", "b")]
            source.add(pod("c"))
            assert names(await take(fresh, 1)) == [("ADDED", "c")]
        await clock.advance(60.0)  # no bookmark, no timeout
        source.reset_watch()  # a dead connection is not reached either
        source.error_watches({"code": 500})
        await assert_quiet(stalled)
        assert source.open_watches == 1
        assert clock.pending == []
    assert source.open_watches == 0


# -- threads, loops and cleanup ------------------------------------------------------


async def test_writes_from_threads_arrive_in_rv_order() -> None:
    source = FakeControllerSource()
    writers, per_writer = 4, 60
    barrier = threading.Barrier(writers)

    def write(worker: int) -> None:
        barrier.wait(timeout=20)
        for i in range(per_writer):
            name = f"w{worker}-{i % 5}"
            if source.get(f"default/{name}") is None:
                source.add(pod(name))
            else:
                source.modify(pod(name, spec={"i": i}))

    async with source.watch(ListOptions(resource_version="0")) as events:
        await asyncio.gather(*(asyncio.to_thread(write, w) for w in range(writers)))
        received = await take(events, writers * per_writer)
        await assert_quiet(events)
    assert [rv_of(e.object) for e in received] == [str(rv) for rv in range(1, 241)]
    assert source.resource_version == "240"
    async with source.watch(ListOptions(resource_version="0")) as events:
        state = await take(events, len(source.keys()))
    assert [e.object for e in state] == source.list_objects()
    # The history replays exactly what the live watch saw.
    async with source.watch(ListOptions(resource_version="1")) as events:
        replay = await take(events, 239)
    assert replay == received[1:]


async def test_watch_on_another_threads_loop() -> None:
    source = FakeControllerSource()
    ready = threading.Event()
    count = 50
    got: list[str] = []

    async def consume() -> None:
        async with source.watch(ListOptions(resource_version="0")) as events:
            ready.set()
            async for event in events:
                got.append(rv_of(event.object))
                if len(got) == count:
                    break

    thread = threading.Thread(target=asyncio.run, args=(consume(),), daemon=True)
    thread.start()
    try:
        assert await asyncio.to_thread(ready.wait, 20)
        for i in range(count):
            source.add(pod(f"p{i}"))
    finally:
        await asyncio.to_thread(thread.join, 20)
    assert not thread.is_alive()
    assert got == [str(rv) for rv in range(1, count + 1)]
    assert source.open_watches == 0


async def test_a_watch_whose_loop_closed_is_dropped() -> None:
    source = FakeControllerSource()

    async def abandon() -> None:
        stream = source.watch(ListOptions())
        await stream.__aenter__()  # never left: the loop closes under it

    await asyncio.to_thread(asyncio.run, abandon())
    assert source.open_watches == 1
    source.add(pod("a"))  # must not raise
    assert source.open_watches == 0


async def test_closing_watches_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock, bookmark_interval=2.0)
    source.add(pod("a"))
    me = asyncio.current_task()
    for i in range(100):
        options = ListOptions(
            resource_version="0" if i % 2 else "1",
            allow_watch_bookmarks=True,
            timeout_seconds=30 if i % 3 else None,
        )
        async with source.watch(options) as events:
            assert source.open_watches == 1
            if i % 4 == 0:
                await clock.advance(2.0)
                await next_event(events)
    assert source.open_watches == 0
    assert clock.pending == []
    assert asyncio.all_tasks() == {me}

    loop = asyncio.get_running_loop()
    scheduled: list[Callable[..., Any]] = []
    original = loop.call_soon_threadsafe

    def counting(callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        scheduled.append(callback)
        return original(callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
    source.add(pod("b"))
    assert scheduled == []
    async with source.watch(ListOptions(resource_version="2")):
        source.add(pod("c"))
        assert len(scheduled) == 1  # deliveries go through call_soon_threadsafe
    await settle()
    assert asyncio.all_tasks() == {me}


async def test_cancelling_a_blocked_consumer_closes_the_stream() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock, bookmark_interval=1.0)
    entered = asyncio.Event()

    async def consume() -> None:
        async with source.watch(ListOptions(allow_watch_bookmarks=True)) as events:
            entered.set()
            async for _ in events:
                pass

    task = asyncio.create_task(consume())
    await entered.wait()
    await settle()
    assert source.open_watches == 1
    assert len(clock.pending) == 1
    task.cancel()
    await asyncio.wait({task})
    assert task.cancelled()
    assert source.open_watches == 0
    assert clock.pending == []
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_a_stream_is_entered_once_and_ends_when_closed() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    stream = source.watch(ListOptions())
    async with stream as events:
        pass
    with pytest.raises(StopAsyncIteration):
        await anext(events)
    with pytest.raises(RuntimeError, match="once"):
        async with stream:
            pass


async def test_repr_shows_state() -> None:
    source = FakeControllerSource()
    source.add(pod("a"))
    assert repr(source) == (
        "FakeControllerSource(resource_version=1, objects=1, history=1, open_watches=0)"
    )
