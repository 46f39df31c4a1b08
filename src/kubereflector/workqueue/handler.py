"""EnqueueHandler: the one line between an informer and a work queue.

``informer.add_event_handler(EnqueueHandler(queue))`` adds the
``namespace/name`` key of every object added, updated or deleted (a
:class:`~kubereflector.DeletedFinalStateUnknown` tombstone included) to
``queue``; workers then read the object from the informer's cache by that key
(level-based, as controller-runtime's ``EnqueueRequestForObject``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Final, Generic, TypeVar, overload

from ..cache.keys import (
    deletion_handling_meta_namespace_key_func,
    get_resource_version,
    split_meta_namespace_key,
)
from .queue import WorkQueue

__all__ = ["LOW_PRIORITY", "EnqueueHandler", "namespaced_name"]

K = TypeVar("K", bound=Hashable)

LOW_PRIORITY: Final = -100
"""controller-runtime's ``LowPriority``: for work that is not news (see
:class:`EnqueueHandler`'s ``low_priority``)."""


def namespaced_name(obj: Any) -> tuple[str, str]:
    """``(namespace, name)`` of ``obj`` (namespace ``""`` when cluster-scoped), also
    of a :class:`~kubereflector.DeletedFinalStateUnknown`: controller-runtime's
    request, as a key function for :class:`EnqueueHandler`.

    Raises :class:`~kubereflector.KeyFuncError` when ``obj`` has no name.
    """
    return split_meta_namespace_key(deletion_handling_meta_namespace_key_func(obj))


def _unchanged(old: Any, new: Any) -> bool:
    """Whether an update changed nothing: a resync, the same ``resourceVersion``."""
    version = get_resource_version(new)
    return version is not None and version == get_resource_version(old)


class EnqueueHandler(Generic[K]):
    """A :class:`~kubereflector.ResourceEventHandler` that adds
    ``key_func(obj)`` of every added, updated (the new object) and deleted
    object to ``queue``.

    ``key_func`` defaults to
    :func:`~kubereflector.deletion_handling_meta_namespace_key_func`
    (``"namespace/name"``); :func:`namespaced_name` gives ``(namespace, name)``
    tuples. A deleted object may be a
    :class:`~kubereflector.DeletedFinalStateUnknown`: both handle it, and a key
    function of your own must too.

    ``low_priority`` (``None``: no difference) is the priority of work that is
    not news, as controller-runtime's ``WithLowPriorityWhenUnchanged``: the adds
    of the initial list and updates that changed nothing (resyncs: the same
    ``resourceVersion``). Give it :data:`LOW_PRIORITY` so that a restart's
    thousands of initial reconciles do not delay a live change; everything else
    is added with priority 0.

    The methods are coroutine functions that never wait, so an informer calls
    them on its event loop without a thread of their own (called directly, each
    returns a coroutine to await). An object without a key raises
    :class:`~kubereflector.KeyFuncError` (the informer logs it and goes on).
    """

    __slots__ = ("key_func", "low_priority", "queue")

    @overload
    def __init__(
        self: EnqueueHandler[str], queue: WorkQueue[str], *, low_priority: int | None = None
    ) -> None: ...

    @overload
    def __init__(
        self,
        queue: WorkQueue[K],
        key_func: Callable[[Any], K],
        *,
        low_priority: int | None = None,
    ) -> None: ...

    def __init__(
        self,
        queue: WorkQueue[Any],
        key_func: Callable[[Any], Any] = deletion_handling_meta_namespace_key_func,
        *,
        low_priority: int | None = None,
    ) -> None:
        self.queue = queue
        self.key_func = key_func
        self.low_priority = low_priority

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        """Add the object's key (at ``low_priority`` when it comes from the initial list and
        one is set)."""
        low = self.low_priority
        self.queue.add(self.key_func(obj), low if is_in_initial_list and low is not None else 0)

    async def on_update(self, old: Any, new: Any) -> None:
        """Add the new object's key (at ``low_priority``, when set, if nothing changed: a
        resync)."""
        low = self.low_priority
        if low is not None and _unchanged(old, new):
            self.queue.add(self.key_func(new), low)
        else:
            self.queue.add(self.key_func(new))

    async def on_delete(self, obj: Any) -> None:
        """Add the deleted object's key (a tombstone's own key)."""
        self.queue.add(self.key_func(obj))

    def __repr__(self) -> str:
        key = getattr(self.key_func, "__qualname__", type(self.key_func).__name__)
        return f"EnqueueHandler({self.queue!r}, {key}, low_priority={self.low_priority})"
