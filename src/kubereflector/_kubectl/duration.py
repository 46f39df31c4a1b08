"""kubectl's AGE: ``duration.HumanDuration`` from ``k8s.io/apimachinery/pkg/util/duration``,
and the age of a timestamp as kubectl's printers show it. Pure functions, no I/O.
"""

from __future__ import annotations

import datetime

__all__ = ["age", "human_duration"]


def human_duration(seconds: float) -> str:
    """``seconds`` as kubectl prints an AGE, with two or three significant figures:
    ``119s``, ``2m1s``, ``9m59s``, ``10m``, ``179m``, ``3h1m``, ``8h``, ``47h``,
    ``2d1h``, ``8d``, ``729d``, ``2y1d``, ``8y``.

    The same thresholds as apimachinery's ``HumanDuration``: the seconds are
    truncated toward zero first; up to two seconds in the future (clock skew
    between machines) is ``0s``, further is ``<invalid>``. ``seconds`` must be
    finite (``ValueError`` or ``OverflowError`` otherwise).
    """
    whole = int(seconds)  # toward zero, as Go's int(d.Seconds())
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 2 * 60:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        return _with_rest(minutes, "m", whole % 60, "s")
    if minutes < 3 * 60:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return _with_rest(hours, "h", minutes % 60, "m")
    if hours < 2 * 24:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        return _with_rest(days, "d", hours % 24, "h")
    if days < 2 * 365:
        return f"{days}d"
    years = days // 365
    if years < 8:
        return _with_rest(years, "y", days % 365, "d")
    return f"{years}y"


def _with_rest(value: int, unit: str, rest: int, rest_unit: str) -> str:
    return f"{value}{unit}{rest}{rest_unit}" if rest else f"{value}{unit}"


def age(timestamp: object, now: float) -> str:
    """The AGE of something that happened at ``timestamp`` (an RFC 3339 string such as
    ``metadata.creationTimestamp``), seen at ``now`` (POSIX seconds): its
    :func:`human_duration`; ``<unknown>`` when ``timestamp`` is not a string, not
    a time, or has no UTC offset (what kubectl's ``translateTimestampSince`` shows
    for an object with no creation time). Never raises for a bad ``timestamp``."""
    if not isinstance(timestamp, str):
        return "<unknown>"
    try:
        then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    if then.tzinfo is None:  # a date, or a local time: not RFC 3339
        return "<unknown>"
    return human_duration(now - then.timestamp())
