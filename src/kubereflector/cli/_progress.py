"""What ``watch`` and ``get`` show on stderr while they run: the initial list's
progress on a terminal (:class:`ListProgress`) and, for ``watch``, a line when the
server becomes unreachable and when it is back (:class:`WatchProgress`)."""

from __future__ import annotations

import contextlib
import math
from typing import TextIO

import aiohttp

from ..cache.listwatch import ListOptions, ListResult
from ..clock import Clock
from ._context import CommandContext
from ._errors import PROG, describe
from ._observer import ListWatchObserver

__all__ = ["ListProgress", "WatchProgress"]


class ListProgress(ListWatchObserver):
    """The initial list's progress on a terminal, overwritten in place on stderr:
    objects so far, and the server's ``remainingItemCount`` when it sends one."""

    _REDRAW_EVERY = 0.1

    def __init__(self, stream: TextIO, what: str, *, enabled: bool, clock: Clock) -> None:
        self._stream = stream
        self._what = what
        self._clock = clock
        self._count = 0
        self._shown = False
        self._done = not enabled
        self._last_draw = -math.inf

    def list_succeeded(self, options: ListOptions, result: ListResult) -> None:
        if self._done:
            return
        if not options.continue_:
            self._count = 0
        self._count += len(result.items)
        if result.continue_:
            self._draw(result.remaining_item_count, force=True)
        else:
            self.finish()

    def initial_progress(self, options: ListOptions, count: int) -> None:
        if not self._done:
            self._count = count
            self._draw(None)

    def initial_events_ended(self, options: ListOptions, count: int, resource_version: str) -> None:
        self.finish()

    def _draw(self, remaining: int | None, *, force: bool = False) -> None:
        now = self._clock.now()
        if not force and now - self._last_draw < self._REDRAW_EVERY:
            return
        self._last_draw = now
        text = f"listing {self._what}: {self._count} so far"
        if remaining is not None:
            text += f", {remaining} remaining"
        with contextlib.suppress(BrokenPipeError, ValueError):
            self._stream.write("\r\x1b[K" + text)
            self._stream.flush()
        self._shown = True

    def finish(self) -> None:
        """Erase the progress line; show nothing more."""
        if self._done:
            return
        self._done = True
        if self._shown:
            with contextlib.suppress(BrokenPipeError, ValueError):
                self._stream.write("\r\x1b[K")
                self._stream.flush()


class WatchProgress(ListProgress):
    """Progress, plus a line on stderr when the server becomes unreachable and when a
    watch is open again (the Reflector retries such failures quietly)."""

    def __init__(self, ctx: CommandContext, what: str) -> None:
        super().__init__(ctx.stderr, what, enabled=ctx.tty, clock=ctx.clock)
        self._ctx = ctx
        self._down = False

    def list_failed(self, options: ListOptions, err: Exception) -> None:
        self._lost(err)

    def watch_failed(self, options: ListOptions, err: Exception) -> None:
        self._lost(err)

    def watch_opened(self, options: ListOptions) -> None:
        if self._down:
            self._down = False
            self._ctx.err(f"{PROG}: the API server at {self._ctx.server} is reachable again")

    def _lost(self, err: Exception) -> None:
        if self._down or not isinstance(err, aiohttp.ClientConnectionError | OSError):
            return
        self._down = True
        self.finish()
        self._ctx.err(f"{PROG}: warning: {describe(err, self._ctx)}; retrying")
