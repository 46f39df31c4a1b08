"""Run an asyncio program until it ends or is stopped by Ctrl-C or SIGTERM.

:func:`run` is :func:`asyncio.run` for programs that follow a cluster until they
are told to stop: the first SIGINT (Ctrl-C) or SIGTERM cancels the program's main
coroutine, so its ``async with`` blocks and ``finally`` clauses shut everything
down (informers stopped, connections closed), and then :func:`run` returns
quietly instead of printing a ``KeyboardInterrupt`` traceback.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

from ._aio.signals import LoopStopSignals

__all__ = ["run"]

logger = logging.getLogger("kubereflector.runner")

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T | None:
    """Run ``main`` on a new event loop, like :func:`asyncio.run`, and return its
    result; return ``None`` when SIGINT (Ctrl-C) or SIGTERM stopped it.

    The first of those signals cancels ``main`` (a ``CancelledError`` at the
    ``await`` it is in), so its clean-up runs: leaving ``async with
    SharedInformerFactory(...)`` stops the informers and closes the connections.
    A second signal during that clean-up acts as it would without :func:`run`
    (``KeyboardInterrupt``, or the end of the process for SIGTERM): the way out
    of a clean-up that hangs.

    The exit status after a signal is 0 when the program just returns: stopping
    a program that runs until stopped is not a failure (the ``kubereflector
    watch`` command and :class:`~kubereflector.runtime.Manager` do the same, as
    controller-runtime's managers do). A program that must report the
    interruption checks for ``None`` and exits with 130 itself.

    Signals are handled where the event loop can (the main thread, on Unix);
    elsewhere a ``KeyboardInterrupt`` ends ``main`` as :func:`asyncio.run` does
    and :func:`run` returns ``None``. Raises ``RuntimeError`` when called from a
    running event loop (``await main`` there), ``TypeError`` for anything but a
    coroutine, and whatever ``main`` raises.
    """
    if not asyncio.iscoroutine(main):
        raise TypeError(f"run() needs a coroutine, got {type(main).__name__}: call main()")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        main.close()
        raise RuntimeError("run() starts an event loop: in a coroutine, await the program instead")
    received: list[signal.Signals] = []
    try:
        return asyncio.run(_until_signalled(main, received), debug=debug)
    except KeyboardInterrupt:
        if received:
            raise  # a second Ctrl-C, which interrupted the clean-up: not a quiet stop
        return None  # no loop signal handler here (see above)


async def _until_signalled(
    main: Coroutine[Any, Any, T], received: list[signal.Signals]
) -> T | None:
    """Await ``main``; the first stop signal cancels it (and is appended to
    ``received``), after which signals act as usual again."""
    task = asyncio.current_task()
    assert task is not None

    def on_signal(sig: signal.Signals) -> None:
        logger.info("received %s: stopping", sig.name)
        received.append(sig)
        signals.remove()  # from now on, a signal acts as usual
        task.cancel()

    with LoopStopSignals(asyncio.get_running_loop(), on_signal) as signals:
        try:
            return await main
        except asyncio.CancelledError:
            if not received:
                raise  # cancelled by someone else: not ours to swallow
            return None
