"""``EventRecorder``: Kubernetes Events about your objects, the way client-go's
``tools/events`` writes them (``events.k8s.io/v1``).

::

    recorder = EventRecorder(client, "example.com/shop-controller")
    recorder.record(deployment, "Normal", "ScaledUp", "scaled to 3 replicas")

What it does with what you record (client-go's behaviour, and its spam filter):

* The first occurrence becomes an Event named ``{object name}.{hex nanoseconds}``
  in the object's namespace (``default`` for cluster-scoped objects), with
  ``regarding`` (apiVersion, kind, namespace, name, uid, resourceVersion),
  ``reportingController`` (``component``), ``reportingInstance``, ``action``,
  ``reason``, ``note`` (the message, cut to 1 KiB) and ``type``.
* Repeats with the same action, reason, controller and object (the note and the
  object's resourceVersion may differ) within 6 minutes of the previous one are
  one **series**: the Event's ``series.count`` and ``series.lastObservedTime``
  are updated by a merge patch, never more than one write in flight per series
  (a flood of repeats costs a create and a patch or two, and the count ends
  exact; the counts a series sends only grow). A repeat after 6 minutes of
  quiet starts a new Event.
* A **token bucket per object** (25 writes, refilled one per 5 minutes, as
  client-go's legacy recorder) limits the writes about one object: a new Event
  with no token is dropped (counted in :attr:`dropped`); a series update waits
  for a token, or for the end of the series, when its final count is written.
* ``record`` **never blocks and never raises**: it updates the bookkeeping
  under a lock and wakes a sending task on the client's event loop, which
  writes up to ``max_concurrent_sends`` Events at once (8 by default), oldest
  first, and each series' writes one after another. Failures
  are logged (``kubereflector.client.events``): an API error drops that write;
  a connection error is retried up to 12 times, 10 s apart (jittered, on the
  ``clock``). At most 1,000 writes wait; beyond that new Events are dropped.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import random
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Final, Literal

import aiohttp

from .._aio.loop_thread import call_in_loop
from .._aio.tasks import running_loop
from ..cache.keys import get_name, get_namespace, get_resource_version, get_uid
from ..clock import Clock, RealClock
from ..errors import AlreadyExistsError, ApiError, NotFoundError
from .discovery import ResourceInfo
from .resource import ResourceClient
from .rest import Client
from .sync import SyncClient

__all__ = ["EVENTS_RESOURCE", "EventRecorder", "EventType"]

logger = logging.getLogger("kubereflector.client.events")

EventType = Literal["Normal", "Warning"]
"""An Event's ``type``: the only two kube accepts."""

EVENTS_RESOURCE: Final = ResourceInfo(
    group="events.k8s.io",
    version="v1",
    resource="events",
    kind="Event",
    namespaced=True,
    verbs=("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"),
    short_names=("ev",),
    singular="event",
)
"""The resource an EventRecorder writes (no discovery needed)."""

SERIES_FINISH: Final = 6 * 60.0
"""Seconds of quiet after which a series ends (client-go's ``finishTime``)."""
SPAM_BURST: Final = 25
"""Writes about one object the bucket allows at once (client-go's ``defaultSpamBurst``)."""
SPAM_REFILL: Final = 300.0
"""Seconds per new token (client-go's ``defaultSpamQPS`` of 1/300)."""
MAX_CONCURRENT_SENDS: Final = 8
"""Writes in flight at once by default (see :class:`EventRecorder`)."""
MAX_QUEUED: Final = 1000
"""Writes that may wait at once (client-go's ``maxQueuedEvents``)."""
MAX_TRIES: Final = 12
"""Attempts of one write against connection errors (client-go's ``maxTriesPerEvent``)."""
RETRY_SLEEP: Final = 10.0
"""Seconds between those attempts, jittered by up to 25% (client-go's ``defaultSleepDuration``)."""
NOTE_LIMIT: Final = 1024
"""An Event's ``note`` is cut to this many characters (kube refuses longer ones)."""
_OBJECTS_TRACKED: Final = 4096
_SWEEP_EVERY: Final = 256


def _micro_time(seconds: float) -> str:
    """``metav1.MicroTime``: RFC 3339 in UTC with microseconds."""
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _reference(obj: Any) -> dict[str, str]:
    """The ``ObjectReference`` of a dict shaped like Kubernetes JSON or an official model."""
    if isinstance(obj, Mapping):
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
    else:
        kind, api_version = getattr(obj, "kind", None), getattr(obj, "api_version", None)
    name = get_name(obj)
    missing = [
        n
        for n, v in (("apiVersion", api_version), ("kind", kind), ("metadata.name", name))
        if not v
    ]
    if missing:
        raise ValueError(f"{type(obj).__name__} without {', '.join(missing)} is not an object")
    ref = {"apiVersion": str(api_version), "kind": str(kind)}
    for key, value in (
        ("namespace", get_namespace(obj)),
        ("name", name),
        ("uid", get_uid(obj)),
        ("resourceVersion", get_resource_version(obj)),
    ):
        if value:
            ref[key] = str(value)
    return ref


class _TokenBucket:
    """client-go's token bucket: ``burst`` tokens, refilled continuously."""

    __slots__ = ("_last", "_tokens")

    def __init__(self, now: float) -> None:
        self._tokens = float(SPAM_BURST)
        self._last = now

    def _refill(self, now: float) -> None:
        self._tokens = min(float(SPAM_BURST), self._tokens + (now - self._last) / SPAM_REFILL)
        self._last = now

    def take(self, now: float) -> bool:
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def next_token(self, now: float) -> float:
        self._refill(now)
        return now + max(0.0, 1.0 - self._tokens) * SPAM_REFILL

    def full(self, now: float) -> bool:
        """Whether it has refilled: then it is what a new bucket would be."""
        return self._tokens + (now - self._last) / SPAM_REFILL >= SPAM_BURST


@dataclass(eq=False)
class _Series:
    """One Event and its repeats."""

    body: dict[str, Any]
    object_key: tuple[str, ...]
    count: int = 1
    last_observed: float = 0.0  # wall-clock seconds
    last_seen: float = 0.0  # clock seconds
    sent_count: int = 0  # 0: not created on the server
    queued: bool = False
    due: float = 0.0
    sending: bool = False  # a write of this series is in flight


class EventRecorder:
    """Records Events about objects (client-go's ``events.EventRecorder``; see the
    module documentation for what is written when).

    ``client``: a :class:`~kubereflector.client.SyncClient` (the recorder then
    sends on its loop thread), or an async :class:`~kubereflector.client.Client`
    (then create the recorder in a coroutine: it sends from that event loop).
    ``component`` is the ``reportingController``, a qualified name such as
    ``example.com/shop-controller``; ``reporting_instance`` defaults to
    ``{component}-{hostname}``. ``clock`` times the series, the token buckets
    and the retries (inject a FakeClock in tests).

    ``max_concurrent_sends`` (a positive integer, default 8) bounds the writes in
    flight at once, across series; a series never has more than one (its create
    is answered before its first patch is sent, so the counts it sends only
    grow). Why several: one write at a time cannot keep up with a busy
    controller (against kube-apiserver, recording the sample-controller's Events
    one at a time took it from 228 to 158 reconciles/s at 16 workers). Why 8: a
    reconcile makes several requests for about one Event, so Events need a
    fraction of the workers' concurrency, and 8 keeps small the connections and
    the share of the server's mutating in-flight limit (kube-apiserver's
    ``--max-mutating-requests-inflight``, 200 by default, shared by every
    client) that they take. A write waiting to retry after a connection error
    keeps its place. ``ValueError`` for anything but a positive integer.

    Thread-safety: :meth:`record` may be called from any thread and from
    coroutines; :meth:`flush` is awaited on any event loop,
    :meth:`flush_blocking` called from any thread but the client's loop thread.
    """

    _loop: asyncio.AbstractEventLoop | None

    def __init__(
        self,
        client: Client | SyncClient,
        component: str,
        *,
        reporting_instance: str | None = None,
        clock: Clock | None = None,
        max_concurrent_sends: int = MAX_CONCURRENT_SENDS,
    ) -> None:
        if not isinstance(component, str) or not component:
            raise ValueError("component (the reportingController) must be a non-empty string")
        loop: asyncio.AbstractEventLoop
        if isinstance(client, SyncClient):
            async_client, loop = client.client, client.loop
        elif isinstance(client, Client):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                raise RuntimeError(
                    "an EventRecorder with an async Client must be created in a coroutine "
                    "(it sends from that event loop); from plain threads, pass a SyncClient "
                    "(a Manager's event_recorder(name) works anywhere)"
                ) from None
            async_client = client
        else:
            raise TypeError(f"EventRecorder needs a Client or a SyncClient, not {type(client)}")
        self._setup(async_client, loop, component, reporting_instance, clock, max_concurrent_sends)

    @classmethod
    def _bound_later(
        cls,
        client: Client,
        component: str,
        *,
        clock: Clock | None = None,
        max_concurrent_sends: int = MAX_CONCURRENT_SENDS,
    ) -> EventRecorder:
        """A recorder whose event loop is given later (:meth:`_bind`): what it records
        meanwhile waits. For a Manager, which has no loop before it runs."""
        recorder = cls.__new__(cls)
        recorder._setup(client, None, component, None, clock, max_concurrent_sends)
        return recorder

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Send from ``loop`` from now on (what waits is sent at once)."""
        self._loop = loop
        with self._lock:
            waiting = bool(self._queue)
        if waiting:
            self._wake()

    def _setup(
        self,
        client: Client,
        loop: asyncio.AbstractEventLoop | None,
        component: str,
        reporting_instance: str | None,
        clock: Clock | None,
        max_concurrent_sends: int,
    ) -> None:
        if not isinstance(component, str) or not component:
            raise ValueError("component (the reportingController) must be a non-empty string")
        if (
            isinstance(max_concurrent_sends, bool)
            or not isinstance(max_concurrent_sends, int)
            or max_concurrent_sends < 1
        ):
            raise ValueError(
                f"max_concurrent_sends must be a positive integer, not {max_concurrent_sends!r}"
            )
        self._max_sending = max_concurrent_sends
        self._client = client
        self._loop = loop
        self.component = component
        self.reporting_instance = reporting_instance or f"{component}-{socket.gethostname()}"
        self._clock: Clock = clock if clock is not None else RealClock()
        self._lock = threading.Lock()
        self._series: dict[tuple[Any, ...], _Series] = {}
        self._buckets: collections.OrderedDict[tuple[str, ...], _TokenBucket] = (
            collections.OrderedDict()
        )
        self._queue: list[_Series] = []
        self._resources: dict[str, ResourceClient] = {}
        self._last_name_ns = 0
        self._records = 0
        self._dropped = 0
        self._sending = 0  # writes in flight (lock held to change or read it off the loop)
        self._sends: set[asyncio.Task[None]] = set()
        self._worker: asyncio.Task[None] | None = None
        self._kicked: asyncio.Event | None = None
        self._idle_waiters: list[asyncio.Future[None]] = []

    @property
    def dropped(self) -> int:
        """Events dropped so far (rate limit, full queue, failed writes)."""
        return self._dropped

    @property
    def objects_tracked(self) -> int:
        """Objects whose rate limit the recorder remembers now: those with an Event in
        the last few minutes (a bucket that has refilled is forgotten every 256
        records), never more than 4,096."""
        with self._lock:
            return len(self._buckets)

    # -- recording (any thread) ---------------------------------------------------------

    def record(
        self,
        obj: Any,
        type: EventType,
        reason: str,
        message: str,
        *,
        action: str | None = None,
    ) -> None:
        """Record an Event about ``obj`` (a dict with ``apiVersion``, ``kind`` and
        ``metadata.name``, or an official client model). ``type`` is ``"Normal"`` or
        ``"Warning"``; ``reason`` a short UpperCamelCase word; ``action`` what was
        done or failed (default: ``reason``; kube requires one). Returns at once;
        never raises (a bad argument is logged and the Event dropped)."""
        try:
            self._record(obj, type, reason, message, action or reason)
        except ValueError as err:
            logger.error("dropping event %r: %s", reason, err)
        except Exception:
            logger.exception("could not record the event %r", reason)

    def _record(self, obj: Any, event_type: str, reason: str, message: str, action: str) -> None:
        if event_type not in ("Normal", "Warning"):
            logger.error(
                "dropping event %r: type must be Normal or Warning, not %r", reason, event_type
            )
            return
        if not reason or not isinstance(reason, str):
            logger.error("dropping an event without a reason (a non-empty string)")
            return
        ref = _reference(obj)
        object_key = (
            ref["apiVersion"],
            ref["kind"],
            ref.get("namespace", ""),
            ref["name"],
            ref.get("uid", ""),
        )
        key = (action, reason, object_key)
        now = self._clock.now()
        wall = time.time()
        with self._lock:
            self._records += 1
            if self._records % _SWEEP_EVERY == 0:
                self._sweep(now)
            series = self._series.get(key)
            if series is not None and now - series.last_seen > SERIES_FINISH:
                del self._series[key]
                series = None
            if series is None:
                if len(self._queue) >= MAX_QUEUED:
                    self._drop(f"{MAX_QUEUED} events wait to be sent", reason, ref)
                    return
                if not self._bucket(object_key, now).take(now):
                    self._drop("too many events about this object", reason, ref)
                    return
                body = self._event(ref, event_type, reason, str(message), action, wall)
                series = _Series(body, object_key, last_observed=wall, last_seen=now)
                self._series[key] = series
            else:
                series.count += 1
                series.last_observed = wall
                series.last_seen = now
            if not series.queued:
                series.queued = True
                series.due = now
                self._queue.append(series)
        self._wake()

    def _event(
        self, ref: dict[str, str], event_type: str, reason: str, note: str, action: str, wall: float
    ) -> dict[str, Any]:
        nanos = max(time.time_ns(), self._last_name_ns + 1)
        self._last_name_ns = nanos
        return {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "name": f"{ref['name']}.{nanos:x}",
                "namespace": ref.get("namespace") or "default",
            },
            "eventTime": _micro_time(wall),
            "reportingController": self.component,
            "reportingInstance": self.reporting_instance,
            "action": action,
            "reason": reason,
            "regarding": ref,
            "note": note[:NOTE_LIMIT],
            "type": event_type,
        }

    def _bucket(self, object_key: tuple[str, ...], now: float) -> _TokenBucket:
        """Lock held."""
        bucket = self._buckets.get(object_key)
        if bucket is None:
            bucket = self._buckets[object_key] = _TokenBucket(now)
            if len(self._buckets) > _OBJECTS_TRACKED:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(object_key)
        return bucket

    def _drop(self, why: str, reason: str, ref: Mapping[str, str]) -> None:
        self._dropped += 1
        logger.warning(
            "dropping event %r about %s %s/%s: %s",
            reason,
            ref["kind"],
            ref.get("namespace", ""),
            ref["name"],
            why,
        )

    def _sweep(self, now: float) -> None:
        """Lock held: forget series that ended and have nothing left to send, and the
        buckets that have refilled (a full bucket is what :meth:`_bucket` would make
        anew), so that objects long gone (a new uid each time one is created again)
        are not remembered until the 4,096th."""
        for key, series in list(self._series.items()):
            if not series.queued and now - series.last_seen > SERIES_FINISH:
                del self._series[key]
        for object_key, bucket in list(self._buckets.items()):
            if bucket.full(now):
                del self._buckets[object_key]

    def _wake(self) -> None:
        """Make sure the sending task runs (from any thread)."""
        if self._loop is None:
            return  # not bound yet (a Manager's before it runs): sent once bound
        if not call_in_loop(self._loop, self._kick):
            logger.debug("the event loop of the EventRecorder is closed: events stay unsent")

    # -- sending (on the loop) ----------------------------------------------------------

    def _kick(self) -> None:
        assert self._loop is not None
        if self._worker is None or self._worker.done():
            self._worker = self._loop.create_task(self._run(), name="kubereflector events")
        elif self._kicked is not None:
            self._kicked.set()

    async def _run(self) -> None:
        """The dispatcher: starts a sending task for each series due, up to the bound of
        writes in flight, then waits for a kick (a record, a write answered) or for the
        next series to come due; ends when nothing waits and nothing is in flight.
        Cancelled (the loop closing), it cancels the writes it started."""
        self._kicked = asyncio.Event()
        try:
            while True:
                self._kicked.clear()
                now = self._clock.now()
                with self._lock:
                    free = self._max_sending - self._sending
                    due, wake_at = self._take_due(now, free) if free > 0 else ([], None)
                    for series in due:
                        series.sending = True
                    self._sending += len(due)
                    idle = self._sending == 0
                for series in due:
                    self._start_send(series)
                if idle:
                    self._notify_idle()
                    if wake_at is None:
                        return
                await self._wait(None if wake_at is None else wake_at - now)
        finally:
            for task in list(self._sends):
                task.cancel()
            self._notify_idle()

    def _take_due(self, now: float, limit: int) -> tuple[list[_Series], float | None]:
        """Lock held: up to ``limit`` series due, allowed a write and without one in
        flight, in queue order, taken off the queue; and when the first series of the
        rest that no write in flight holds back comes due (``None``: none does).

        A series with a write in flight stays queued: its next write waits for that
        one's answer (the dispatcher is kicked then). Past ``limit`` the rest is not
        looked at: every slot is taken, and the first answer kicks the dispatcher."""
        taken: list[_Series] = []
        wake_at: float | None = None
        for series in self._queue:
            if len(taken) == limit:
                break
            if series.sending:
                continue
            if series.due <= now and series.sent_count:
                finish = series.last_seen + SERIES_FINISH
                bucket = self._bucket(series.object_key, now)
                if now < finish and not bucket.take(now):
                    series.due = min(bucket.next_token(now), finish)
            if series.due <= now:
                series.queued = False
                taken.append(series)
            else:
                wake_at = series.due if wake_at is None else min(wake_at, series.due)
        if taken:
            self._queue = [series for series in self._queue if series.queued]
        return taken, wake_at

    def _start_send(self, series: _Series) -> None:
        assert self._loop is not None
        task = self._loop.create_task(self._send_one(series), name="kubereflector event write")
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send_one(self, series: _Series) -> None:
        """One write of ``series`` (counted in flight by the dispatcher); then frees its
        place and kicks the dispatcher (unless cancelled: the loop is closing)."""
        cancelled = False
        try:
            await self._send(series)
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            with self._lock:
                self._sending -= 1
                series.sending = False
            if cancelled:
                self._notify_idle()
            else:
                self._kick()

    async def _wait(self, seconds: float | None) -> None:
        """Until a kick, or ``seconds`` of the clock (``None``: no limit) have passed."""
        assert self._kicked is not None
        if seconds is None:
            await self._kicked.wait()
            return
        kicked = asyncio.ensure_future(self._kicked.wait())
        slept = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait({kicked, slept}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            kicked.cancel()
            slept.cancel()

    def _events_in(self, namespace: str) -> ResourceClient:
        resource = self._resources.get(namespace)
        if resource is None:
            resource = self._resources[namespace] = self._client.resource(
                EVENTS_RESOURCE, namespace=namespace
            )
        return resource

    async def _send(self, series: _Series) -> None:
        with self._lock:
            count, last_observed, created = series.count, series.last_observed, series.sent_count
            body = dict(series.body)
        if count > 1:
            body["series"] = {"count": count, "lastObservedTime": _micro_time(last_observed)}
        meta = body["metadata"]
        events = self._events_in(meta["namespace"])
        for attempt in range(1, MAX_TRIES + 1):
            try:
                if created:
                    try:
                        await events.patch(meta["name"], {"series": body["series"]})
                    except NotFoundError:  # the Event expired on the server: write it anew
                        await events.create(body)
                else:
                    await events.create(body)
            except AlreadyExistsError:
                logger.debug("event %s already exists: not written again", meta["name"])
            except ApiError as err:
                self._failed(series, f"the server refused it: {err}")
                return
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as err:
                if attempt == MAX_TRIES:
                    self._failed(series, f"no connection after {MAX_TRIES} tries: {err!r}")
                    return
                logger.warning("could not write event %s (will retry): %r", meta["name"], err)
                await self._clock.sleep(RETRY_SLEEP * (1 + 0.25 * random.random()))
                continue
            except Exception:
                logger.exception("could not write event %s", meta["name"])
                self._failed(series, "an unexpected error")
                return
            break
        with self._lock:
            series.sent_count = count
            if series.count > count and not series.queued:  # repeats arrived meanwhile
                series.queued = True
                series.due = self._clock.now()
                self._queue.append(series)

    def _failed(self, series: _Series, why: str) -> None:
        meta = series.body["metadata"]
        logger.error(
            "dropping event %s (%s about %s %s): %s",
            meta["name"],
            series.body["reason"],
            series.body["regarding"]["kind"],
            series.body["regarding"]["name"],
            why,
        )
        with self._lock:
            self._dropped += 1
            if not series.sent_count:  # never created: the next occurrence starts afresh
                for key, value in list(self._series.items()):
                    if value is series:
                        del self._series[key]

    # -- flushing -----------------------------------------------------------------------

    def _busy(self) -> bool:
        now = self._clock.now()
        with self._lock:
            return self._sending > 0 or any(s.due <= now for s in self._queue)

    def _notify_idle(self) -> None:
        if self._busy():
            return
        waiters, self._idle_waiters = self._idle_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _flushed(self) -> None:
        while self._busy():
            waiter = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            self._kick()
            await waiter

    async def flush(self) -> None:
        """Wait until every write recorded so far that the rate limit allows now has
        been sent (or given up on) and no write is in flight. Await on any event loop.
        Raises ``RuntimeError`` for a Manager's recorder with Events to send before the
        manager runs."""
        loop = self._bound_loop()
        if asyncio.get_running_loop() is loop:
            await self._flushed()
            return
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._flushed(), loop))

    def flush_blocking(self, timeout: float | None = None) -> bool:
        """:meth:`flush` from a plain thread: ``False`` if ``timeout`` seconds passed
        first. Raises ``RuntimeError`` on the client's loop thread."""
        loop = self._bound_loop()
        if running_loop() is loop:
            raise RuntimeError("flush_blocking() would deadlock on the recorder's own loop")
        future = asyncio.run_coroutine_threadsafe(self._flushed(), loop)
        try:
            future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return False
        return True

    def _bound_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError(
                "this EventRecorder sends from its Manager's event loop, which does not run yet"
            )
        return self._loop

    def __repr__(self) -> str:
        return (
            f"<EventRecorder {self.component} series={len(self._series)} "
            f"objects={len(self._buckets)}>"
        )
