"""Event handlers: what an informer calls for each object that appears in its cache,
changes or leaves it (client-go's ``ResourceEventHandler`` and its helpers).

Each method may be a plain function or a coroutine function (and one handler may
mix them): informers call plain methods on a worker thread of the handler's own,
and await coroutine methods on the event loop, in a task of the handler's own,
one notification at a time and in order. Handlers must treat the objects they
receive as immutable: they are the cache's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, runtime_checkable

from .._aio.calls import is_coroutine_callable
from ._listener import ADD, DELETE, UPDATE, Calls, Notification, Route
from .keys import DeletedFinalStateUnknown, T, T_contra

__all__ = [
    "FilteringResourceEventHandler",
    "ResourceEventHandler",
    "ResourceEventHandlerDetailedFuncs",
    "ResourceEventHandlerFuncs",
]


@runtime_checkable
class ResourceEventHandler(Protocol[T_contra]):
    """Receives an informer's notifications (client-go's ``ResourceEventHandler``);
    a ``ResourceEventHandler[T]`` handles objects of type ``T`` (plain
    ``ResourceEventHandler``: :data:`~kubereflector.KubeObject`).

    * ``on_add(obj, is_in_initial_list)``: an object appeared in the cache;
      ``is_in_initial_list`` is true for the objects of the initial list (and of
      the replay a handler added late receives).
    * ``on_update(old, new)``: an object in the cache was replaced. ``old`` is the
      last state the cache held (several changes may have been merged), and a
      relist or a periodic resync calls it even when nothing changed.
    * ``on_delete(obj)``: an object left the cache. ``obj`` is its last known state,
      or a :class:`~kubereflector.DeletedFinalStateUnknown` when the deletion was
      only noticed by a relist (hence the type ``T | DeletedFinalStateUnknown[T]``).

    Each method may be a plain function or a coroutine function; the return
    value is ignored and an exception is logged (with the object's key) without
    stopping further notifications.
    """

    def on_add(self, obj: T_contra, is_in_initial_list: bool) -> object:
        """An object appeared in the cache (see the class documentation)."""
        ...

    def on_update(self, old: T_contra, new: T_contra) -> object:
        """An object in the cache was replaced: ``old`` by ``new``."""
        ...

    def on_delete(self, obj: T_contra | DeletedFinalStateUnknown[T_contra]) -> object:
        """An object left the cache: its last state, or a tombstone."""
        ...


def _noop(*_args: Any) -> None:
    """An absent handler function (the informer skips it without a thread hop)."""


def _adapt(fn: Callable[..., Any] | None, *, drop_flag: bool) -> Callable[..., Any]:
    """A handler method calling ``fn`` (dropping ``is_in_initial_list`` when asked),
    a coroutine function exactly when ``fn`` is one."""
    if fn is None:
        return _noop
    if not callable(fn):
        raise TypeError(f"expected a callable or None, got {type(fn).__name__}")
    if not drop_flag:
        return fn
    if is_coroutine_callable(fn):

        async def on_add_async(obj: Any, is_in_initial_list: bool) -> Any:
            return await fn(obj)

        return on_add_async

    def on_add(obj: Any, is_in_initial_list: bool) -> Any:
        return fn(obj)

    return on_add


class ResourceEventHandlerFuncs(Generic[T]):
    """A handler made of up to three functions (client-go's ``ResourceEventHandlerFuncs``).

    ``on_add(obj)`` takes only the object (use
    :class:`ResourceEventHandlerDetailedFuncs` to also get ``is_in_initial_list``),
    ``on_update(old, new)``, ``on_delete(obj)`` (``obj`` may be a
    :class:`~kubereflector.DeletedFinalStateUnknown`). A function left ``None`` is
    skipped. Each may be a plain function or a coroutine function; what it
    returns is ignored. The type parameter is the type the functions take
    (:data:`~kubereflector.KubeObject` unless they say otherwise): functions of a
    model, ``on_add(pod: Pod)``, make a handler a ``SharedIndexInformer[Pod]``
    takes, and one of another model a type error.
    """

    __slots__ = ("add_func", "delete_func", "on_add", "on_delete", "on_update", "update_func")

    def __init__(
        self,
        on_add: Callable[[T], object] | None = None,
        on_update: Callable[[T, T], object] | None = None,
        on_delete: Callable[[T | DeletedFinalStateUnknown[T]], object] | None = None,
    ) -> None:
        self.add_func: Callable[[T], object] | Callable[[T, bool], object] | None = on_add
        """The ``on_add`` function as given."""
        self.update_func = on_update
        """The ``on_update`` function as given."""
        self.delete_func = on_delete
        """The ``on_delete`` function as given."""
        self.on_add: Callable[[T, bool], object] = _adapt(on_add, drop_flag=True)
        self.on_update: Callable[[T, T], object] = _adapt(on_update, drop_flag=False)
        self.on_delete: Callable[[T | DeletedFinalStateUnknown[T]], object] = _adapt(
            on_delete, drop_flag=False
        )

    def __repr__(self) -> str:
        parts = [
            f"{name}={_describe_callable(fn)}"
            for name, fn in (
                ("on_add", self.add_func),
                ("on_update", self.update_func),
                ("on_delete", self.delete_func),
            )
            if fn is not None
        ]
        return f"{type(self).__name__}({', '.join(parts)})"


class ResourceEventHandlerDetailedFuncs(ResourceEventHandlerFuncs[T]):
    """Like :class:`ResourceEventHandlerFuncs`, but ``on_add(obj, is_in_initial_list)``
    (client-go's ``ResourceEventHandlerDetailedFuncs``)."""

    __slots__ = ()

    def __init__(
        self,
        on_add: Callable[[T, bool], object] | None = None,
        on_update: Callable[[T, T], object] | None = None,
        on_delete: Callable[[T | DeletedFinalStateUnknown[T]], object] | None = None,
    ) -> None:
        super().__init__(None, on_update, on_delete)
        self.add_func = on_add
        self.on_add = _adapt(on_add, drop_flag=False)


class FilteringResourceEventHandler(Generic[T]):
    """Passes to ``handler`` only what ``filter`` accepts (client-go's
    ``FilteringResourceEventHandler``).

    An update whose old and new objects both pass is an update; one that starts
    passing is an add of the new object (``is_in_initial_list`` false); one that
    stops passing is a delete of the old object; one where neither passes is
    dropped. Adds and deletes pass when their object does (the filter sees a
    :class:`~kubereflector.DeletedFinalStateUnknown` as it is, hence its type
    ``T | DeletedFinalStateUnknown[T]``).

    ``filter`` must be a plain, fast, pure function: informers call it on the
    handler's consumer (its worker thread, or the event loop when every method
    of ``handler`` is a coroutine function). Called directly, each method
    returns what the wrapped method returned (an awaitable for a coroutine one).
    """

    __slots__ = ("filter", "handler")

    def __init__(
        self,
        filter: Callable[[T | DeletedFinalStateUnknown[T]], bool],
        handler: ResourceEventHandler[T],
    ) -> None:
        if is_coroutine_callable(filter):
            raise TypeError(
                "the filter of a FilteringResourceEventHandler must be a plain function"
            )
        self.filter = filter
        self.handler = handler

    def on_add(self, obj: T, is_in_initial_list: bool) -> object:
        """``handler.on_add`` if ``filter`` accepts ``obj``."""
        if self.filter(obj):
            return self.handler.on_add(obj, is_in_initial_list)
        return None

    def on_update(self, old: T, new: T) -> object:
        """``handler.on_update``, ``on_add`` or ``on_delete`` as ``filter`` accepts
        ``old`` and ``new`` (see the class documentation)."""
        newer = self.filter(new)
        older = self.filter(old)
        if newer and older:
            return self.handler.on_update(old, new)
        if newer:
            return self.handler.on_add(new, False)
        if older:
            return self.handler.on_delete(old)
        return None

    def on_delete(self, obj: T | DeletedFinalStateUnknown[T]) -> object:
        """``handler.on_delete`` if ``filter`` accepts ``obj``."""
        if self.filter(obj):
            return self.handler.on_delete(obj)
        return None

    def __repr__(self) -> str:
        return f"FilteringResourceEventHandler({_describe_callable(self.filter)}, {self.handler!r})"


def _describe_callable(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)


def _resolve_handler(handler: object) -> Calls:
    """What a listener calls for ``handler``'s notifications.

    Raises :class:`TypeError` if ``handler`` lacks one of the three methods.
    """
    if isinstance(handler, FilteringResourceEventHandler):
        inner = _resolve_handler(handler.handler)
        return Calls(inner.functions, inner.coroutine, _filter_route(handler.filter, inner.route))
    methods = []
    for name in ("on_add", "on_update", "on_delete"):
        fn = getattr(handler, name, None)
        if fn is None or not callable(fn):
            raise TypeError(
                f"{type(handler).__name__} is not a ResourceEventHandler: it has no {name}() "
                "(use ResourceEventHandlerFuncs for plain functions)"
            )
        methods.append(fn)
    return Calls(
        tuple(None if fn is _noop else fn for fn in methods),
        tuple(is_coroutine_callable(fn) for fn in methods),
    )


def _filter_route(accept: Callable[[Any], bool], inner: Route | None) -> Route:
    """The route of a FilteringResourceEventHandler around a handler routed by ``inner``."""

    def route(n: Notification) -> Notification | None:
        kind, a, b = n
        if kind == UPDATE:
            newer, older = accept(b), accept(a)
            if not (newer or older):
                return None
            if not older:
                n = (ADD, b, False)
            elif not newer:
                n = (DELETE, a, None)
        elif not accept(a):
            return None
        return n if inner is None else inner(n)

    return route
