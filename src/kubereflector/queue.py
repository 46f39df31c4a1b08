"""The ``Queue`` protocol shared by :class:`~kubereflector.DeltaFIFO`,
:class:`~kubereflector.RealFIFO` and :class:`~kubereflector.FIFO`, and its errors.

A queue sits between a producer (the Reflector, which writes through the five
:class:`~kubereflector.ReflectorStore` methods) and one consumer (the Controller,
which pops). The Reflector and the Controller take any object with these methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from .store import ReflectorStore

__all__ = ["PopProcessFunc", "Queue", "QueueClosed", "QueueEmpty"]

PopProcessFunc = Callable[[Any, bool], object]
"""Called by ``pop`` with the popped item and ``is_in_initial_list``.

It runs under the queue's lock, so it must not block or wait (it may call the
queue's read methods). Its return value is ignored; an exception it raises
propagates out of ``pop`` and the item is not requeued.
"""


class QueueClosed(Exception):
    """The queue was closed and holds nothing more to pop."""


class QueueEmpty(Exception):
    """``pop_nowait`` found nothing to pop (and the queue is still open)."""


@runtime_checkable
class Queue(ReflectorStore, Protocol):
    """A :class:`~kubereflector.ReflectorStore` that a consumer drains with ``pop``.

    ``pop`` waits (without blocking the event loop) until an item is queued, hands
    it to ``process(item, is_in_initial_list)`` under the queue's lock and returns
    it; it raises :class:`QueueClosed` once the queue is closed and empty.
    ``pop_nowait`` does the same without waiting and raises :class:`QueueEmpty`
    when there is nothing to pop. Every method is thread-safe.
    """

    async def pop(self, process: PopProcessFunc) -> Any: ...

    def pop_nowait(self, process: PopProcessFunc) -> Any: ...

    def close(self) -> None: ...

    def is_closed(self) -> bool: ...

    def has_synced(self) -> bool: ...

    def list_keys(self) -> list[str]: ...
