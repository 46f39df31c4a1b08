"""The timer of one emulated watch: its periodic bookmarks and its timeout.

Shared by the HTTP emulator's watches and :class:`FakeControllerSource`'s: both
end a watch after ``timeoutSeconds`` and send a bookmark every
``bookmark_interval`` seconds, on an injectable clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ...clock import Clock

__all__ = ["run_watch_timer"]

_EPSILON: Final = 1e-9
"""Slack on comparisons with the clock, so that a sleep of exactly the delay is due."""


async def run_watch_timer(
    clock: Clock,
    interval: float | None,
    timeout: float | None,
    *,
    on_bookmark: Callable[[], None],
    on_timeout: Callable[[], None],
) -> None:
    """Call ``on_bookmark`` every ``interval`` seconds of ``clock`` and ``on_timeout``
    once ``timeout`` seconds have passed, then return (``None``: never). Run it as a
    task; cancel it to stop. Bookmarks due while the task could not run are sent as
    one. At least one of ``interval`` and ``timeout`` must be given (``ValueError``);
    ``on_timeout`` wins when both fall due at once."""
    if interval is None and timeout is None:
        raise ValueError("a watch timer needs an interval, a timeout, or both")
    start = clock.now()
    deadline = start + timeout if timeout is not None else None
    next_bookmark = start + interval if interval is not None else None
    while True:
        due = min(t for t in (deadline, next_bookmark) if t is not None)
        delay = due - clock.now()
        if delay > _EPSILON:
            await clock.sleep(delay)
        now = clock.now() + _EPSILON
        if deadline is not None and now >= deadline:
            on_timeout()
            return
        if next_bookmark is not None and interval is not None and now >= next_bookmark:
            on_bookmark()
            while next_bookmark <= now:
                next_bookmark += interval
