"""Blocking ``pop`` for the queues: coroutines and threads wait without polling (private).

Each queue guards its state with one ``threading.RLock`` and owns one
:class:`Waiters`, guarded by that same lock. A coroutine that finds the queue
empty parks an ``asyncio.Future`` of its own event loop in ``Waiters`` and awaits
it; a writer that makes an item available resolves the oldest parked future,
directly when the waiter's loop runs in the writer's thread, otherwise through
``loop.call_soon_threadsafe``. A plain thread (:func:`pop_blocking_thread`) parks
a :class:`ThreadWaiter` in the same ``Waiters`` and blocks on it; a writer wakes
it like a future. A writer only tests ``if waiters:`` when nobody waits, so the
hot add path pays one truthiness check.

Protocol (every queue follows it):

* a writer calls :meth:`Waiters.wake` once per newly poppable item, with the lock
  held, and only ``if waiters:``; ``close`` calls :meth:`Waiters.wake_all`;
* a woken coroutine takes the lock again and re-checks: it pops if an item is
  there and parks again otherwise (another consumer may have been faster);
* a coroutine cancelled after its wakeup was sent passes the wakeup on to the
  next waiter if items remain, so a cancellation never swallows a wakeup meant
  for someone else; one cancelled while still parked removes its future. A
  thread whose wait times out or is interrupted does the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Sized
from typing import Generic, TypeVar

from .._compiled import mypyc_attr

__all__ = [
    "BlockingQueue",
    "QueueClosed",
    "QueueEmpty",
    "ThreadWaiter",
    "Waiters",
    "pop_blocking",
    "pop_blocking_thread",
    "pop_nowait",
]

_A = TypeVar("_A")
_R = TypeVar("_R")
_Items = TypeVar("_Items", bound=Sized)


@mypyc_attr(native_class=False)
class QueueClosed(Exception):
    """The queue was closed and holds nothing more to pop."""


@mypyc_attr(native_class=False)
class QueueEmpty(Exception):
    """``pop_nowait`` found nothing to pop (and the queue is still open)."""


def _resolve(fut: asyncio.Future[None]) -> None:
    # Runs on the waiter's own loop; the waiter may have been cancelled meanwhile.
    if not fut.done():
        fut.set_result(None)


class ThreadWaiter:
    """A plain thread parked in :func:`pop_blocking_thread`: a lock held until woken."""

    __slots__ = ("_lock", "_woken")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._woken = False

    def done(self) -> bool:
        """Whether it was woken (the same question as ``Future.done``)."""
        return self._woken

    def wake(self) -> None:
        """Let the waiting thread go (call at most once, from any thread)."""
        self._woken = True
        self._lock.release()

    def wait(self, timeout: float | None) -> bool:
        """Block until woken or ``timeout`` seconds passed; whether it was woken."""
        return self._lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout))


@mypyc_attr(native_class=False)
class Waiters(deque["asyncio.Future[None] | ThreadWaiter"]):
    """Futures of the coroutines, and the threads, parked in ``pop``, oldest first.

    Not thread-safe by itself: every method must be called with the owning
    queue's lock held.
    """

    __slots__ = ()

    def wake(self, n: int = 1) -> None:
        """Wake up to ``n`` parked coroutines, oldest first."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # a writer on a thread without a loop
            running = None
        while n > 0 and self:
            fut = self.popleft()
            if fut.done():
                # Cancelled while parked; its coroutine cleans up after itself.
                continue
            if isinstance(fut, ThreadWaiter):
                fut.wake()
                n -= 1
                continue
            loop = fut.get_loop()
            if loop is running:
                fut.set_result(None)
            else:
                try:
                    loop.call_soon_threadsafe(_resolve, fut)
                except RuntimeError:
                    # That loop is closed: its coroutine can never resume.
                    continue
            n -= 1

    def wake_all(self) -> None:
        """Wake every parked coroutine (used by ``close``)."""
        self.wake(len(self))


def _has_items(ready: Callable[[], bool]) -> bool:
    try:
        return ready()
    except QueueClosed:
        return False


def _withdraw(
    lock: threading.RLock,
    waiters: Waiters,
    waiter: asyncio.Future[None] | ThreadWaiter,
    ready: Callable[[], bool],
) -> None:
    """Take a waiter that gives up (cancelled, interrupted) out of ``waiters``."""
    with lock:
        try:
            waiters.remove(waiter)
        except ValueError:
            # A writer already spent a wakeup on it: hand it on.
            if waiters and _has_items(ready):
                waiters.wake()


async def pop_blocking(
    lock: threading.RLock,
    waiters: Waiters,
    ready: Callable[[], bool],
    pop: Callable[[_A], _R],
    arg: _A,
) -> _R:
    """Wait until ``ready()`` and return ``pop(arg)``, both called with ``lock`` held.

    ``ready()`` returns whether an item can be popped, or raises
    :class:`QueueClosed` when the queue is closed and empty; that error propagates.
    Cancellation is safe at any point: nothing is popped unless ``pop`` ran.
    """
    loop = asyncio.get_running_loop()
    while True:
        with lock:
            if ready():
                return pop(arg)
            fut: asyncio.Future[None] = loop.create_future()
            waiters.append(fut)
        try:
            await fut
        except BaseException:
            _withdraw(lock, waiters, fut, ready)
            raise


def pop_blocking_thread(
    lock: threading.RLock,
    waiters: Waiters,
    ready: Callable[[], bool],
    pop: Callable[[_A], _R],
    arg: _A,
    timeout: float | None = None,
) -> _R:
    """:func:`pop_blocking` for plain threads: block the calling thread until
    ``ready()`` and return ``pop(arg)``, both called with ``lock`` held.

    Raises :class:`QueueEmpty` when ``timeout`` (wall-clock seconds; ``None``
    waits for ever) passes first, :class:`QueueClosed` from ``ready()`` as
    :func:`pop_blocking`, and :class:`RuntimeError` when called on a thread that
    runs an event loop (blocking there would stall every task on it).
    """
    if asyncio._get_running_loop() is not None:
        raise RuntimeError(
            "cannot block the thread that runs an event loop (every task on it would "
            "stall): await the asynchronous get instead"
        )
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with lock:
            if ready():
                return pop(arg)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise QueueEmpty(f"nothing to get within {timeout} s")
            waiter = ThreadWaiter()
            waiters.append(waiter)
        try:
            woken = waiter.wait(remaining)
        except BaseException:  # interrupted (KeyboardInterrupt)
            _withdraw(lock, waiters, waiter, ready)
            raise
        if not woken:
            # Timed out: the loop checks once more, then raises QueueEmpty. Had a
            # writer woken us meanwhile, that check takes its item.
            with lock, contextlib.suppress(ValueError):
                waiters.remove(waiter)


def pop_nowait(
    lock: threading.RLock,
    ready: Callable[[], bool],
    pop: Callable[[_A], _R],
    arg: _A,
) -> _R:
    """``pop(arg)`` under ``lock`` if ``ready()``, else raise :class:`QueueEmpty`.

    :class:`QueueClosed` from ``ready()`` propagates.
    """
    with lock:
        if ready():
            return pop(arg)
    raise QueueEmpty("the queue is empty")


@mypyc_attr(allow_interpreted_subclasses=True)
class BlockingQueue(Generic[_R, _Items]):
    """What the three queues share: one ``RLock``, the parked pops, and closing.

    A subclass keeps what can be popped in ``_items`` (an ``_Items`` container,
    truthy when a pop can proceed), wakes ``_waiters`` as the protocol above says,
    and implements ``_pop_locked(process)``, called with the lock held.
    """

    __slots__ = ("__weakref__", "_closed", "_lock", "_waiters")

    _items: _Items

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._waiters = Waiters()
        self._closed = False

    async def pop(self, process: Callable[[_R, bool], object]) -> _R:
        """Wait for the next item, remove it, hand it to
        ``process(item, is_in_initial_list)`` and return it.

        ``process`` runs with the queue's lock held: it must not block or await,
        and it may call this queue's read methods. An exception from ``process``
        propagates, and the item is not requeued. Raises :class:`QueueClosed` once
        the queue is closed and empty (items still queued at ``close`` are popped
        first). Waiting does not block the event loop; cancelling it pops nothing.
        """
        return await pop_blocking(
            self._lock, self._waiters, self._ready_locked, self._pop_locked, process
        )

    def pop_nowait(self, process: Callable[[_R, bool], object]) -> _R:
        """Like :meth:`pop` but raises :class:`QueueEmpty` instead of waiting."""
        return pop_nowait(self._lock, self._ready_locked, self._pop_locked, process)

    def _ready_locked(self) -> bool:
        if self._items:
            return True
        if self._closed:
            raise QueueClosed("the queue is closed")
        return False

    def _pop_locked(self, process: Callable[[_R, bool], object]) -> _R:
        raise NotImplementedError

    def close(self) -> None:
        """Close the queue: waiting pops wake up, and ``pop`` raises
        :class:`QueueClosed` once what is still queued is drained. Writes are
        still accepted."""
        with self._lock:
            self._closed = True
            self._waiters.wake_all()

    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        with self._lock:
            return self._closed

    def __len__(self) -> int:
        """How many items are queued."""
        return len(self._items)
