"""kubectl's AGE: the test tables of apimachinery's ``duration.HumanDuration``
(``TestHumanDuration`` and ``TestHumanDurationBoundaries``), in seconds."""

from __future__ import annotations

import datetime

import pytest

from kubereflector._kubectl.duration import age, human_duration

SECOND = 1.0
MILLISECOND = 0.001
NANOSECOND = 1e-9
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
YEAR = 365 * DAY


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (SECOND, "1s"),
        (70 * SECOND, "70s"),
        (190 * SECOND, "3m10s"),
        (70 * MINUTE, "70m"),
        (47 * HOUR, "47h"),
        (49 * HOUR, "2d1h"),
        ((8 * 24 + 2) * HOUR, "8d"),
        (367 * DAY, "367d"),
        ((365 * 2 * 24 + 25) * HOUR, "2y1d"),
        ((365 * 8 * 24 + 2) * HOUR, "8y"),
    ],
)
def test_human_duration(seconds: float, expected: str) -> None:
    assert human_duration(seconds) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        # in the future: up to two seconds is clock skew
        (-2 * SECOND, "<invalid>"),
        (-2 * SECOND + NANOSECOND, "0s"),
        (0, "0s"),
        (SECOND - MILLISECOND, "0s"),
        # seconds, then minutes and seconds below 10 minutes
        (2 * MINUTE - MILLISECOND, "119s"),
        (2 * MINUTE, "2m"),
        (2 * MINUTE + SECOND, "2m1s"),
        (10 * MINUTE - MILLISECOND, "9m59s"),
        (10 * MINUTE, "10m"),
        (10 * MINUTE + SECOND, "10m"),
        # minutes up to 3 hours, then hours and minutes below 8 hours
        (3 * HOUR - MILLISECOND, "179m"),
        (3 * HOUR, "3h"),
        (3 * HOUR + MINUTE, "3h1m"),
        (8 * HOUR - MILLISECOND, "7h59m"),
        (8 * HOUR, "8h"),
        (8 * HOUR + 59 * MINUTE, "8h"),
        # hours up to 2 days, then days and hours below 8 days
        (2 * DAY - MILLISECOND, "47h"),
        (2 * DAY, "2d"),
        (2 * DAY + HOUR, "2d1h"),
        (8 * DAY - MILLISECOND, "7d23h"),
        (8 * DAY, "8d"),
        (8 * DAY + 23 * HOUR, "8d"),
        # days up to 2 years, then years and days below 8 years
        (2 * YEAR - MILLISECOND, "729d"),
        (2 * YEAR, "2y"),
        (2 * YEAR + 23 * HOUR, "2y"),
        (2 * YEAR + 23 * HOUR + 59 * MINUTE, "2y"),
        (2 * YEAR + DAY - MILLISECOND, "2y"),
        (2 * YEAR + DAY, "2y1d"),
        (3 * YEAR, "3y"),
        (4 * YEAR, "4y"),
        (5 * YEAR, "5y"),
        (6 * YEAR, "6y"),
        (7 * YEAR, "7y"),
        (8 * YEAR - MILLISECOND, "7y364d"),
        (8 * YEAR, "8y"),
        (8 * YEAR + 364 * DAY, "8y"),
        (9 * YEAR, "9y"),
    ],
)
def test_human_duration_boundaries(seconds: float, expected: str) -> None:
    assert human_duration(seconds) == expected


NOW = datetime.datetime(2025, 1, 10, tzinfo=datetime.timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        ("2025-01-09T23:56:40Z", "3m20s"),
        ("2025-01-09T23:56:40+00:00", "3m20s"),
        ("2025-01-10T00:56:40+01:00", "3m20s"),  # the offset counts
        ("2025-01-03T00:00:00Z", "7d"),
        ("2025-01-10T00:00:05Z", "<invalid>"),  # five seconds in the future
    ],
)
def test_age_of_a_timestamp(timestamp: str, expected: str) -> None:
    assert age(timestamp, NOW) == expected


@pytest.mark.parametrize(
    "timestamp",
    [None, 1736467200, "", "yesterday", "2025-01-09", "2025-01-09T23:56:40"],
)
def test_age_of_no_readable_timestamp_is_unknown(timestamp: object) -> None:
    # A date alone, or a time without an offset, is not RFC 3339: no age rather than
    # a guess at the zone (or a TypeError comparing naive and aware times).
    assert age(timestamp, NOW) == "<unknown>"
