"""From watch events to requests: the event handlers a controller registers (private
to the runtime, public for those who wire informers to queues themselves).

controller-runtime's ``pkg/handler``: :func:`enqueue_object` (``for_``: the
object itself), :func:`enqueue_owner` (``owns``: the object's controller owner
of a given group and kind) and any mapper (``watches``: ``mapper(obj) ->
Iterable[Request]``). :class:`EnqueueRequestsHandler` turns a mapper into an
informer event handler that adds the requests to a queue:

* an add from the initial list (or a late handler's replay), and an update
  that did not change ``metadata.resourceVersion`` (a resync or relist), are
  queued at :data:`~kubereflector.workqueue.LOW_PRIORITY`, so a restart's thousands of initial
  reconciles never delay a live change (controller-runtime's priority queue);
* an update queues the requests of both the old and the new state (an object
  whose owner or mapping changed notifies both sides);
* a delete queues the requests of the last known state (a tombstone's).

Predicates filter before mapping. With an ``echoes`` filter (a controller under a
Manager), an event that echoes a write made by the reconcile of one of the requests it
maps to does not queue that request (see
:mod:`kubereflector.runtime.read_your_writes`). The handler's methods are coroutine
functions that never suspend: the informer runs them on its event loop, in
order, without a thread hop. Mappers and predicates therefore run on the loop:
they must be quick and must not block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from ..cache.keys import (
    DeletedFinalStateUnknown,
    get_metadata,
    get_resource_version,
    split_meta_namespace_key,
)
from ..workqueue import LOW_PRIORITY
from .predicates import Predicate
from .reconcile import Request

__all__ = [
    "EchoFilter",
    "EnqueueRequestsHandler",
    "Mapper",
    "RequestQueue",
    "enqueue_object",
    "enqueue_owner",
]

Mapper = Callable[[Any], Iterable[Request]]
"""Maps a watched object to the requests to reconcile (a tombstone's last known
state for deletes; may be ``None`` when nothing was known)."""


class EchoFilter(Protocol):
    """Decides whether a live event queues a request: ``admit(request, obj, deleted,
    priority)`` is ``False`` for the echo of a write that request's own reconcile made
    (and may keep the decision for later, queueing the request itself). Called on the
    informer's loop; quick."""

    def admit(self, request: Request, obj: Any, deleted: bool, priority: int) -> bool:
        """Whether to queue ``request`` for this event now."""


class RequestQueue(Protocol):
    """What a handler needs of a queue: ``add`` with a priority (thread-safe)."""

    def add(self, item: Request, *, priority: int = 0) -> None:
        """Queue ``item`` at ``priority`` (higher first); an item queued already keeps the
        higher of its priorities. Any thread."""


def _request_of_key(key: str) -> Request:
    namespace, name = split_meta_namespace_key(key)
    return Request(namespace, name)


def enqueue_object(obj: Any) -> tuple[Request, ...]:
    """The object's own request (controller-runtime's ``EnqueueRequestForObject``);
    a tombstone gives the request of its key."""
    if type(obj) is dict:
        meta = obj.get("metadata")
        if type(meta) is dict:
            name = meta.get("name")
            if name:
                return (Request(meta.get("namespace") or "", name),)
    if type(obj) is DeletedFinalStateUnknown:
        return (_request_of_key(obj.key),)
    if obj is None:
        return ()
    return (Request.for_object(obj),)


def _group_of(api_version: object) -> str | None:
    if not isinstance(api_version, str) or not api_version:
        return None
    group, _, version = api_version.rpartition("/")
    return group if version else None


def enqueue_owner(group: str, kind: str, *, namespaced: bool = True) -> Mapper:
    """A mapper to the object's *controller* owner of ``group`` and ``kind``
    (controller-runtime's ``EnqueueRequestForOwner`` with ``OnlyControllerOwner``):
    the ``ownerReferences`` entry with ``controller: true`` whose ``apiVersion``
    has that group (any version) and whose ``kind`` matches. The owner's
    namespace is the object's (``""`` when the owner kind is cluster-scoped,
    ``namespaced=False``). Objects without such an owner map to nothing."""

    def owner(obj: Any) -> tuple[Request, ...]:
        if obj is None:
            return ()
        meta = get_metadata(obj)
        if isinstance(meta, Mapping):  # a dict, or a compact object's metadata
            refs = meta.get("ownerReferences")
            namespace = meta.get("namespace")
        else:
            refs = getattr(meta, "owner_references", None)
            namespace = getattr(meta, "namespace", None)
        if not refs:
            return ()
        for ref in refs:
            if not isinstance(ref, Mapping):
                ref = {
                    "controller": getattr(ref, "controller", None),
                    "kind": getattr(ref, "kind", None),
                    "apiVersion": getattr(ref, "api_version", None),
                    "name": getattr(ref, "name", None),
                }
            if (
                ref.get("controller") is True
                and ref.get("kind") == kind
                and _group_of(ref.get("apiVersion")) == group
                and ref.get("name")
            ):
                return (Request((namespace or "") if namespaced else "", ref["name"]),)
        return ()

    owner.__name__ = f"enqueue_owner({group or 'core'}/{kind})"
    return owner


def _last_state(obj: Any) -> Any:
    return obj.obj if type(obj) is DeletedFinalStateUnknown else obj


class EnqueueRequestsHandler:
    """An informer event handler adding ``mapper``'s requests to ``queue``, after
    ``predicate`` (see the module documentation for priorities and ``echoes``). The
    mapper is :func:`enqueue_object` for a controller's own resource, which also
    maps tombstones by key."""

    __slots__ = ("_echoes", "_for_object", "_mapper", "_predicate", "_queue")

    def __init__(
        self,
        queue: RequestQueue,
        mapper: Mapper,
        predicate: Predicate | None = None,
        *,
        echoes: EchoFilter | None = None,
    ) -> None:
        self._queue = queue
        self._mapper = mapper
        self._predicate = predicate
        self._for_object = mapper is enqueue_object
        self._echoes = echoes

    def _add(self, requests: Iterable[Any], priority: int) -> None:
        add = self._queue.add
        for request in requests:
            if type(request) is not Request:
                namespace, name = request  # a (namespace, name) pair; "" or None: none
                request = Request(namespace or "", name)
            add(request, priority=priority)

    def _add_live(
        self, requests: Iterable[Any], obj: Any, deleted: bool, echoes: EchoFilter
    ) -> None:
        add = self._queue.add
        admit = echoes.admit
        for request in requests:
            if type(request) is not Request:
                namespace, name = request
                request = Request(namespace or "", name)
            if admit(request, obj, deleted, 0):
                add(request, priority=0)

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        """Queue the mapper's requests for ``obj`` if the predicate's ``create`` passes (at low
        priority for the initial list)."""
        predicate = self._predicate
        if predicate is not None and not predicate.create(obj):
            return
        if is_in_initial_list:
            self._add(self._mapper(obj), LOW_PRIORITY)
            return
        echoes = self._echoes
        if echoes is None:
            self._add(self._mapper(obj), 0)
        else:
            self._add_live(self._mapper(obj), obj, False, echoes)

    async def on_update(self, old: Any, new: Any) -> None:
        """Queue the mapper's requests for ``old`` and ``new`` if the predicate's ``update``
        passes (at low priority when the resourceVersion is unchanged: a resync)."""
        predicate = self._predicate
        if predicate is not None and not predicate.update(old, new):
            return
        priority = LOW_PRIORITY if get_resource_version(old) == get_resource_version(new) else 0
        mapper = self._mapper
        if self._for_object:
            requests: Iterable[Any] = mapper(new)
        else:
            both = dict.fromkeys(mapper(old))
            both.update(dict.fromkeys(mapper(new)))
            requests = both
        echoes = self._echoes
        if echoes is None or priority:
            self._add(requests, priority)
        else:
            self._add_live(requests, new, False, echoes)

    async def on_delete(self, obj: Any) -> None:
        """Queue the mapper's requests for the deleted object (its last known state, for a
        tombstone) if the predicate's ``delete`` passes."""
        predicate = self._predicate
        if predicate is not None and not predicate.delete(obj):
            return
        requests = self._mapper(obj if self._for_object else _last_state(obj))
        echoes = self._echoes
        if echoes is None:
            self._add(requests, 0)
        else:
            self._add_live(requests, obj, True, echoes)

    def __repr__(self) -> str:
        name = getattr(self._mapper, "__name__", repr(self._mapper))
        return f"<EnqueueRequestsHandler {name}>"
