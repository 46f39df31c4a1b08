"""The Reflector's behaviours, each staged exactly with a scripted ListerWatcher.

Time is a FakeClock: nothing here waits for wall-clock time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import pytest

from kubereflector import (
    ApiError,
    ExpiredError,
    ListOptions,
    ListResult,
    Reflector,
    ReflectorOptions,
    ReflectorPhase,
    TooLargeResourceVersionError,
    TooManyRequestsError,
    TruncatedStreamError,
    VeryShortWatchError,
    WatchEvent,
)
from kubereflector.testing import FakeClock, settle
from running_task import running
from scripted_lw import BLOCK, RecordingStore, ScriptedListerWatcher, bookmark, pod

pytestmark = pytest.mark.asyncio

EXPIRED_STATUS = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}


OPTION_NAMES = {f.name for f in dataclasses.fields(ReflectorOptions)}


def make(
    lw: ScriptedListerWatcher, **kwargs: Any
) -> tuple[Reflector, RecordingStore, FakeClock, list[BaseException]]:
    """A Reflector on a FakeClock; ``kwargs`` naming ReflectorOptions fields go to
    its options (defaults here: no stall timer, no watch-list, no jitter)."""
    clock = FakeClock()
    store = RecordingStore()
    errors: list[BaseException] = []
    options = {name: kwargs.pop(name) for name in list(kwargs) if name in OPTION_NAMES}
    options.setdefault("idle_timeout", None)
    options.setdefault("use_watch_list", False)
    options.setdefault("backoff_jitter", 0.0)
    reflector = Reflector(
        lw,
        store,
        clock=clock,
        options=ReflectorOptions(**options),
        on_watch_error=lambda _r, err: errors.append(err),
        **kwargs,
    )
    return reflector, store, clock, errors


def rvs(options: list[ListOptions]) -> list[str]:
    return [o.resource_version for o in options]


# -- listing ------------------------------------------------------------------


async def test_initial_list_replaces_the_store_then_watches_from_its_rv() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5"), pod("b", "6")], "10"))
    reflector, store, _, errors = make(lw)
    async with running(reflector):
        assert store.names() == ["default/a", "default/b"]
        assert store.call_kinds() == ["replace"]
        assert store.last_store_sync_resource_version() == "10"
        assert reflector.last_sync_resource_version == "10"
        assert lw.list_calls == [ListOptions(resource_version="0", limit=500)]
        (watch,) = lw.watch_calls
        assert watch.resource_version == "10"
        assert watch.allow_watch_bookmarks
        assert watch.send_initial_events is None
        assert watch.timeout_seconds is not None
        assert 300 <= watch.timeout_seconds < 600
    assert errors == []


async def test_watch_events_are_applied_in_order_and_advance_the_rv() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5"), pod("b", "6")], "10"))
    new_a = pod("a", "12", spec={"x": 1})
    lw.watches.append(
        [
            WatchEvent("ADDED", pod("c", "11")),
            WatchEvent("MODIFIED", new_a),
            WatchEvent("DELETED", pod("b", "13")),
            BLOCK,
        ]
    )
    reflector, store, _, _ = make(lw)
    async with running(reflector):
        assert store.call_kinds() == ["replace", "add", "update", "delete"]
        assert store.names() == ["default/a", "default/c"]
        assert store.get_by_key("default/a") is new_a
        assert reflector.last_sync_resource_version == "13"
        assert store.last_store_sync_resource_version() == "13"


async def test_pages_follow_continue_and_reach_the_store_in_one_replace() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.extend(
        [
            ListResult(
                [pod("a", "1"), pod("b", "2")], "10", continue_="t1", remaining_item_count=3
            ),
            ListResult([pod("c", "3"), pod("d", "4")], "10", continue_="t2"),
            ListResult([pod("e", "5")], "10"),
        ]
    )
    reflector, store, _, _ = make(lw, page_size=2)
    async with running(reflector):
        assert store.call_kinds() == ["replace"]
        assert len(store.calls[0][1][0]) == 5
        assert lw.list_calls == [
            ListOptions(resource_version="0", limit=2),
            ListOptions(limit=2, continue_="t1"),
            ListOptions(limit=2, continue_="t2"),
        ]


async def test_rv_policy_across_relists() -> None:
    """ "0" first; the last synced RV (no limit) after a 410; "" once that RV is gone."""
    lw = ScriptedListerWatcher()
    lw.lists.extend([ListResult([pod("a", "5")], "10"), ExpiredError(), ListResult([], "20")])
    lw.watches.append([WatchEvent("ERROR", EXPIRED_STATUS)])
    reflector, store, clock, errors = make(lw)
    async with running(reflector):
        assert [type(e) for e in errors] == [ExpiredError]
        assert clock.pending == [0.8]  # backoff before the next cycle
        await clock.advance(0.8)
        assert lw.list_calls == [
            ListOptions(resource_version="0", limit=500),
            ListOptions(resource_version="10"),
            ListOptions(resource_version="", limit=500),
        ]
        assert store.names() == []
        assert rvs(lw.watch_calls) == ["10", "20"]
        stats = reflector.stats()
        assert (stats.lists, stats.relists, stats.watches) == (2, 1, 2)


async def test_a_server_that_paginates_rv_0_keeps_being_paged() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.extend(
        [
            ListResult([pod("a", "5")], "10", continue_="t"),
            ListResult([pod("b", "6")], "10"),
            ListResult([pod("a", "5"), pod("b", "6")], "11"),
        ]
    )
    lw.watches.append([WatchEvent("ERROR", EXPIRED_STATUS)])
    reflector, _, clock, _ = make(lw)
    async with running(reflector):
        await clock.advance(0.8)
        assert lw.list_calls[2] == ListOptions(resource_version="10", limit=500)


async def test_an_explicit_page_size_wins_at_a_specific_rv() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.extend([ListResult([], "10"), ListResult([], "11")])
    lw.watches.append([WatchEvent("ERROR", EXPIRED_STATUS)])
    reflector, _, clock, _ = make(lw, page_size=50)
    async with running(reflector):
        await clock.advance(0.8)
        assert lw.list_calls[1] == ListOptions(resource_version="10", limit=50)


async def test_an_expired_continue_token_restarts_as_a_full_list() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.extend(
        [
            ListResult([pod("a", "1")], "10", continue_="t"),
            ExpiredError("continue token expired"),
            ListResult([pod("a", "1"), pod("b", "2"), pod("c", "3")], "12"),
        ]
    )
    reflector, store, _, _ = make(lw)
    async with running(reflector):
        assert lw.list_calls == [
            ListOptions(resource_version="0", limit=500),
            ListOptions(limit=500, continue_="t"),
            ListOptions(resource_version="0"),
        ]
        assert store.call_kinds() == ["replace"]
        assert store.names() == ["default/a", "default/b", "default/c"]
        assert reflector.last_sync_resource_version == "12"


@pytest.mark.parametrize(
    "error", [ExpiredError(), TooLargeResourceVersionError()], ids=["410", "too-large"]
)
async def test_an_unavailable_list_rv_relists_at_once_with_empty_rv(error: Exception) -> None:
    lw = ScriptedListerWatcher()
    lw.lists.extend([ListResult([], "10"), error, ListResult([pod("z", "30")], "30")])
    lw.watches.append([WatchEvent("ERROR", EXPIRED_STATUS)])
    reflector, store, clock, _ = make(lw)
    async with running(reflector):
        await clock.advance(0.8)
        assert rvs(lw.list_calls) == ["0", "10", ""]
        assert store.names() == ["default/z"]
        assert reflector.last_sync_resource_version == "30"


async def test_list_failures_end_the_cycle_and_back_off_exponentially() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.extend([ApiError(500, "InternalError", "etcd down")] * 4)
    reflector, _, clock, errors = make(lw)
    async with running(reflector):
        deadlines = [clock.pending]
        for step in (0.8, 1.6, 3.2):
            await clock.advance(step)
            deadlines.append(clock.pending)
        assert deadlines == [[0.8], [pytest.approx(2.4)], [pytest.approx(5.6)], [12.0]]
        assert len(errors) == 4
        assert "etcd down" in str(errors[0])


async def test_backoff_resets_after_two_healthy_minutes() -> None:
    lw = ScriptedListerWatcher()
    gate = asyncio.Event()
    lw.lists.extend([ApiError(500), ApiError(500), ListResult([], "10"), ListResult([], "11")])
    lw.watches.append([gate, WatchEvent("ERROR", EXPIRED_STATUS)])
    reflector, _, clock, _ = make(lw)
    async with running(reflector):
        await clock.advance(0.8)  # second list fails: next wait 1.6
        await clock.advance(1.6)  # third list succeeds and watches
        assert len(lw.watch_calls) == 1
        await clock.advance(200)
        gate.set()
        await settle()
        assert clock.pending == [pytest.approx(clock.now() + 0.8)]


# -- watch errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(lambda: ExpiredError(), id="410-on-open"),
        pytest.param(lambda: [WatchEvent("ERROR", EXPIRED_STATUS)], id="410-error-event"),
        pytest.param(lambda: [ExpiredError()], id="410-raised-mid-stream"),
    ],
)
async def test_a_410_on_watch_relists_at_the_last_rv(failure: Any) -> None:
    lw = ScriptedListerWatcher()
    lw.lists.extend([ListResult([pod("a", "5")], "10"), ListResult([pod("b", "6")], "15")])
    lw.watches.append(failure())
    reflector, store, clock, errors = make(lw)
    async with running(reflector):
        assert [type(e) for e in errors] == [ExpiredError]
        await clock.advance(0.8)
        assert rvs(lw.list_calls) == ["0", "10"]
        assert store.names() == ["default/b"]
        assert rvs(lw.watch_calls) == ["10", "15"]


async def test_list_and_watch_raises_the_error_that_ended_the_cycle() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([], "10"))
    lw.watches.append([WatchEvent("ERROR", EXPIRED_STATUS)])
    reflector, _, _, _ = make(lw)
    with pytest.raises(ExpiredError):
        await reflector.list_and_watch()
    assert lw.open_watches == 0


@pytest.mark.parametrize(
    ("failure", "wait"),
    [
        pytest.param(TooManyRequestsError(retry_after=7), 7.0, id="429-retry-after"),
        pytest.param(TooManyRequestsError(), 0.8, id="429-no-retry-after"),
        pytest.param(
            [
                WatchEvent(
                    "ERROR",
                    {"code": 429, "reason": "TooManyRequests", "details": {"retryAfterSeconds": 3}},
                )
            ],
            3.0,
            id="429-error-event",
        ),
        pytest.param(ConnectionRefusedError(), 0.8, id="connection-refused"),
    ],
)
async def test_retriable_watch_errors_rewatch_after_backoff_without_relisting(
    failure: Any, wait: float
) -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5")], "10"))
    lw.watches.append(failure)
    reflector, store, clock, errors = make(lw)
    async with running(reflector):
        assert clock.pending == [wait]
        await clock.advance(wait - 0.01)
        assert len(lw.watch_calls) == 1
        await clock.advance(0.01)
        assert rvs(lw.watch_calls) == ["10", "10"]
        assert len(lw.list_calls) == 1
        assert store.call_kinds() == ["replace"]
        assert errors == []
        assert reflector.stats().watch_restarts == 1


async def test_a_watch_that_ends_normally_is_reopened_from_the_last_rv() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([], "10"))
    lw.watches.append([WatchEvent("ADDED", pod("c", "11"))])
    reflector, _, _, errors = make(lw)
    async with running(reflector):
        assert rvs(lw.watch_calls) == ["10", "11"]
        assert len(lw.list_calls) == 1
        assert errors == []


async def test_a_watch_cut_off_is_reopened_at_once_whatever_the_backoff() -> None:
    """A stream cut mid-stream (the server restarted, a proxy reset it) ends the
    watch as a close does, as client-go's StreamWatcher does on an unexpected EOF:
    re-watched at once from the last RV, even when the backoff has grown (it used
    to wait that backoff, up to a minute, blind). Only one cut within a second and
    without an event is a very short watch: backoff and a relist."""
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([], "10"))
    cut = TruncatedStreamError("truncated watch stream: Connection reset by peer")
    lw.watches.extend([ConnectionRefusedError()] * 4)  # the backoff grows to 6.4 s
    lw.watches.append([WatchEvent("ADDED", pod("c", "11")), cut])
    gate = asyncio.Event()
    lw.watches.append([gate, cut])  # lasted, no event: a cut all the same
    lw.watches.append([cut])  # at once and empty: a very short watch
    lw.lists.append(ListResult([], "12"))
    reflector, store, clock, errors = make(lw)
    async with running(reflector):
        await clock.advance(0.8 + 1.6 + 3.2 + 6.4)
        assert rvs(lw.watch_calls) == ["10"] * 5 + ["11"]
        assert store.call_kinds() == ["replace", "add"]
        await clock.advance(5)
        gate.set()
        await settle()
        assert rvs(lw.watch_calls) == ["10"] * 5 + ["11", "11"]
        assert [type(err) for err in errors] == [VeryShortWatchError]
        # The cycle ended: a relist after the next backoff.
        assert clock.pending == [pytest.approx(clock.now() + 12.8)]
        assert len(lw.list_calls) == 1
        await clock.advance(12.8)
        assert rvs(lw.list_calls) == ["0", "11"]
        assert reflector.stats().watch_restarts == 6


async def test_a_very_short_empty_watch_is_an_error() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([], "10"))
    lw.watches.append([])
    reflector, _, _, _ = make(lw)
    with pytest.raises(VeryShortWatchError):
        await reflector.list_and_watch()


async def test_an_empty_watch_that_lasted_is_simply_reopened() -> None:
    lw = ScriptedListerWatcher()
    gate = asyncio.Event()
    lw.lists.append(ListResult([], "10"))
    lw.watches.append([gate])
    reflector, _, clock, errors = make(lw)
    async with running(reflector):
        await clock.advance(5)
        gate.set()
        await settle()
        assert rvs(lw.watch_calls) == ["10", "10"]
        assert errors == []


async def test_internal_errors_are_retried_for_a_bounded_time_then_relist() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([], "10"))
    lw.watches.extend([ApiError(500, "InternalError", "boom")] * 20)
    reflector, _, clock, _ = make(lw, max_internal_error_retry_duration=30)
    cycle = asyncio.create_task(reflector.list_and_watch())
    await clock.advance(100)
    assert cycle.done()
    with pytest.raises(ApiError, match="boom"):
        cycle.result()
    # retried at 0, 0.8, 2.4, 5.6, 12, 24.8; the failure at 50.4 is past 30 s
    assert len(lw.watch_calls) == 7
    assert len(lw.list_calls) == 1


async def test_internal_errors_end_the_cycle_at_once_when_retry_is_off() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([], "10"))
    lw.watches.append(ApiError(500, "InternalError", "boom"))
    reflector, _, _, _ = make(lw, max_internal_error_retry_duration=0)
    with pytest.raises(ApiError):
        await reflector.list_and_watch()
    assert len(lw.watch_calls) == 1


# -- events that must not reach the store ------------------------------------


async def test_bookmarks_only_advance_the_rv() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5")], "10"))
    lw.watches.append([bookmark("15"), BLOCK])
    reflector, store, _, _ = make(lw)
    async with running(reflector):
        assert store.call_kinds() == ["replace"]
        assert reflector.last_sync_resource_version == "15"
        assert store.last_store_sync_resource_version() == "15"


async def test_wrong_kind_and_malformed_objects_are_logged_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5")], "10"))
    nameless_secret = {
        "kind": "Pod",
        "metadata": {"namespace": "default", "resourceVersion": "13"},
        "data": {"password": "hunter2"},
    }
    lw.watches.append(
        [
            WatchEvent(
                "ADDED", {"kind": "ConfigMap", "metadata": {"name": "cm", "resourceVersion": "11"}}
            ),
            WatchEvent("ADDED", {"kind": "Pod"}),
            WatchEvent("ADDED", nameless_secret),
            WatchEvent("WEIRD", pod("w", "14")),
            WatchEvent("ADDED", pod("c", "15")),
            BLOCK,
        ]
    )
    reflector, store, _, errors = make(lw, expected_kind="Pod")
    with caplog.at_level(logging.ERROR, logger="kubereflector"):
        async with running(reflector):
            assert store.names() == ["default/a", "default/c"]
            assert reflector.last_sync_resource_version == "15"
            assert len(lw.watch_calls) == 1  # the watch survived all of it
    assert errors == []
    assert "expected kind Pod" in caplog.text
    assert "without metadata" in caplog.text
    assert "metadata.name" in caplog.text
    assert "'WEIRD'" in caplog.text
    assert "hunter2" not in caplog.text
    # Every skipped event names the resource it came from (ResourceListWatch: its URL).
    assert len(caplog.records) == 4
    assert all("scripted pods" in record.getMessage() for record in caplog.records)


async def test_an_error_event_without_a_status_ends_the_cycle_without_showing_it() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([], "10"))
    lw.watches.append([WatchEvent("ERROR", "token hunter2")])
    reflector, _, _, errors = make(lw, max_internal_error_retry_duration=0)
    async with running(reflector):
        await settle()
    assert str(errors[0]) == (
        "500 InternalError: a watch ERROR event of scripted pods carried a str instead of a Status"
    )


# -- watch-list ---------------------------------------------------------------


async def test_watch_list_gathers_initial_events_and_replaces_in_one_step() -> None:
    lw = ScriptedListerWatcher()
    gate = asyncio.Event()
    lw.watches.append(
        [
            WatchEvent("ADDED", pod("a", "5")),
            WatchEvent("ADDED", pod("b", "6")),
            WatchEvent("ADDED", pod("gone", "6")),
            WatchEvent("DELETED", pod("gone", "7")),
            gate,
            bookmark("8", initial_end=True),
            WatchEvent("MODIFIED", pod("a", "9")),
            BLOCK,
        ]
    )
    reflector, store, _, _ = make(lw, use_watch_list=True)
    async with running(reflector):
        assert store.calls == []  # nothing reaches the store before the bookmark
        assert reflector.last_sync_resource_version == ""
        gate.set()
        await settle()
        assert store.call_kinds() == ["replace", "update"]
        replaced, rv = store.calls[0][1]
        assert sorted(o["metadata"]["name"] for o in replaced) == ["a", "b"]
        assert rv == "8"
        assert reflector.last_sync_resource_version == "9"
        assert lw.list_calls == []
        (watch,) = lw.watch_calls
        assert watch.send_initial_events is True
        assert watch.resource_version_match == "NotOlderThan"
        assert watch.allow_watch_bookmarks
        assert watch.resource_version == ""


async def test_watch_list_applies_the_stores_transformer_to_initial_objects() -> None:
    class TransformingStore(RecordingStore):
        def transformer(self, obj: Any) -> Any:
            return {**obj, "transformed": True}

    lw = ScriptedListerWatcher()
    lw.watches.append([WatchEvent("ADDED", pod("a", "5")), bookmark("5", initial_end=True), BLOCK])
    clock = FakeClock()
    store = TransformingStore()
    reflector = Reflector(lw, store, clock=clock, options=ReflectorOptions(idle_timeout=None))
    async with running(reflector):
        ((replaced, _),) = [args for kind, args in store.calls if kind == "replace"]
        assert replaced[0]["transformed"] is True


@pytest.mark.parametrize(
    ("refusal", "remembered"),
    [
        pytest.param(ApiError(422, "Invalid", "sendInitialEvents unsupported"), True, id="422"),
        pytest.param([WatchEvent("ADDED", pod("stale", "3"))], True, id="no-bookmark"),
        pytest.param(ApiError(500, "InternalError"), False, id="500"),
    ],
)
async def test_watch_list_falls_back_to_a_list(refusal: Any, remembered: bool) -> None:
    lw = ScriptedListerWatcher()
    lw.watches.append(refusal)
    lw.lists.append(ListResult([pod("b", "6")], "10"))
    reflector, store, _, errors = make(lw, use_watch_list=True)
    async with running(reflector):
        assert store.call_kinds() == ["replace"]
        assert store.names() == ["default/b"]  # nothing of the abandoned stream
        assert rvs(lw.list_calls) == ["0"]
        assert lw.watch_calls[-1].send_initial_events is None
        assert lw.watch_calls[-1].resource_version == "10"
        assert reflector.uses_watch_list is not remembered
    assert errors == []


async def test_watch_list_with_an_expired_rv_retries_from_the_newest() -> None:
    lw = ScriptedListerWatcher()
    lw.watches.extend(
        [
            [bookmark("7", initial_end=True), WatchEvent("ERROR", EXPIRED_STATUS)],
            [WatchEvent("ERROR", EXPIRED_STATUS)],
            [WatchEvent("ADDED", pod("a", "20")), bookmark("20", initial_end=True), BLOCK],
        ]
    )
    reflector, store, clock, _ = make(lw, use_watch_list=True)
    async with running(reflector):
        await clock.advance(0.8)
        assert rvs(lw.watch_calls) == ["", "7", ""]
        assert store.names() == ["default/a"]
        assert lw.list_calls == []


# -- resourceVersions a server should not have sent ------------------------------

INVALID_RV = (
    'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax'
)
REFUSED_BY_WATCH_CACHE = ApiError(500, "", INVALID_RV)  # kube-apiserver 1.28, watches
REFUSED_BY_ETCD = ApiError(400, "BadRequest", f"invalid resource version: {INVALID_RV}")


@pytest.mark.parametrize("value", [{"not": "a string"}, 12, 12.5, ["13"]])
async def test_a_resource_version_that_is_not_a_string_is_ignored_and_logged_once(
    value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    lw = ScriptedListerWatcher()
    lw.url = "https://kube.example:6443/api/v1/pods"  # type: ignore[attr-defined]
    lw.lists.append(ListResult([pod("a", "5")], "10"))
    gate = asyncio.Event()
    lw.watches.append(
        [
            WatchEvent("ADDED", pod("b", value)),
            WatchEvent("MODIFIED", pod("a", value, spec={"x": 1})),
            bookmark(value),
            gate,
        ]
    )
    lw.lists.append(ListResult([pod("a", "12"), pod("b", "11")], "20"))
    reflector, store, _, errors = make(lw)
    with caplog.at_level(logging.DEBUG, logger="kubereflector.reflector"):
        async with running(reflector):
            assert store.names() == ["default/a", "default/b"]  # the objects are fine
            assert store.get_by_key("default/a")["spec"] == {"x": 1}
            assert reflector.last_sync_resource_version == "10"
            assert store.last_store_sync_resource_version() == "10"
            gate.set()  # the stream ends; watching from "10" would replay a and b: list
            await settle()
            assert rvs(lw.list_calls) == ["0", ""]
            assert rvs(lw.watch_calls) == ["10", "20"]
            assert store.call_kinds() == ["replace", "add", "update", "replace"]
    assert errors == []
    notes = [r for r in caplog.records if "is not a string" in r.getMessage()]
    assert [r.levelno for r in notes] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert "resourceVersion '10' is no position in the watch stream" in caplog.text
    message = notes[0].getMessage()
    assert "https://kube.example:6443/api/v1/pods" in message
    assert f"({type(value).__name__} " in message
    assert "resourceVersion stays '10'" in message


async def test_a_usable_rv_after_a_malformed_one_lets_the_watch_resume_without_a_list() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5")], "10"))
    lw.watches.append([WatchEvent("ADDED", pod("b", {"bad": 1})), bookmark("12")])
    reflector, store, _, _ = make(lw)
    async with running(reflector):
        assert rvs(lw.watch_calls) == ["10", "12"]  # the bookmark is past b's change
        assert rvs(lw.list_calls) == ["0"]
        assert store.names() == ["default/a", "default/b"]


async def test_a_malformed_rv_before_a_failed_cycle_makes_the_next_sync_current() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5")], "10"))
    lw.watches.append(
        [WatchEvent("DELETED", pod("a", {"bad": 1})), WatchEvent("ERROR", EXPIRED_STATUS)]
    )
    lw.lists.append(ListResult([], "30"))
    reflector, store, clock, _ = make(lw)
    async with running(reflector):
        await clock.advance(0.8)
        assert rvs(lw.list_calls) == ["0", ""]  # not at "10", from before the delete
        assert store.names() == []


@pytest.mark.parametrize("list_rv", ["0", ""])
async def test_a_watch_from_0_is_resumed_only_from_a_bookmark(list_rv: str) -> None:
    """To a server, a watch at "0" or "" starts with its state as ADDED events whose
    resourceVersions are the objects', no position in the stream: watching again
    from one would replay changes the state already held (a delete of an object
    never seen). Only a bookmark gives a position; without one, list again."""
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([], list_rv))  # a server (a fake) at resourceVersion 0
    lw.watches.append([WatchEvent("ADDED", pod("b", "2"))])  # the state, then the end
    lw.lists.append(ListResult([pod("b", "2")], "3"))
    lw.watches.append([WatchEvent("ADDED", pod("c", "4")), bookmark("5")])
    reflector, store, _, _ = make(lw)
    async with running(reflector):
        assert rvs(lw.list_calls) == ["0", ""]  # not a watch from "2"
        assert rvs(lw.watch_calls) == [list_rv, "3", "5"]  # from the bookmark: no list
        assert store.names() == ["default/b", "default/c"]


async def test_a_list_resource_version_that_is_not_a_string_is_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5")], 10))  # type: ignore[arg-type]
    reflector, store, _, _ = make(lw)
    with caplog.at_level(logging.WARNING, logger="kubereflector.reflector"):
        async with running(reflector):
            assert store.names() == ["default/a"]
            assert reflector.last_sync_resource_version == ""
            assert rvs(lw.watch_calls) == [""]
    assert "the resourceVersion of a list" in caplog.text


async def test_a_watch_list_end_bookmark_without_a_usable_rv_syncs_at_the_last_event() -> None:
    lw = ScriptedListerWatcher()
    end = bookmark("", initial_end=True)
    end.object["metadata"]["resourceVersion"] = {"bad": True}
    lw.watches.append([WatchEvent("ADDED", pod("a", "6")), end, BLOCK])
    reflector, store, _, _ = make(lw, use_watch_list=True)
    async with running(reflector):
        assert store.calls == [("replace", ([pod("a", "6")], "6"))]
        assert reflector.last_sync_resource_version == "6"


async def test_a_watch_refused_for_an_invalid_rv_relists_from_the_current_state(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The livelock of issue 16: a string RV the server refuses must not be sent
    again and again; the next sync is a list at "" (no 30 s of 500-retries first)."""
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5")], "10"))
    lw.watches.append([WatchEvent("MODIFIED", pod("a", "abc"))])  # then the stream ends
    lw.watches.append(REFUSED_BY_WATCH_CACHE)  # the watch at "abc"
    lw.lists.append(ListResult([pod("a", "30")], "30"))
    reflector, store, clock, errors = make(lw)
    async with running(reflector):
        assert rvs(lw.watch_calls) == ["10", "abc"]
        await clock.advance(0.8)  # the backoff after the failed cycle
        assert rvs(lw.list_calls) == ["0", ""]
        assert rvs(lw.watch_calls) == ["10", "abc", "30"]
        assert store.get_by_key("default/a")["metadata"]["resourceVersion"] == "30"
    assert errors == [REFUSED_BY_WATCH_CACHE]
    assert "refused resourceVersion 'abc' as invalid" in caplog.text


async def test_a_list_refused_for_an_invalid_rv_is_retried_at_the_current_state() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5")], "10"))
    lw.watches.append(
        [WatchEvent("MODIFIED", pod("a", "abc")), WatchEvent("ERROR", EXPIRED_STATUS)]
    )
    lw.lists.extend([REFUSED_BY_ETCD, ListResult([pod("a", "40")], "40")])
    reflector, store, clock, errors = make(lw, page_size=100)
    async with running(reflector):
        await clock.advance(0.8)
        assert rvs(lw.list_calls) == ["0", "abc", ""]
        assert rvs(lw.watch_calls) == ["10", "40"]
        assert store.get_by_key("default/a")["metadata"]["resourceVersion"] == "40"
    assert len(errors) == 1  # the 410 that ended the first cycle; the list recovered


async def test_a_watch_list_refused_for_an_invalid_rv_retries_at_the_current_state() -> None:
    lw = ScriptedListerWatcher()
    lw.watches.extend(
        [
            [
                bookmark("7", initial_end=True),
                WatchEvent("MODIFIED", pod("a", "abc")),
                WatchEvent("ERROR", EXPIRED_STATUS),
            ],
            REFUSED_BY_ETCD,  # a 400: not to be taken for "watch-list unsupported"
            [WatchEvent("ADDED", pod("a", "20")), bookmark("20", initial_end=True), BLOCK],
        ]
    )
    reflector, store, clock, _ = make(lw, use_watch_list=True)
    async with running(reflector):
        await clock.advance(0.8)
        assert rvs(lw.watch_calls) == ["", "abc", ""]
        assert store.names() == ["default/a"]
        assert reflector.uses_watch_list
        assert lw.list_calls == []


async def test_a_watch_list_refused_even_at_the_current_state_falls_back_to_a_list() -> None:
    """A server that answers 410 to a watch-list at "" must not be asked again and
    again without a pause: after one retry at "" the Reflector lists."""
    lw = ScriptedListerWatcher()
    lw.watches.extend(
        [[WatchEvent("ERROR", EXPIRED_STATUS)], [WatchEvent("ERROR", EXPIRED_STATUS)]]
    )
    lw.lists.append(ListResult([pod("a", "5")], "10"))
    reflector, store, _, _ = make(lw, use_watch_list=True)
    async with running(reflector):
        assert rvs(lw.watch_calls) == ["", "", "10"]
        assert [w.send_initial_events for w in lw.watch_calls] == [True, True, None]
        assert rvs(lw.list_calls) == [""]
        assert store.names() == ["default/a"]


# -- stalls, resync, cancellation -------------------------------------------------


async def test_a_silent_watch_is_restarted_after_the_idle_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kubereflector.reflector")
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([], "10"))
    gate = asyncio.Event()
    lw.watches.append([WatchEvent("ADDED", pod("c", "11")), gate, bookmark("12"), BLOCK])
    reflector, _, clock, errors = make(lw, idle_timeout=60)
    async with running(reflector):
        await clock.advance(50)
        gate.set()  # a bookmark at t=50 keeps the watch alive
        await clock.advance(50)
        assert len(lw.watch_calls) == 1
        await clock.advance(30)  # silent since t=50: dead by t=125 at the latest
        assert rvs(lw.watch_calls) == ["10", "12"]
        assert lw.closed_watches == 1
        assert reflector.stats().stalls == 1
        assert errors == []
    (stall,) = [r for r in caplog.records if "silent" in r.getMessage()]
    assert stall.levelno == logging.INFO
    assert stall.getMessage() == (
        f"{reflector.name}: the watch of scripted pods was silent for at least 60 s (no event "
        "or bookmark; the idle limit is 60 s): treating it as dead; watching again"
    )


async def test_resync_runs_every_period_when_allowed() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5")], "10"))
    allowed = [True, False, True]
    reflector, store, clock, _ = make(lw, resync_period=10, should_resync=lambda: allowed.pop(0))
    async with running(reflector):
        await clock.advance(9)
        assert store.call_kinds() == ["replace"]
        await clock.advance(1)
        assert store.call_kinds() == ["replace", "resync"]
        await clock.advance(20)
        assert store.call_kinds() == ["replace", "resync", "resync"]
        assert allowed == []


async def test_cancelling_mid_list_leaves_the_store_untouched() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(asyncio.Event())
    reflector, store, _, _ = make(lw)
    async with running(reflector) as task:
        assert len(lw.list_calls) == 1
    assert task.cancelled()
    assert store.calls == []


async def test_cancelling_mid_watch_closes_the_stream() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.append(ListResult([pod("a", "5")], "10"))
    reflector, store, _, _ = make(lw, idle_timeout=60, resync_period=5)
    async with running(reflector) as task:
        assert lw.open_watches == 1
    assert task.cancelled()
    assert lw.open_watches == 0
    assert lw.closed_watches == 1
    assert store.names() == ["default/a"]
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert pending == []


# -- phases -----------------------------------------------------------------------


async def test_phases_of_a_listing_cycle() -> None:
    lw = ScriptedListerWatcher()
    lw.lists.extend([asyncio.Event(), ListResult([pod("a", "5")], "10"), asyncio.Event()])
    reflector, _, clock, _ = make(lw)
    assert reflector.phase is ReflectorPhase.STOPPED
    # A list that hangs (an Event nobody sets), cancelled by the test: the Reflector stops.
    async with running(reflector):
        assert reflector.phase is ReflectorPhase.LISTING
    assert reflector.phase is ReflectorPhase.STOPPED
    lw.watches.append([ExpiredError()])
    async with running(reflector):
        # listed, watched, the watch failed with a 410: the cycle ended
        assert reflector.phase is ReflectorPhase.BACKING_OFF
        assert "backing-off" in repr(reflector)
        await clock.advance(0.8)
        assert reflector.phase is ReflectorPhase.LISTING  # the next cycle's list


async def test_phases_of_a_watch_list_cycle() -> None:
    lw = ScriptedListerWatcher()
    go_on = asyncio.Event()
    lw.watches.append(
        [
            WatchEvent("ADDED", pod("a", "5")),
            go_on,
            bookmark("10", initial_end=True),
            WatchEvent("ADDED", pod("b", "11")),
            BLOCK,
        ]
    )
    reflector, store, _, _ = make(lw, use_watch_list=True)
    async with running(reflector):
        assert reflector.phase is ReflectorPhase.INITIAL_EVENTS
        assert store.names() == []  # gathered apart until the initial-events-end bookmark
        go_on.set()
        await settle()
        assert reflector.phase is ReflectorPhase.WATCHING
        assert store.names() == ["default/a", "default/b"]
        assert reflector.last_sync_resource_version == "11"
