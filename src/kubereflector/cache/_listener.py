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

What to call for each kind of notification is a :class:`Calls`, built by
:mod:`kubereflector.cache.controller` from the handler; its ``route`` (the filters of
:class:`~kubereflector.FilteringResourceEventHandler`) runs on the consumer.

Sync tracking (client-go's ``synctrack.SingleFileTracker``): the adds that
belong to the initial list are counted when buffered and counted again once
handled; ``has_synced`` is true when the upstream has synced and the second
count has caught up with the first.

Cost: the producer takes the lock once per call (``add_batch`` buffers a whole
batch at once) and wakes the consumer only when it waits; the consumer takes
each notification without the lock.

The collector: while a listener holds the notifications of a list or relist,
or any notification for a thread consumer, it keeps the collector's full
collections deferred (:func:`~kubereflector.cache._gc.defer_full_collections`)
until its consumer has taken them all (see :meth:`Listener.add_batch`).

Thread-safety: ``add``/``add_batch``/``add_initial``/``stop``/``start``/
``has_synced`` may be called from any thread. The resync fields are guarded by
the owning processor's lock.
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

from .._aio.tasks import cancel_requested, create_task, running_loop
from ._gc import defer_full_collections
from .keys import deletion_handling_meta_namespace_key_func

__all__ = ["ADD", "DELETE", "UPDATE", "Calls", "Listener", "Notification", "Route"]

logger = logging.getLogger("kubereflector.shared_informer")

ADD: Final = 0
"""``(ADD, obj, is_in_initial_list)``"""
UPDATE: Final = 1
"""``(UPDATE, old, new)``"""
DELETE: Final = 2
"""``(DELETE, obj, None)``; ``obj`` may be a DeletedFinalStateUnknown."""

_KIND_NAMES: Final = ("add", "update", "delete")


_YIELD_EVERY: Final = 128
"""Notifications a task consumer delivers in a row before it lets other tasks run."""

Notification = tuple[int, Any, Any]
Route = Callable[[Notification], "Notification | None"]
"""Maps a notification to the one to deliver, or ``None`` to drop it."""


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _wake(fut: asyncio.Future[None]) -> None:
    """Resolve ``fut`` from any thread."""
    loop = fut.get_loop()
    if loop is running_loop():
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


def _settle(outcome: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
    """Copy ``task``'s outcome to ``outcome`` (a done callback, on the loop)."""
    if task.cancelled():
        outcome.cancel()
    elif task.exception() is not None:
        outcome.set_exception(task.exception())
    else:
        outcome.set_result(task.result())


def _discard(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


class Calls:
    """What a listener calls for each kind of notification (built from a handler).

    ``functions[kind]`` is the method for ``ADD``/``UPDATE``/``DELETE``, or
    ``None`` to skip that kind; ``coroutine[kind]`` whether it is a coroutine
    function. ``route``, when set, runs first on the consumer and maps each
    notification to the one to deliver, or ``None`` to drop it (the filters of
    :class:`~kubereflector.FilteringResourceEventHandler`).
    """

    __slots__ = ("coroutine", "functions", "route")

    def __init__(
        self,
        functions: tuple[Callable[..., Any] | None, ...],
        coroutine: tuple[bool, ...],
        route: Route | None = None,
    ) -> None:
        self.functions = functions
        self.coroutine = coroutine
        self.route = route

    @property
    def uses_thread(self) -> bool:
        """Whether some method is a plain function (it then runs on a worker thread)."""
        return any(
            fn is not None and not is_async
            for fn, is_async in zip(self.functions, self.coroutine, strict=True)
        )


class Listener:
    """A registration's buffer, consumer, resync schedule and sync tracker."""

    __slots__ = (
        "__weakref__",
        "_calls",
        "_cancel",
        "_cond",
        "_delivered",
        "_done_waiters",
        "_failures",
        "_finished",
        "_gc_window",
        "_idle",
        "_inflight",
        "_initial_added",
        "_initial_handled",
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
        "uses_thread",
    )

    def __init__(
        self,
        calls: Calls,
        *,
        name: str,
        requested_resync_period: float,
        resync_period: float,
        now: float,
        upstream_has_synced: Callable[[], bool],
        on_synced: Callable[[], None],
    ) -> None:
        self._calls = calls
        self.uses_thread = calls.uses_thread
        self.name = name
        # Resync schedule; guarded by the processor's lock.
        self.requested_resync_period = requested_resync_period
        self.resync_period = resync_period
        self.next_resync = now + resync_period
        # Guarded by _cond's lock: the producer's side of the buffer, the
        # lifecycle, and _idle/_waiter (whether the consumer waits for work).
        self._cond = threading.Condition(threading.Lock())
        self.buffer: deque[Notification] = deque()
        self._stopped = False
        self._cancel = False
        self._idle = False
        self._initial_added = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._finished = False
        self._task: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._inflight: asyncio.Task[Any] | None = None  # a thread consumer's coroutine
        self._done_waiters: list[asyncio.Future[None]] = []
        # Open while a relist's notifications, or any for a thread consumer, are
        # buffered; see add_batch.
        self._gc_window: contextlib.ExitStack | None = None
        # Written by the consumer only (one writer: no lock needed to count).
        self._initial_handled = 0
        self._delivered = 0
        self._failures = 0
        self._upstream_has_synced = upstream_has_synced
        self._on_synced = on_synced

    # -- resync (processor lock held) -------------------------------------------

    def should_resync(self, now: float) -> bool:
        return self.resync_period > 0 and now >= self.next_resync

    def determine_next_resync(self, now: float) -> None:
        self.next_resync = now + self.resync_period

    # -- producer side ------------------------------------------------------------

    def add_batch(
        self, notifications: list[Notification], initial_adds: int, *, bulk: bool = False
    ) -> None:
        """Buffer ``notifications`` in order, at once; ``initial_adds`` of them are
        adds of the initial list. Never blocks on the handler.

        Until the consumer has handled every buffered notification, the
        collector's full collections are deferred
        (:func:`~kubereflector.cache._gc.defer_full_collections`) when ``bulk`` (they
        are a whole list or relist) or when the consumer is a thread:

        * a relist's notifications hold the objects it replaced: a full
          collection while they are buffered would traverse the old and the
          new cache, one after them only the new;
        * a thread consumer runs when it gets the GIL (slices of
          ``sys.getswitchinterval()``), so a backlog of objects builds up
          meanwhile; they survive young collections, and each time enough of
          them have, CPython would run a full collection over the whole cache
          (10-16 per 20,000 watch events of ~5 KB Pods into a 1,000-Pod cache;
          2 with the window).

        The window closes when the consumer finds the buffer empty, or the
        listener stops."""
        with self._cond:
            if self._stopped:
                return
            self._initial_added += initial_adds
            self.buffer.extend(notifications)
            if (bulk or self.uses_thread) and notifications and self._gc_window is None:
                window = contextlib.ExitStack()
                window.enter_context(defer_full_collections())
                self._gc_window = window
            self._wake_locked()

    def add_initial(self, objects: Iterable[Any]) -> None:
        """Buffer an add belonging to the initial list for each object, all at once."""
        notifications = [(ADD, obj, True) for obj in objects]
        self.add_batch(notifications, len(notifications))

    def _end_gc_window_locked(self) -> None:
        """Close the GC window, if open (the buffer is empty, or the listener stopped)."""
        window, self._gc_window = self._gc_window, None
        if window is not None:
            window.close()

    def _wake_locked(self) -> None:
        if self._idle:
            self._idle = False
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
            return self._initial_handled >= self._initial_added

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
        elif loop is running_loop():
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
        self._task = create_task(loop, self._task_main(), name=f"kubereflector handler {self.name}")

    def stop(self, *, cancel: bool = False) -> None:
        """Drop what is buffered and end the consumer after the notification in hand.

        ``cancel`` also cancels a coroutine handler that is running. Callable
        from any thread; idempotent.
        """
        with self._cond:
            self._stopped = True
            self.buffer.clear()
            self._end_gc_window_locked()
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
        if cancel and loop is not None:
            for running in (inflight, task):
                if running is None:
                    continue
                if loop is running_loop():
                    running.cancel()
                else:
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(running.cancel)

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

    # -- delivery (on the consumer) ------------------------------------------------------
    #
    # The consumer takes notifications with a bare ``popleft`` (atomic; it is the
    # only one taking) and needs the lock only to wait for more. ``_stopped`` is
    # read before each one: once set, nothing more is delivered.

    def _route(self, notification: Notification) -> Notification | None:
        """The notification to deliver (``None``: drop it); a failing filter is
        logged and counted, and drops it."""
        route = self._calls.route
        assert route is not None
        try:
            return route(notification)
        except Exception:
            logger.exception(
                "handler %s: its filter failed on the %s of %s",
                self.name,
                _KIND_NAMES[notification[0]],
                _key_of(notification),
            )
            self._failures += 1
            return None

    def _log_failure(self, notification: Notification) -> None:
        self._failures += 1
        logger.exception(
            "handler %s failed on the %s of %s",
            self.name,
            _KIND_NAMES[notification[0]],
            _key_of(notification),
        )

    def _count_initial(self) -> None:
        """Count an add of the initial list as handled (the consumers call it for
        ``taken[0] == ADD and taken[2]``, inline: it is on every notification's path)."""
        self._initial_handled += 1
        if self._initial_handled >= self._initial_added:
            self._on_synced()

    # -- task consumer (every method is a coroutine function) ------------------------

    async def _task_main(self) -> None:
        buffer = self.buffer
        functions = self._calls.functions
        route = self._calls.route
        in_a_row = 0
        try:
            while True:
                try:
                    taken = buffer.popleft()
                except IndexError:
                    if not await self._wait_async():
                        return
                    in_a_row = 0
                    continue
                if self._stopped:
                    return
                notification = taken if route is None else self._route(taken)
                if notification is not None:
                    kind, a, b = notification
                    fn = functions[kind]
                    if fn is None:
                        self._delivered += 1
                    else:
                        try:
                            await (fn(a) if kind == DELETE else fn(a, b))
                            self._delivered += 1
                        except asyncio.CancelledError:
                            if self._cancel or cancel_requested(self._task):
                                raise
                            self._log_failure(taken)
                        except Exception:
                            self._log_failure(taken)
                if taken[0] == ADD and taken[2]:
                    self._count_initial()
                in_a_row += 1
                if in_a_row >= _YIELD_EVERY:  # handlers that never suspend: share the loop
                    in_a_row = 0
                    await asyncio.sleep(0)
        finally:
            self._mark_finished()

    async def _wait_async(self) -> bool:
        """Wait for something to deliver; ``False`` once stopped."""
        loop = self._loop
        assert loop is not None
        with self._cond:
            if self._stopped:
                return False
            if self.buffer:
                return True
            self._end_gc_window_locked()
            fut: asyncio.Future[None] = loop.create_future()
            self._waiter = fut
        await fut
        return not self._stopped

    # -- thread consumer (some method is a plain function) ----------------------------

    def _thread_main(self) -> None:
        buffer = self.buffer
        functions = self._calls.functions
        route = self._calls.route
        coroutine = self._calls.coroutine
        cond = self._cond
        try:
            while True:
                try:
                    taken = buffer.popleft()
                except IndexError:
                    with cond:
                        while not buffer and not self._stopped:
                            self._end_gc_window_locked()
                            self._idle = True
                            cond.wait()
                        self._idle = False
                        if self._stopped:
                            return
                    continue
                if self._stopped:
                    return
                notification = taken if route is None else self._route(taken)
                if notification is not None:
                    kind, a, b = notification
                    fn = functions[kind]
                    if fn is None:
                        self._delivered += 1
                    else:
                        try:
                            result = fn(a) if kind == DELETE else fn(a, b)
                            if coroutine[kind] or (
                                result is not None and inspect.isawaitable(result)
                            ):
                                # A coroutine method (or a plain one that returned an
                                # awaitable): it runs on the loop while this thread
                                # waits, keeping the order.
                                self._await_on_loop(result)
                            self._delivered += 1
                        except concurrent.futures.CancelledError:
                            if self._cancel:
                                self._failures += 1
                            else:
                                self._log_failure(taken)
                        except Exception:
                            self._log_failure(taken)
                if taken[0] == ADD and taken[2]:
                    self._count_initial()
        finally:
            self._mark_finished()

    def _await_on_loop(self, awaitable: Any) -> None:
        """Run ``awaitable`` in a task on the loop; block this thread until it ends.

        ``stop(cancel=True)`` cancels that task (also when it has not started
        yet), and this returns or raises only once the coroutine has really
        finished: a stopped informer leaves none of its handlers running, on
        every Python version. Raises what the coroutine raised, or
        ``concurrent.futures.CancelledError`` if it ended cancelled.
        """
        loop = self._loop
        assert loop is not None
        coro = awaitable if asyncio.iscoroutine(awaitable) else _await(awaitable)
        outcome: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def start() -> None:
            task = loop.create_task(coro)
            task.add_done_callback(functools.partial(_settle, outcome))
            with self._cond:
                self._inflight = task
                cancel = self._cancel
            if cancel:
                task.cancel()

        try:
            loop.call_soon_threadsafe(start)
        except RuntimeError:  # the loop is closed
            _discard(coro)
            raise
        try:
            outcome.result()
        finally:
            with self._cond:
                self._inflight = None

    def __repr__(self) -> str:
        kind = "thread" if self.uses_thread else "task"
        return f"<Listener {self.name} {kind} pending={len(self.buffer)}>"
