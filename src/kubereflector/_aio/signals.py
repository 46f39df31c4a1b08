"""SIGINT and SIGTERM turned into a graceful stop (private): the one place that
installs and removes stop-signal handlers, for :func:`kubereflector.run`, the
:class:`~kubereflector.runtime.Manager` and the command line.

Handlers can only be installed from the main thread (on Unix, where the event
loop's ``add_signal_handler`` exists). Elsewhere nothing is installed and the
signals act as Python's defaults say (``KeyboardInterrupt`` for SIGINT).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

__all__ = ["STOP_SIGNALS", "LoopStopSignals", "ThreadStopSignals"]

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
"""The signals that ask a program to stop: Ctrl-C and what ``kill``/Kubernetes send."""


class LoopStopSignals:
    """Route the stop signals to ``callback(sig)`` on ``loop`` while in use.

    A context manager (``with LoopStopSignals(loop, cb):``); :meth:`remove` gives
    the signals back their usual action early (idempotent), e.g. after the first
    one, so that a second Ctrl-C interrupts a clean-up that hangs. Enter it on
    ``loop``'s thread; :attr:`installed` lists the signals it took over (empty
    off the main thread or where the loop has no signal handlers). Not
    thread-safe: one owner.
    """

    __slots__ = ("_callback", "_loop", "installed")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, callback: Callable[[signal.Signals], object]
    ) -> None:
        self._loop = loop
        self._callback = callback
        self.installed: list[signal.Signals] = []

    def __enter__(self) -> LoopStopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in STOP_SIGNALS:
            try:
                self._loop.add_signal_handler(sig, self._callback, sig)
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # no loop signal handlers on this platform or loop
            self.installed.append(sig)
        return self

    def remove(self) -> None:
        """Give the signals back their usual action; idempotent."""
        for sig in self.installed:
            self._loop.remove_signal_handler(sig)
        self.installed.clear()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove()


class ThreadStopSignals:
    """Route the stop signals to ``callback(sig)`` from the main thread with
    :func:`signal.signal`, for a program whose event loop runs on another thread
    (``Manager.run_sync``); the previous handlers come back on exit.

    ``callback`` runs in the main thread between bytecodes, so it must only hand
    the request on (e.g. through ``loop.call_soon_threadsafe``). Off the main
    thread nothing is installed (:attr:`installed` stays empty).
    """

    __slots__ = ("_callback", "_previous", "installed")

    def __init__(self, callback: Callable[[signal.Signals], object]) -> None:
        self._callback = callback
        self._previous: dict[signal.Signals, Any] = {}
        self.installed: list[signal.Signals] = []

    def _handle(self, number: int, _frame: FrameType | None) -> None:
        self._callback(signal.Signals(number))

    def __enter__(self) -> ThreadStopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
                self.installed.append(sig)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        self.installed.clear()
