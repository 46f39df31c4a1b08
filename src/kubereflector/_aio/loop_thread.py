"""An asyncio event loop running on a background thread (private).

:class:`~kubereflector.SyncSharedInformerFactory` runs the one
asyncio core here: :meth:`LoopThread.start` starts a daemon thread whose event
loop runs until :meth:`LoopThread.stop`; :meth:`LoopThread.run` runs a coroutine
on it from any other thread and blocks for its result, re-raising its
exception in the caller.

Thread-safety: every method may be called from any thread, but ``run`` and
``stop`` raise :class:`RuntimeError` on the loop's own thread (blocking there
would deadlock the loop).

Also for any loop, owned here or not: :func:`call_in_loop` (run a callback on a
loop from any thread).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .tasks import running_loop

__all__ = ["LoopThread", "call_in_loop"]

logger = logging.getLogger("kubereflector.factory")

T = TypeVar("T")


class LoopThread:
    """One event loop on one daemon thread, started once and stopped once."""

    __slots__ = ("_lock", "_loop", "_name", "_ready", "_state", "_thread")

    def __init__(self, name: str = "kubereflector-loop") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._state = "new"  # new -> running -> stopped, or adopted

    @classmethod
    def adopt(cls, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> LoopThread:
        """A handle on ``loop``, which runs on ``thread`` and belongs to someone else
        (an asyncio program's own loop): :meth:`run` and :meth:`submit` work from
        other threads while it runs; :meth:`start` and :meth:`stop` raise
        ``RuntimeError``."""
        handle = cls(name=f"the event loop of {thread.name}")
        handle._loop = loop
        handle._thread = thread
        handle._state = "adopted"
        handle._ready.set()
        return handle

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop (``RuntimeError`` before :meth:`start`)."""
        loop = self._loop
        if loop is None:
            raise RuntimeError(f"{self._name} has not started")
        return loop

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def in_thread(self) -> bool:
        """Whether the caller runs on the loop's thread."""
        # Identity, not ident: a finished thread's ident may be reused by another.
        return self._thread is threading.current_thread()

    def is_running(self) -> bool:
        if self._state == "adopted":
            return self.loop.is_running()
        return self._state == "running"

    def start(self) -> None:
        """Start the thread and return once its loop runs. Raises ``RuntimeError``
        if it was started before."""
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"{self._name} can be started only once")
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=self._main, args=(loop,), name=self._name, daemon=True)
            self._loop = loop
            self._thread = thread
            self._state = "running"
            thread.start()
        self._ready.wait()

    def _main(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.call_soon(self._ready.set)
            loop.run_forever()
        finally:
            try:
                _cancel_all_tasks(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()
                self._ready.set()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; its future. Raises ``RuntimeError`` (and
        closes ``coro``) when the loop no longer runs."""
        # Under the lock: a coroutine submitted before stop() marks the loop
        # stopped is queued before the loop's stop, so it runs (and is cancelled
        # and awaited on the way out) rather than being dropped unresolved.
        with self._lock:
            loop = self._loop
            if loop is None or self._state not in ("running", "adopted") or loop.is_closed():
                coro.close()
                raise RuntimeError(f"{self._name} is not running")
            return asyncio.run_coroutine_threadsafe(coro, loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and block until it ends: its result, or its
        exception raised here. Interrupting the wait (``KeyboardInterrupt``)
        cancels the coroutine. Raises ``RuntimeError`` on the loop's thread."""
        if self.in_thread():
            coro.close()
            raise RuntimeError(
                f"cannot block on {self._name} from its own thread (it would deadlock)"
            )
        future = self.submit(coro)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        """Stop the loop (tasks still pending are cancelled and awaited, async
        generators and the default executor shut down), close it and join the
        thread. Idempotent; raises ``RuntimeError`` on the loop's thread."""
        if self.in_thread():
            raise RuntimeError(f"cannot stop {self._name} from its own thread")
        if self._state == "adopted":
            raise RuntimeError(f"{self._name} is not this handle's to stop")
        with self._lock:
            state, self._state = self._state, "stopped"
            loop, thread = self._loop, self._thread
        if state == "running" and loop is not None:
            with contextlib.suppress(RuntimeError):  # already closed
                loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join()

    def __repr__(self) -> str:
        return f"<LoopThread {self._name} {self._state}>"


def call_in_loop(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> bool:
    """Have ``callback`` run on ``loop``, from any thread: at once when called on
    ``loop`` itself, otherwise soon, through ``loop.call_soon_threadsafe``. Returns
    ``False``, having run and scheduled nothing, when ``loop`` is closed."""
    if running_loop() is loop:
        callback()
        return True
    try:
        loop.call_soon_threadsafe(callback)
    except RuntimeError:  # the loop is closed
        return False
    return True


def _cancel_all_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.run`` does on the way out: cancel what is left and wait for it
    (again, should cancelled tasks have started new ones)."""
    for _ in range(100):
        tasks = asyncio.all_tasks(loop)
        if not tasks:
            return
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        for task in tasks:
            if task.cancelled():
                continue
            exc = task.exception()
            if exc is not None:
                logger.error("task %r failed while its loop stopped", task, exc_info=exc)
    logger.error("tasks kept starting new tasks while the loop stopped; giving up on them")
