"""The ListerWatcher contract: how a Reflector lists and watches a resource.

A ListerWatcher is anything with ``async list(options) -> ListResult`` and
``watch(options)``, the latter an async context manager that yields an async
iterator of :class:`WatchEvent`. Leaving the context closes the stream (the
Reflector always leaves it, also when cancelled). Failures are reported by
raising the classes of :mod:`kubereflector.errors`, from ``list``, from entering
``watch``, or from iterating the stream.

Ownership: objects in a ListResult or a WatchEvent pass to the caller, which
stores them as they are; a ListerWatcher must not mutate them afterwards.

``ListResult[T]``, ``WatchEvent[T]`` and ``WatchStream[T]`` say what type the objects
are (``ResourceClient[Pod].list()`` gives a ``ListResult[Pod]``); unparametrised,
they hold ``Any``, as a ListerWatcher of unknown objects does. The parameter is for
type checkers only: nothing is checked or converted at run time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, Protocol, TypeAlias, runtime_checkable

from typing_extensions import NamedTuple, TypeVar

__all__ = [
    "ADDED",
    "BOOKMARK",
    "DELETED",
    "ERROR",
    "INITIAL_EVENTS_END_ANNOTATION",
    "MODIFIED",
    "ListFunc",
    "ListOptions",
    "ListResult",
    "ListWatch",
    "ListerWatcher",
    "WatchEvent",
    "WatchEventType",
    "WatchFunc",
    "WatchStream",
]

WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
"""The ``type`` of a watch event, as the API server sends it."""
ADDED: Final = "ADDED"
"""A watch event: the object was created (or, in a watch-list's initial events, exists)."""
MODIFIED: Final = "MODIFIED"
"""A watch event: the object changed."""
DELETED: Final = "DELETED"
"""A watch event: the object was deleted; the event carries its last state."""
BOOKMARK: Final = "BOOKMARK"
"""A watch event with no object change: only a newer ``metadata.resourceVersion`` to resume
from (and the end of a watch-list's initial events)."""
ERROR: Final = "ERROR"
"""A watch event carrying a ``Status`` instead of an object (a 410 Gone among them): the stream
ends."""

INITIAL_EVENTS_END_ANNOTATION: Final = "k8s.io/initial-events-end"
"""Annotation on the BOOKMARK that ends a watch-list's initial events (value ``"true"``)."""

# The type of the objects listed or watched (PEP 696 default: Any, what a ListerWatcher
# of unknown objects hands out). Not part of the API.
ObjectT = TypeVar("ObjectT", default=Any)
ObjectT_co = TypeVar("ObjectT_co", covariant=True, default=Any)


@dataclass(frozen=True, slots=True)
class ListOptions:
    """Query options of a list or watch request (``metav1.ListOptions``).

    Every field has a default, so ``ListOptions()`` is valid. ``None`` means
    "not sent". ``continue_`` is the ``continue`` token (a keyword in Python).
    ``shard_selector`` is KEP-5866's ``shardSelector`` (see
    :mod:`kubereflector.cache.shards`): servers without sharded list and watch
    ignore it.
    """

    resource_version: str = ""
    resource_version_match: Literal["NotOlderThan", "Exact"] | None = None
    limit: int | None = None
    continue_: str = ""
    label_selector: str = ""
    field_selector: str = ""
    timeout_seconds: int | None = None
    allow_watch_bookmarks: bool = False
    send_initial_events: bool | None = None
    shard_selector: str = ""


@dataclass(slots=True)
class ListResult(Generic[ObjectT]):
    """One page of a list: the items, the list's resourceVersion and paging state.

    ``shard_info`` is the shard selector the server says it applied
    (``metadata.shardInfo.selector``), ``None`` when it filtered nothing (a server
    without sharded list and watch ignores ``shardSelector``).

    A ``ListResult[T]`` holds ``T`` objects (plain ``ListResult``: ``Any``)."""

    items: list[ObjectT] = field(default_factory=list)
    resource_version: str = ""
    continue_: str = ""
    remaining_item_count: int | None = None
    shard_info: str | None = None


# typing_extensions' NamedTuple: a generic NamedTuple needs Python 3.11 otherwise.
class WatchEvent(NamedTuple, Generic[ObjectT_co]):
    """One event of a watch stream.

    ``object`` is the object after the change (for DELETED, its last state);
    for BOOKMARK an object carrying only ``metadata.resourceVersion`` (and
    annotations); for ERROR a ``Status`` mapping. A ``WatchEvent[T]`` types
    ``object`` as ``T`` (plain ``WatchEvent``: ``Any``): true of ADDED, MODIFIED
    and DELETED events; a BOOKMARK's object has only the metadata above, and an
    ERROR's is a ``Status`` whatever ``T`` says, so look at ``type`` first.
    """

    type: str
    object: ObjectT_co


WatchStream: TypeAlias = AbstractAsyncContextManager[AsyncIterator[WatchEvent[ObjectT]]]
"""What ``watch`` returns: entering opens the stream, leaving closes it. A
``WatchStream[T]`` gives ``WatchEvent[T]`` s (plain ``WatchStream``: of ``Any``)."""

ListFunc = Callable[[ListOptions], Awaitable[ListResult]]
"""The ``list`` of a :class:`ListWatch`: one page of objects for ``options``."""
WatchFunc = Callable[[ListOptions], WatchStream]
"""The ``watch`` of a :class:`ListWatch`: a stream of events from ``options.resource_version``."""


@runtime_checkable
class ListerWatcher(Protocol):
    """Lists and watches one resource (with its fixed selectors and namespace).

    Methods may be called concurrently from one event loop; each ``watch`` call
    is an independent stream. The Reflector names it in its log lines and
    errors by its ``url`` attribute when it has one (as ``ResourceListWatch``
    does), else by its ``str()``: give it one that says what and where.
    """

    async def list(self, options: ListOptions) -> ListResult:
        """One page of the resource's objects for ``options`` (``limit``, ``continue``, the
        resourceVersion to list at) with the list's resourceVersion. Raises
        :class:`~kubereflector.ApiError` subclasses (:class:`~kubereflector.ExpiredError`
        for an expired continue token or resourceVersion) or the transport's errors."""

    def watch(self, options: ListOptions) -> WatchStream:
        """A :data:`WatchStream` of the events after ``options.resource_version``:
        entering opens it (errors as :meth:`list`), leaving closes it; an ``ERROR``
        event carries the server's Status. A stream that also has
        ``with_turn_marks()`` (as the REST client's streams do: the events with a
        ``None`` before each turn the decoder gives the event loop) lets a
        Reflector write the events between two turns in one batch."""


class ListWatch:
    """Adapts two callables to the :class:`ListerWatcher` protocol (client-go's ``ListWatch``)."""

    __slots__ = ("_list_func", "_watch_func")

    def __init__(self, list_func: ListFunc, watch_func: WatchFunc) -> None:
        self._list_func = list_func
        self._watch_func = watch_func

    async def list(self, options: ListOptions) -> ListResult:
        """``list_func(options)``."""
        return await self._list_func(options)

    def watch(self, options: ListOptions) -> WatchStream:
        """``watch_func(options)``."""
        return self._watch_func(options)
