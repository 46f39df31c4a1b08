"""One handler registration: its notification buffer and its consumer (private).

client-go's ``processorListener``. The informer appends notifications to the
buffer (unbounded, ordered) without ever waiting; one consumer per listener
takes them out in order and calls the handler:

* a *thread consumer* (a dedicated daemon thread) when some method of the
  handler is a plain function: plain methods run on that thread, coroutine
  methods are sent to the event loop and the thread waits for them, so the
  registration keeps one ordered stream;
* a *task consumer* (one asyncio task on the informer's loop) when every method
  is a coroutine function (or absent): nothing leaves the loop.

A handler that raises is logged with the object's key and the consumer goes
on. ``stop`` drops what is still buffered; the consumer ends once the
notification in hand is done (``cancel=True`` also cancels a coroutine handler
that is running).

What to call for a notification is decided by a ``route`` function, built by
:mod:`kubereflector.controller` from the handler (it applies the filters of
:class:`~kubereflector.FilteringResourceEventHandler`); it runs on the consumer.

Sync tracking (client-go's ``synctrack.SingleFileTracker``): every add that
belongs to the initial list is counted when buffered and uncounted once
handled; ``has_synced`` is true when the upstream has synced and the count is
zero.

Thread-safety: ``add``/``add_initial``/``stop``/``start``/``has_synced`` may be
called from any thread. The resync fields are guarded by the owning
processor's lock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import inspect
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

from .keys import deletion_handling_meta_namespace_key_func

__all__ = ["ADD", "DELETE", "UPDATE", "Call", "Listener", "Notification", "Route"]

logger = logging.getLogger("kubereflector.shared_informer")

ADD: Final = 0
"""``(ADD, obj, is_in_initial_list)``"""
UPDATE: Final = 1
"""``(UPDATE, old, new)``"""
DELETE: Final = 2
"""``(DELETE, obj, None)``; ``obj`` may be a DeletedFinalStateUnknown."""

_KIND_NAMES: Final = ("add", "update", "delete")

Notification = tuple[int, Any, Any]
Call = tuple[Callable[..., Any], tuple[Any, ...], bool]
"""What to call: the function, its arguments, and whether it is a coroutine function."""
Route = Callable[[Notification], "Call | None"]
"""Maps a notification to the call that handles it, or ``None`` to skip it."""


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _wake(fut: asyncio.Future[None]) -> None:
    """Resolve ``fut`` from any thread."""
    loop = fut.get_loop()
    if loop is _running_loop():
        _resolve(fut)
    else:
        with contextlib.suppress(RuntimeError):  # its loop is closed
            loop.call_soon_threadsafe(_resolve, fut)


def _key_of(notification: Notification) -> str:
    kind, a, b = notification
    obj = b if kind == UPDATE else a
    try:
        return repr(deletion_handling_meta_namespace_key_func(obj))
    except Exception:
        return f"an object of type {type(obj).__name__} without a key"


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _discard(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


class Listener:
    """A registration's buffer, consumer, resync schedule and sync tracker."""

    __slots__ = (
        "__weakref__",
        "_cancel",
        "_cond",
        "_delivered",
        "_done_waiters",
        "_failures",
        "_finished",
        "_inflight",
        "_initial_pending",
        "_loop",
        "_on_synced",
        "_started",
        "_stopped",
        "_task",
        "_upstream_has_synced",
        "_waiter",
        "buffer",
        "name",
        "next_resync",
        "requested_resync_period",
        "resync_period",
        "route",
        "uses_thread",
    )

    def __init__(
        self,
        route: Route,
        *,
        uses_thread: bool,
        name: str,
        requested_resync_period: float,
        resync_period: float,
        now: float,
        upstream_has_synced: Callable[[], bool],
        on_synced: Callable[[], None],
    ) -> None:
        self.route = route
        self.uses_thread = uses_thread
        self.name = name
        # Resync schedule; guarded by the processor's lock.
        self.requested_resync_period = requested_resync_period
        self.resync_period = resync_period
        self.next_resync = now + resync_period
        # Everything below is guarded by _cond's lock.
        self._cond = threading.Condition(threading.Lock())
        self.buffer: deque[Notification] = deque()
        self._stopped = False
        self._cancel = False
        self._initial_pending = 0
        self._upstream_has_synced = upstream_has_synced
        self._on_synced = on_synced
        self._delivered = 0
        self._failures = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._finished = False
        self._task: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._inflight: concurrent.futures.Future[Any] | None = None
        self._done_waiters: list[asyncio.Future[None]] = []

    # -- resync (processor lock held) -------------------------------------------

    def should_resync(self, now: float) -> bool:
        return self.resync_period > 0 and now >= self.next_resync

    def determine_next_resync(self, now: float) -> None:
        self.next_resync = now + self.resync_period

    # -- producer side ------------------------------------------------------------

    def add(self, notification: Notification) -> None:
        """Buffer one notification; never blocks on the handler."""
        with self._cond:
            if self._stopped:
                return
            if notification[0] == ADD and notification[2]:
                self._initial_pending += 1
            self.buffer.append(notification)
            self._wake_locked()

    def add_initial(self, objects: Iterable[Any]) -> None:
        """Buffer an add belonging to the initial list for each object, all at once."""
        with self._cond:
            if self._stopped:
                return
            before = len(self.buffer)
            self.buffer.extend([(ADD, obj, True) for obj in objects])
            self._initial_pending += len(self.buffer) - before
            self._wake_locked()

    def _wake_locked(self) -> None:
        if self.uses_thread:
            self._cond.notify()
        elif self._waiter is not None:
            waiter, self._waiter = self._waiter, None
            _wake(waiter)

    # -- state ----------------------------------------------------------------------

    def has_synced(self) -> bool:
        # Upstream first: once it is true, every initial add has been counted.
        if not self._upstream_has_synced():
            return False
        with self._cond:
            return self._initial_pending <= 0

    @property
    def pending(self) -> int:
        """Notifications buffered and not yet taken by the consumer."""
        return len(self.buffer)

    @property
    def delivered(self) -> int:
        return self._delivered

    @property
    def failures(self) -> int:
        return self._failures

    @property
    def stopped(self) -> bool:
        return self._stopped

    # -- consumer lifecycle -----------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the consumer on ``loop`` (once). Callable from any thread."""
        with self._cond:
            if self._started or self._stopped:
                return
            self._started = True
            self._loop = loop
        if self.uses_thread:
            threading.Thread(
                target=self._thread_main, name=f"kubereflector handler {self.name}", daemon=True
            ).start()
        elif loop is _running_loop():
            self._start_task()
        else:
            try:
                loop.call_soon_threadsafe(self._start_task)
            except RuntimeError:
                logger.error("handler %s not started: its event loop is closed", self.name)
                self._mark_finished()

    def _start_task(self) -> None:
        loop = self._loop
        assert loop is not None
        with self._cond:
            stopped = self._stopped
        if stopped:
            self._mark_finished()
            return
        self._task = loop.create_task(self._task_main(), name=f"kubereflector handler {self.name}")

    def stop(self, *, cancel: bool = False) -> None:
        """Drop what is buffered and end the consumer after the notification in hand.

        ``cancel`` also cancels a coroutine handler that is running. Callable
        from any thread; idempotent.
        """
        with self._cond:
            self._stopped = True
            self.buffer.clear()
            if cancel:
                self._cancel = True
            self._cond.notify_all()
            waiter, self._waiter = self._waiter, None
            started = self._started
            inflight = self._inflight
            task = self._task
            loop = self._loop
        if waiter is not None:
            _wake(waiter)
        if not started:
            self._mark_finished()
            return
        if cancel:
            if inflight is not None:
                inflight.cancel()
            if task is not None and loop is not None:
                if loop is _running_loop():
                    task.cancel()
                else:
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(task.cancel)

    async def wait_stopped(self) -> None:
        """Return once the consumer has ended (at once if it never started)."""
        loop = asyncio.get_running_loop()
        with self._cond:
            if self._finished or not self._started:
                return
            fut: asyncio.Future[None] = loop.create_future()
            self._done_waiters.append(fut)
        await fut

    def _mark_finished(self) -> None:
        with self._cond:
            self._finished = True
            waiters, self._done_waiters = self._done_waiters, []
        for fut in waiters:
            _wake(fut)

    # -- delivery ---------------------------------------------------------------------

    def _route(self, notification: Notification) -> tuple[Call | None, bool]:
        """(the call, or None to skip; whether routing itself succeeded)."""
        try:
            return self.route(notification), True
        except Exception:
            logger.exception(
                "handler %s: its filter failed on the %s of %s",
                self.name,
                _KIND_NAMES[notification[0]],
                _key_of(notification),
            )
            return None, False

    def _log_failure(self, notification: Notification) -> None:
        logger.exception(
            "handler %s failed on the %s of %s",
            self.name,
            _KIND_NAMES[notification[0]],
            _key_of(notification),
        )

    def _handled(self, notification: Notification, ok: bool) -> None:
        synced = False
        with self._cond:
            if ok:
                self._delivered += 1
            else:
                self._failures += 1
            if notification[0] == ADD and notification[2]:
                self._initial_pending -= 1
                synced = self._initial_pending == 0
        if synced:
            self._on_synced()

    # -- task consumer (every method is a coroutine function) ------------------------

    async def _task_main(self) -> None:
        try:
            while True:
                notification = await self._next_async()
                if notification is None:
                    return
                call, ok = self._route(notification)
                if call is not None:
                    ok = await self._call_on_loop(notification, call)
                self._handled(notification, ok)
        finally:
            self._mark_finished()

    async def _next_async(self) -> Notification | None:
        loop = self._loop
        assert loop is not None
        while True:
            with self._cond:
                if self._stopped:
                    return None
                if self.buffer:
                    return self.buffer.popleft()
                fut: asyncio.Future[None] = loop.create_future()
                self._waiter = fut
            await fut

    async def _call_on_loop(self, notification: Notification, call: Call) -> bool:
        fn, args, is_async = call
        try:
            if is_async:
                await fn(*args)
            else:  # not expected in a task consumer; kept off the loop all the same
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(None, functools.partial(fn, *args))
                if inspect.isawaitable(result):
                    await result
        except asyncio.CancelledError:
            if self._cancel or _being_cancelled():
                raise
            self._log_failure(notification)
            return False
        except Exception:
            self._log_failure(notification)
            return False
        return True

    # -- thread consumer (some method is a plain function) ----------------------------

    def _thread_main(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self.buffer and not self._stopped:
                        self._cond.wait()
                    if self._stopped:
                        return
                    notification = self.buffer.popleft()
                call, ok = self._route(notification)
                if call is not None:
                    ok = self._call_from_thread(notification, call)
                self._handled(notification, ok)
        finally:
            self._mark_finished()

    def _call_from_thread(self, notification: Notification, call: Call) -> bool:
        fn, args, is_async = call
        try:
            result = fn(*args)
            if is_async or inspect.isawaitable(result):
                # A coroutine handler (or a plain one that returned an awaitable):
                # it runs on the loop while this thread waits, keeping the order.
                self._await_on_loop(result)
        except concurrent.futures.CancelledError:
            if self._cancel:
                return False
            self._log_failure(notification)
            return False
        except Exception:
            self._log_failure(notification)
            return False
        return True

    def _await_on_loop(self, awaitable: Any) -> None:
        loop = self._loop
        assert loop is not None
        coro = awaitable if asyncio.iscoroutine(awaitable) else _await(awaitable)
        try:
            cfut = asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError:
            _discard(coro)
            raise
        with self._cond:
            self._inflight = cfut
            cancel = self._cancel
        if cancel:
            cfut.cancel()
        try:
            cfut.result()
        finally:
            with self._cond:
                self._inflight = None

    def __repr__(self) -> str:
        kind = "thread" if self.uses_thread else "task"
        return f"<Listener {self.name} {kind} pending={len(self.buffer)}>"


def _being_cancelled() -> bool:
    """Whether the current task was asked to stop (always assumed on Python 3.10)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return cancelling is None or bool(cancelling())
