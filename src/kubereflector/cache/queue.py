"""The ``Queue`` protocol shared by :class:`~kubereflector.DeltaFIFO`,
:class:`~kubereflector.RealFIFO` and :class:`~kubereflector.FIFO`, and its errors.

A queue sits between a producer (the Reflector, which writes through the five
:class:`~kubereflector.ReflectorStore` methods) and one consumer (the Controller,
which pops). The Reflector and the Controller take any object with these methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeAlias, runtime_checkable

from typing_extensions import TypeVar

from .._aio.wakeup import QueueClosed, QueueEmpty
from .store import ReflectorStore

__all__ = ["PopProcessFunc", "Queue", "QueueClosed", "QueueEmpty"]

# What a queue pops: a Deltas for DeltaFIFO and RealFIFO, the object for FIFO. No
# single default fits both, so an unparametrised Queue pops Any, as before.
Item = TypeVar("Item", default=Any)
Item_co = TypeVar("Item_co", covariant=True, default=Any)

PopProcessFunc: TypeAlias = Callable[[Item, bool], object]
"""Called by ``pop`` with the popped item and ``is_in_initial_list``
(``PopProcessFunc[Deltas[T]]`` for a DeltaFIFO or RealFIFO of ``T``).

It runs under the queue's lock, so it must not block or wait (it may call the
queue's read methods). Its return value is ignored; an exception it raises
propagates out of ``pop`` and the item is not requeued.
"""


@runtime_checkable
class Queue(ReflectorStore[Any], Protocol[Item_co]):
    """A :class:`~kubereflector.ReflectorStore` that a consumer drains with ``pop``;
    ``Queue[Item]`` pops items of type ``Item``: ``Queue[Deltas[T]]`` for a DeltaFIFO
    or RealFIFO of ``T``, ``Queue[T]`` for a FIFO (plain ``Queue``: ``Any``).

    ``pop`` waits (without blocking the event loop) until an item is queued, hands
    it to ``process(item, is_in_initial_list)`` under the queue's lock and returns
    it; it raises :class:`QueueClosed` once the queue is closed and empty.
    ``pop_nowait`` does the same without waiting and raises :class:`QueueEmpty`
    when there is nothing to pop. Every method is thread-safe.
    """

    async def pop(self, process: PopProcessFunc[Item_co]) -> Item_co:
        """Wait for the next item, hand it to ``process`` and return it."""
        ...

    def pop_nowait(self, process: PopProcessFunc[Item_co]) -> Item_co:
        """Like :meth:`pop`, raising :class:`QueueEmpty` instead of waiting."""
        ...

    def close(self) -> None:
        """Close the queue: ``pop`` raises :class:`QueueClosed` once it is drained."""
        ...

    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        ...

    def has_synced(self) -> bool:
        """Whether the items of the first ``replace`` have all been popped and processed."""
        ...

    def list_keys(self) -> list[str]:
        """The keys with something queued."""
        ...
