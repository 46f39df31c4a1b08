"""The Reflector's pure decisions (kubereflector.cache._relist), without a stream or a clock.

ARCHITECTURE.md asks for these to be testable on their own; the Reflector's
behaviour built on them is tested through its public API in test_reflector.py.
"""

from __future__ import annotations

import logging

import pytest

from kubereflector import (
    ApiError,
    DecodeError,
    ExpiredError,
    Reflector,
    TooLargeResourceVersionError,
    TooManyRequestsError,
    TruncatedStreamError,
    VeryShortWatchError,
    default_watch_error_handler,
)
from kubereflector.cache._relist import (
    InternalErrorRetry,
    SyncPoint,
    WatchAction,
    WatchStalledError,
    classify_watch_error,
    is_initial_events_end,
    is_invalid_resource_version,
    is_malformed_resource_version,
    is_resource_version_unavailable,
    list_page_size,
    relist_resource_version,
    resource_version_of,
    rewatch_resource_version,
    watch_timeout_seconds,
)
from kubereflector.testing import FakeControllerSource


@pytest.mark.parametrize(
    ("last", "unavailable", "expected"),
    [("", False, "0"), ("42", False, "42"), ("42", True, ""), ("", True, "")],
)
def test_relist_resource_version(last: str, unavailable: bool, expected: str) -> None:
    assert relist_resource_version(last, unavailable) == expected


def test_rewatch_resource_version() -> None:
    assert rewatch_resource_version("42", False) == "42"
    assert rewatch_resource_version("42", True) == ""
    assert rewatch_resource_version("", False) == ""


@pytest.mark.parametrize(
    ("explicit", "paginated", "rv", "expected"),
    [
        (None, False, "0", 500),
        (None, False, "", 500),
        (None, False, "42", None),
        (None, True, "42", 500),
        (7, False, "42", 7),
        (7, True, "0", 7),
    ],
)
def test_list_page_size(
    explicit: int | None, paginated: bool, rv: str, expected: int | None
) -> None:
    assert list_page_size(explicit, paginated, rv) == expected


def test_watch_timeout_is_spread_between_min_and_twice_min() -> None:
    assert watch_timeout_seconds(300, 0.0) == 300
    assert watch_timeout_seconds(300, 0.999) == 599
    assert watch_timeout_seconds(0.1, 0.0) == 1


@pytest.mark.parametrize(
    ("error", "retry_internal", "action"),
    [
        (WatchStalledError(), False, WatchAction.REWATCH),
        (TooManyRequestsError(), False, WatchAction.BACKOFF_REWATCH),
        (ConnectionRefusedError(), False, WatchAction.BACKOFF_REWATCH),
        (TruncatedStreamError("cut"), False, WatchAction.REWATCH),
        (DecodeError("malformed line"), False, WatchAction.END_CYCLE),
        (ApiError(500, "InternalError"), True, WatchAction.BACKOFF_REWATCH),
        (ApiError(500, "InternalError"), False, WatchAction.END_CYCLE),
        (ExpiredError(), True, WatchAction.END_CYCLE),
        (ApiError(403, "Forbidden"), True, WatchAction.END_CYCLE),
        # kube-apiserver's 500 for a malformed RV: no retrying the same RV for 30 s
        (ApiError(500, "", 'resourceVersion: Invalid value: "x": ...'), True, "relist"),
    ],
)
def test_classify_watch_error(
    error: Exception, retry_internal: bool, action: WatchAction | str
) -> None:
    expected = WatchAction.RELIST_CURRENT if action == "relist" else action
    assert classify_watch_error(error, retry_internal) is expected


@pytest.mark.parametrize(
    ("value", "recorded", "malformed"),
    [
        ("42", "42", False),
        ("", "", False),
        (None, "", False),
        ({"a": 1}, "", True),
        (12, "", True),
        (12.5, "", True),
        (["1"], "", True),
        (True, "", True),
    ],
)
def test_a_resource_version_that_is_not_a_string_is_absent(
    value: object, recorded: str, malformed: bool
) -> None:
    assert resource_version_of(value) == recorded
    assert is_malformed_resource_version(value) is malformed


INVALID = 'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax'


@pytest.mark.parametrize(
    ("error", "invalid"),
    [
        # kube-apiserver 1.28: watches and watch-cache lists, then lists sent to etcd
        (ApiError(500, "", INVALID), True),
        (ApiError(400, "BadRequest", f"invalid resource version: {INVALID}"), True),
        (
            ApiError(
                422,
                "Invalid",
                "invalid",
                {"causes": [{"reason": "FieldValueInvalid", "field": "resourceVersion"}]},
            ),
            True,
        ),
        (ApiError(500, "InternalError", "etcdserver: no leader"), False),
        (ApiError(400, "BadRequest", "continue key is not valid"), False),
        (ApiError(422, "Invalid", "x", {"causes": [{"field": "resourceVersionMatch"}]}), False),
        (ApiError(404, "NotFound", INVALID), False),
        (ExpiredError(), False),
        (ValueError(INVALID), False),
    ],
)
def test_invalid_resource_version_is_recognised(error: Exception, invalid: bool) -> None:
    assert is_invalid_resource_version(error) is invalid


def test_a_resource_version_is_unavailable_when_expired_too_large_or_invalid() -> None:
    assert is_resource_version_unavailable(ExpiredError())
    assert is_resource_version_unavailable(TooLargeResourceVersionError())
    assert is_resource_version_unavailable(ApiError(500, "", INVALID))
    assert not is_resource_version_unavailable(ApiError(500, "InternalError", "boom"))


def test_internal_error_retry_window_opens_at_the_first_error_and_resets_after_a_quiet_gap() -> (
    None
):
    retry = InternalErrorRetry(max_duration=30, reset_after=60)
    err = ApiError(500, "InternalError")
    retry.after(err, now=0)
    assert retry.should_retry(now=0)
    retry.after(err, now=29)
    assert retry.should_retry(now=30)
    retry.after(err, now=31)
    assert not retry.should_retry(now=31)
    retry.after(err, now=200)  # a long quiet gap: a fresh window
    assert retry.should_retry(now=200)
    retry.after(ApiError(403), now=201)  # other errors do not count
    assert retry.should_retry(now=229)
    assert not InternalErrorRetry(max_duration=0).should_retry(now=0)


def test_initial_events_end_bookmark_is_recognised() -> None:
    assert is_initial_events_end({"annotations": {"k8s.io/initial-events-end": "true"}})
    assert not is_initial_events_end({"annotations": {"k8s.io/initial-events-end": "false"}})
    assert not is_initial_events_end({"resourceVersion": "5"})

    class Meta:
        def __init__(self) -> None:
            self.annotations = {"k8s.io/initial-events-end": "true"}

    assert is_initial_events_end(Meta())


def test_default_watch_error_handler_logs_expected_ends_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reflector = Reflector(FakeControllerSource(), _NullStore(), name="pods")
    with caplog.at_level(logging.DEBUG, logger="kubereflector"):
        default_watch_error_handler(reflector, ExpiredError())
        default_watch_error_handler(reflector, VeryShortWatchError("short"))
        default_watch_error_handler(reflector, ApiError(403, "Forbidden", "no"))
    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.DEBUG, logging.INFO, logging.WARNING]
    assert all(r.getMessage().startswith("pods:") for r in caplog.records)


class _NullStore:
    def add(self, obj: object) -> None: ...
    def update(self, obj: object) -> None: ...
    def delete(self, obj: object) -> None: ...
    def replace(self, items: list[object], resource_version: str) -> None: ...
    def resync(self) -> None: ...


# -- SyncPoint: where the next list or watch starts ----------------------------------


def test_sync_point_starts_with_a_list_at_zero_and_a_watch_list_at_empty() -> None:
    point = SyncPoint()
    assert (point.rv, point.list_at(), point.watch_list_at()) == ("", "0", "")


def test_sync_point_refused_until_the_next_full_sync() -> None:
    point = SyncPoint()
    point.replaced("10")
    point.advanced("12")
    assert (point.list_at(), point.watch_list_at()) == ("12", "12")
    point.refused()
    assert (point.list_at(), point.watch_list_at()) == ("", "")
    point.advanced("13")  # watch events do not make a refused position good again
    assert point.list_at() == ""
    point.replaced("20")
    assert (point.rv, point.list_at(), point.watch_list_at()) == ("20", "20", "20")


def test_sync_point_a_change_without_resource_version_is_stale_until_a_usable_one() -> None:
    point = SyncPoint()
    point.replaced("10")
    point.change_without_resource_version()
    assert point.take_stale()
    assert not point.take_stale()  # taken: forgotten

    point.change_without_resource_version()
    point.advanced("11")  # a usable resourceVersion came after it
    assert not point.take_stale()


@pytest.mark.parametrize(
    ("rv", "watch_list", "stale"),
    [("", False, True), ("0", False, True), ("10", False, False), ("", True, False)],
)
def test_sync_point_a_plain_watch_from_empty_or_zero_is_unanchored_until_a_bookmark(
    rv: str, watch_list: bool, stale: bool
) -> None:
    point = SyncPoint()
    point.advanced(rv)
    point.watch_opened(watch_list)
    assert point.take_stale() is stale
    point.watch_opened(watch_list)
    point.bookmarked()
    assert not point.take_stale()
