"""Read your own writes: what a :class:`~kubereflector.runtime.Manager` remembers of
the writes made through its client, so that its caches are not read before they have
seen them, and so that the watch events those writes cause (their *echoes*) are told
apart from changes made by others.

An informer's cache trails the API server: a reconcile that creates an object and is
queued again at once would otherwise read a cache without it and create it twice (or
fail with AlreadyExists), and one that writes a status and reads the object again gets
the old one and conflicts. controller-runtime's answer (#3320, #3472) is a client
whose cache reads wait until the cache has seen the client's own writes; this is
that, for kubereflector:

* Every successful create, update, patch, apply and delete made through the manager's
  client, of a resource the manager caches (and, with a namespaced manager, in its
  namespace), is recorded: the object's key, the resourceVersion the server answered
  (its UID for a delete), and the reconcile it was made in (controller, request).
  Dry runs and writes of resources without an informer are not recorded.
* The write is *observed* once the informer's cache holds that resourceVersion or a
  newer one (resourceVersions compared as the integers kube-apiserver makes them; an
  opaque one only by equality), no longer holds the deleted UID, saw the object
  deleted after the write, or has relisted since the write (a list returns the
  current state).
* Before a controller reconciles a request, it waits until every write made by
  earlier reconciles of that request has been observed, for at most the manager's
  ``read_your_writes_timeout``. When the time is up the reconcile is postponed (the
  request is requeued with backoff, logged once at INFO, counted) and those writes
  are no longer waited for: a watch that never delivers them (an informer whose list
  options filter the object out, a stalled stream) costs one postponement, not a
  controller that stops.
* Inside a reconcile, the manager's listers (:meth:`Manager.lister_for
  <kubereflector.runtime.Manager.lister_for>`) check the writes of the reconcile's
  own request: a plain-function reconcile (a worker thread) waits for them as above;
  a coroutine reconcile cannot wait in a synchronous read and gets
  :class:`StaleReadError` at once (use the object the write returned, or ask for
  another pass with ``Result(requeue_after=0)``). Reads outside reconciles, and
  ``informer.lister`` reads, are never held back.
* An event whose object is at a resourceVersion the manager wrote (a delete: whose
  UID it deleted) is an echo of that write. A controller does not queue the request
  whose reconcile made the write for it (unless
  ``ControllerOptions(requeue_on_own_writes=True)``):
  that reconcile already knew the state it wrote. Other requests the event maps to
  are queued as usual, and an echo delivered by a relist (which may have merged
  someone else's change into it) is treated as any event. A watch event can arrive
  before the client has the answer of the write it shows: an event for a request
  being reconciled is decided when that reconcile ends, once its writes are known.

Cost: a dictionary entry per written object (dropped after five minutes), a
dictionary lookup per watch event of a resource the manager wrote to, one per
reconcile; no extra request. A reconcile waits only when its own earlier writes
are still on their way (typically milliseconds). Thread-safety: every method may be
called from any thread.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .._aio.tasks import running_loop
from ..cache.keys import DeletedFinalStateUnknown, T, get_resource_version, get_uid
from ..cache.listers import Lister, NamespaceLister, SelectorLike
from ..clock import Clock, RealClock
from ._context import current_reconcile
from .reconcile import Request

if TYPE_CHECKING:
    from ..cache.shared_informer import SharedIndexInformer
    from ..client.discovery import ResourceInfo

__all__ = ["OwnWrites", "ReadYourWritesLister", "StaleReadError"]

logger = logging.getLogger("kubereflector.runtime")

_RETENTION: Final = 300.0
"""Seconds an observed write is remembered for its echo (echoes arrive within
milliseconds, or after a watch resumes from its resourceVersion)."""
_PER_KEY: Final = 8
"""Writes remembered per object (older ones are forgotten first)."""
_SWEEP_EVERY: Final = 512


class StaleReadError(RuntimeError):
    """A cache read inside a reconcile would miss a write that reconcile's request made
    through the manager's client (the informer has not seen it yet). Raised at once in
    coroutine reconciles (they cannot wait in a synchronous read) and after the
    manager's ``read_your_writes_timeout`` in plain-function ones. A reconcile that
    raises it is retried after backoff, logged as one line at INFO."""


def _parse(rv: object) -> int | str | None:
    if not isinstance(rv, str) or not rv:
        return None
    return int(rv) if rv.isdigit() else rv


def _at_least(seen: int | str | None, wanted: int | str | None) -> bool:
    """Whether the cache at ``seen`` includes a write at ``wanted``."""
    if seen is None or wanted is None:
        return False
    if type(seen) is int and type(wanted) is int:
        return seen >= wanted
    return seen == wanted


@dataclass(slots=True, eq=False)
class _Write:
    """One write: ``rv`` (``None`` for a delete, then ``uid`` names what was deleted),
    the reconcile it was made in, the informer's list count then."""

    key: str
    rv: int | str | None
    uid: str | None
    controller: str | None
    request: Request | None
    lists: int
    at: float
    observed: bool = False


class _Tracked:
    """One informer's writes by key, and the handler that watches it for them."""

    __slots__ = ("informer", "name", "writes")

    def __init__(self, informer: SharedIndexInformer[Any], name: str) -> None:
        self.informer = informer
        self.name = name
        self.writes: dict[str, deque[_Write]] = {}


def _key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _event_key(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return None
    name = meta.get("name")
    return _key(meta.get("namespace"), name) if isinstance(name, str) and name else None


class OwnWrites:
    """The ledger of one manager's writes (see the module documentation). Made by the
    :class:`~kubereflector.runtime.Manager`; controllers and listers consult it.

    ``informer_of(resource)`` returns the manager's informer of a resource (``None``:
    not cached, the write is not recorded); ``namespace`` is the manager's (``None``:
    all); ``clock`` times the waits and the retention.
    """

    def __init__(
        self,
        informer_of: Callable[[ResourceInfo], SharedIndexInformer[Any] | None],
        *,
        namespace: str | None = None,
        timeout: float = 10.0,
        clock: Clock | None = None,
    ) -> None:
        if timeout < 0:
            raise ValueError(f"the read-your-writes timeout must be >= 0 (got {timeout})")
        self._informer_of = informer_of
        self._namespace = namespace or None
        self.timeout = float(timeout)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._tracked: dict[int, _Tracked] = {}
        self._by_request: dict[tuple[str, Request], list[tuple[_Tracked, _Write]]] = {}
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._records = 0
        self.recorded = 0
        """Writes recorded so far."""
        self.echoes = 0
        """Events recognised as echoes of this manager's writes and not queued."""
        self.waits = 0
        """Reconciles (and reads) that had to wait for a write to be observed."""
        self.stale = 0
        """Waits that ran out of time (reconciles postponed, reads that raised)."""

    # -- recording (the client's write observer, on its loop) ---------------------------

    def written(
        self,
        resource: ResourceInfo,
        verb: str,
        namespace: str | None,
        name: str,
        result: Mapping[str, Any],
    ) -> None:
        """Record a write the server accepted: ``result`` is its answer (the object, or a
        ``Status`` for some deletes). Never raises."""
        try:
            self._record(resource, verb, namespace, name, result)
        except Exception:  # an observer must not fail the write it observes
            logger.exception("read-your-writes: could not record the %s of %s", verb, name)

    def _record(
        self,
        resource: ResourceInfo,
        verb: str,
        namespace: str | None,
        name: str,
        result: Mapping[str, Any],
    ) -> None:
        if resource.namespaced and self._namespace and namespace != self._namespace:
            return  # the manager's informers do not see it
        informer = self._informer_of(resource)
        if informer is None:
            return
        tracked = self._track(informer, resource.qualified_name)
        deleted = verb == "delete" and not (
            isinstance(result.get("metadata"), Mapping)
            and result["metadata"].get("deletionTimestamp")
        )
        uid: str | None
        if deleted:
            details = result.get("details") if result.get("kind") == "Status" else None
            uid = (details or {}).get("uid") if isinstance(details, Mapping) else get_uid(result)
            rv = None
        else:
            uid = get_uid(result)
            rv = _parse(get_resource_version(result))
            if rv is None:
                return
        running = current_reconcile()
        write = _Write(
            key=_key(namespace if resource.namespaced else None, name),
            rv=rv,
            uid=uid,
            controller=running.controller if running else None,
            request=running.request if running else None,
            lists=informer.full_syncs(),
            at=self._clock.now(),
        )
        with self._lock:
            self.recorded += 1
            writes = tracked.writes.get(write.key)
            if writes is None:
                writes = tracked.writes[write.key] = deque(maxlen=_PER_KEY)
            writes.append(write)
            if running is not None:
                self._by_request.setdefault((running.controller, running.request), []).append(
                    (tracked, write)
                )
            self._records += 1
            if self._records % _SWEEP_EVERY == 0:
                self._sweep_locked()

    def _track(self, informer: SharedIndexInformer[Any], name: str) -> _Tracked:
        with self._lock:
            tracked = self._tracked.get(id(informer))
            if tracked is not None:
                return tracked
            tracked = self._tracked[id(informer)] = _Tracked(informer, name)
        informer.add_event_handler(_Observer(self, tracked))
        return tracked

    def _sweep_locked(self) -> None:
        """Forget writes older than the retention (observed or not: a write the cache
        never showed, an object its informer's list options filter out, is waited for
        at most :attr:`timeout` and of no use afterwards), and emptied request lists."""
        horizon = self._clock.now() - max(_RETENTION, 2 * self.timeout)
        for tracked in self._tracked.values():
            for key, writes in list(tracked.writes.items()):
                while writes and writes[0].at < horizon:
                    writes.popleft().observed = True
                if not writes:
                    del tracked.writes[key]
        for request, entries in list(self._by_request.items()):
            entries[:] = [(t, w) for t, w in entries if not w.observed]
            if not entries:
                del self._by_request[request]

    # -- observing (the informers' handler) ----------------------------------------------

    def _seen(self, tracked: _Tracked, obj: Any, deleted: bool) -> None:
        """An event of ``obj`` reached the handlers (the cache has it): mark the writes it
        shows as observed."""
        if not tracked.writes:
            return
        if type(obj) is DeletedFinalStateUnknown:
            key: str | None = obj.key
            obj = obj.obj
        else:
            key = _event_key(obj)
        if key is None:
            return
        rv = None if obj is None else _parse(get_resource_version(obj))
        woke = False
        with self._lock:
            writes = tracked.writes.get(key)
            if not writes:
                return
            for write in writes:
                if write.observed:
                    continue
                if deleted or (write.rv is not None and _at_least(rv, write.rv)):
                    write.observed = True
                    woke = True
            if woke:
                self._changed.notify_all()
                waiters, self._waiters = self._waiters, []
        if woke:
            for loop, future in waiters:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_wake, future)

    def _observed_locked(self, tracked: _Tracked, write: _Write) -> bool:
        """Whether the cache has seen ``write`` (marks it); lock held."""
        if write.observed:
            return True
        informer = tracked.informer
        if informer.full_syncs() > write.lists:
            write.observed = True  # a list since the write returned the current state
            return True
        cached = informer.indexer.get_by_key(write.key)
        if write.rv is None:
            seen = cached is None or (write.uid is not None and get_uid(cached) != write.uid)
        else:
            seen = cached is not None and _at_least(_parse(get_resource_version(cached)), write.rv)
        if seen:
            write.observed = True
        return seen

    # -- echoes (the controllers' handlers, on the loop) -----------------------------------

    def writer_of(
        self, informer: SharedIndexInformer[Any], obj: Any, *, deleted: bool = False
    ) -> tuple[str | None, Request | None] | None:
        """If ``obj`` (an event's object; ``deleted`` for a delete) is the echo of a write
        recorded here, the ``(controller, request)`` whose reconcile made it
        (``(None, None)`` for a write outside reconciles); else ``None``. An event after
        a relist of the informer since the write is never an echo."""
        tracked = self._tracked.get(id(informer))
        if tracked is None or not tracked.writes or type(obj) is DeletedFinalStateUnknown:
            return None
        key = _event_key(obj)
        if key is None or key not in tracked.writes:
            return None
        lists = informer.full_syncs()
        with self._lock:
            writes = tracked.writes.get(key)
            if not writes:
                return None
            if deleted:
                uid = get_uid(obj)
                match = next((w for w in writes if w.rv is None and w.uid == uid), None)
            else:
                rv = _parse(get_resource_version(obj))
                match = next((w for w in writes if w.rv is not None and w.rv == rv), None)
            if match is None or lists != match.lists:
                return None
            self.echoes += 1
            return match.controller, match.request

    # -- waiting ----------------------------------------------------------------------------

    def _pending_locked(
        self, controller: str, request: Request, informer: SharedIndexInformer[Any] | None = None
    ) -> list[tuple[_Tracked, _Write]]:
        entries = self._by_request.get((controller, request))
        if not entries:
            return []
        pending = [
            (t, w)
            for t, w in entries
            if (informer is None or t.informer is informer) and not self._observed_locked(t, w)
        ]
        entries[:] = [(t, w) for t, w in entries if not w.observed]
        if not entries:
            del self._by_request[(controller, request)]
        return pending

    def _describe_locked(self, pending: Iterable[tuple[_Tracked, _Write]], *, give_up: bool) -> str:
        """What ``pending`` are, for a log; with ``give_up``, no longer waited for."""
        self.stale += 1
        names = []
        for tracked, write in pending:
            if give_up:
                write.observed = True
            names.append(f"{tracked.name} {write.key} (resourceVersion {write.rv or 'deleted'})")
        return ", ".join(names)

    def has_writes_of(self, controller: str, request: Request) -> bool:
        """Whether writes of ``request``'s reconciles in ``controller`` may still be on
        their way (a quick check before :meth:`wait_for_request`)."""
        return (controller, request) in self._by_request

    async def wait_for_request(self, controller: str, request: Request) -> str | None:
        """Wait until the writes of ``request``'s earlier reconciles in ``controller`` are
        observed, for at most :attr:`timeout` seconds of the clock. ``None`` when they
        are; else what was not seen (those writes are then no longer waited for).
        Await it on the informers' event loop."""
        with self._lock:
            pending = self._pending_locked(controller, request)
            if not pending:
                return None
            self.waits += 1
        loop = asyncio.get_running_loop()
        timer = asyncio.ensure_future(self._clock.sleep(self.timeout))
        try:
            while True:
                future: asyncio.Future[None] = loop.create_future()
                with self._lock:
                    pending = self._pending_locked(controller, request)
                    if not pending:
                        return None
                    if timer.done():
                        return self._describe_locked(pending, give_up=True)
                    self._waiters.append((loop, future))
                await asyncio.wait({future, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()

    def check_read(self, informer: SharedIndexInformer[Any], key: str | None) -> None:
        """Before a cache read of ``informer`` (of ``key``, or any key for a list): inside
        a reconcile, make sure the writes of its request to that informer (to ``key``)
        are observed, waiting on a worker thread, raising :class:`StaleReadError` on an
        event loop or when the wait runs out. Outside reconciles: nothing."""
        running = current_reconcile()
        if running is None or not self._by_request:
            return
        with self._lock:
            pending = [
                (t, w)
                for t, w in self._pending_locked(running.controller, running.request, informer)
                if key is None or w.key == key
            ]
            if not pending:
                return
            self.waits += 1
            if running_loop() is not None:
                raise StaleReadError(self._stale_message(running.request, pending, waited=False))
            deadline = time.monotonic() + self.timeout  # a thread waits in real time
            while pending and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)
                pending = [(t, w) for t, w in pending if not self._observed_locked(t, w)]
            if pending:
                raise StaleReadError(self._stale_message(running.request, pending, waited=True))

    def _stale_message(
        self, request: Request, pending: list[tuple[_Tracked, _Write]], *, waited: bool
    ) -> str:
        # A read that waited in vain gives them up (the next reconcile does not wait
        # again); one that could not wait leaves them to the retry's wait.
        what = self._describe_locked(pending, give_up=waited)
        how = (
            f"within {self.timeout:g}s"
            if waited
            else "yet (a coroutine reconcile cannot wait in a synchronous read: use the "
            "object the write returned, or return Result(requeue_after=0))"
        )
        return f"the cache has not seen the write of {what} made for {request} {how}"

    def __repr__(self) -> str:
        with self._lock:
            pending = sum(1 for t in self._tracked.values() for ws in t.writes.values() for w in ws)
        return f"<OwnWrites tracked={len(self._tracked)} writes={pending}>"


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Observer:
    """The handler the ledger registers on each informer it tracks: it marks writes as
    observed as their events reach the handlers. Coroutine methods that never suspend
    (run on the informer's loop without a thread hop)."""

    __slots__ = ("_ledger", "_tracked")

    def __init__(self, ledger: OwnWrites, tracked: _Tracked) -> None:
        self._ledger = ledger
        self._tracked = tracked

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._ledger._seen(self._tracked, obj, False)

    async def on_update(self, old: Any, new: Any) -> None:
        self._ledger._seen(self._tracked, new, False)

    async def on_delete(self, obj: Any) -> None:
        self._ledger._seen(self._tracked, obj, True)

    def __repr__(self) -> str:
        return f"<read-your-writes observer of {self._tracked.name}>"


class ReadYourWritesLister(Lister[T]):
    """The manager's lister of one informer: a :class:`~kubereflector.Lister` whose
    reads inside a reconcile first check that reconcile's writes
    (:meth:`OwnWrites.check_read`)."""

    __slots__ = ("_informer", "_ledger")

    def __init__(self, informer: SharedIndexInformer[T], ledger: OwnWrites) -> None:
        super().__init__(informer.indexer)
        self._informer = informer
        self._ledger = ledger

    def list(self, selector: SelectorLike = None) -> builtins.list[T]:
        """As :meth:`Lister.list <kubereflector.Lister.list>`, after the check."""
        self._ledger.check_read(self._informer, None)
        return super().list(selector)

    def get(self, name: str) -> T | None:
        """As :meth:`Lister.get <kubereflector.Lister.get>`, after the check."""
        self._ledger.check_read(self._informer, name)
        return super().get(name)

    def by_index(
        self, index_name: str, indexed_value: str, selector: SelectorLike = None
    ) -> builtins.list[T]:
        """As :meth:`Lister.by_index <kubereflector.Lister.by_index>`, after the check."""
        self._ledger.check_read(self._informer, None)
        return super().by_index(index_name, indexed_value, selector)

    def namespaced(self, namespace: str) -> NamespaceLister[T]:
        """A :class:`~kubereflector.NamespaceLister` whose reads check too."""
        return _ReadYourWritesNamespaceLister(self, namespace)


class _ReadYourWritesNamespaceLister(NamespaceLister[T]):
    __slots__ = ()

    def list(self, selector: SelectorLike = None) -> builtins.list[T]:
        lister = self._lister
        assert isinstance(lister, ReadYourWritesLister)
        lister._ledger.check_read(lister._informer, None)
        return super().list(selector)

    def get(self, name: str) -> T | None:
        lister = self._lister
        assert isinstance(lister, ReadYourWritesLister)
        lister._ledger.check_read(lister._informer, _key(self._namespace, name))
        return super().get(name)
