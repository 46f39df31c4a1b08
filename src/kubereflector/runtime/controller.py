"""Controller: watches feed a rate-limited workqueue; workers reconcile its requests.

controller-runtime's ``pkg/internal/controller``, on kubereflector's informers and
:mod:`kubereflector.workqueue`:

* **Level-based.** Events never reach the reconciler: each becomes a
  :class:`~kubereflector.runtime.Request` in the queue, and the reconciler reads
  the current state from the cache. Requests queued several times before a
  worker takes them are reconciled once.
* **One worker per request.** The queue never hands a request to a second
  worker while one reconciles it; a request queued again meanwhile is
  reconciled exactly once more, after the first reconcile ends.
* **Results.** ``None``/``Result()``: done (the request's backoff is reset);
  ``Result(requeue_after=s)``: again after ``s`` seconds (``0``: again soon,
  through the rate limiter); :class:`~kubereflector.runtime.TerminalError`:
  logged, not retried; any other exception: logged and retried after the rate
  limiter's per-request backoff. A :class:`~kubereflector.ConflictError` (a write
  based on a stale read), an :class:`~kubereflector.AlreadyExistsError` (a create of
  an object the cache had not seen yet) and a
  :class:`~kubereflector.runtime.StaleReadError` are retried the same way but
  logged as one line at INFO: retrying is their cure.
* **Timeouts.** With ``ControllerOptions(reconcile_timeout=s)``, a coroutine
  reconcile still running after ``s`` seconds is cancelled; a plain function
  (which a thread cannot interrupt) is waited for and its result dropped. Either
  way the timeout is logged, counted in
  ``controller_runtime_reconcile_timeouts_total`` and the request retried after
  backoff.
* **Priorities.** Requests from initial lists and resyncs are queued at
  :data:`~kubereflector.workqueue.LOW_PRIORITY`, live changes at 0. A request
  queued again by its own reconcile (a requeue, a failure) keeps the priority it
  was queued at, unless the result says otherwise (``Result(priority=...)``).
* **Start.** Workers start once every watch's handler has handled its informer's
  initial list (every initial request is queued, at its priority, before the first
  reconcile), controller-runtime's ``WaitForSync`` of the handlers.
* **Own writes.** With a Manager's read-your-own-writes ledger (``own_writes``),
  a reconcile first waits until the cache has seen what earlier reconciles of its
  request wrote, and the watch events of a reconcile's own writes do not queue its
  request again (see :mod:`kubereflector.runtime.read_your_writes`;
  ``ControllerOptions(requeue_on_own_writes=True)`` queues them as
  controller-runtime does).
* **Workers.** ``max_concurrent_reconciles`` workers. A coroutine reconciler
  runs on the event loop; a plain function runs on a worker thread of the
  controller's own pool (one thread per worker), so it may block.
* **Gate.** With a :class:`~kubereflector.runtime.gate.ReconcileGate` (a sharded
  Manager's: the shards this replica holds), only the requests it lets through
  are queued and reconciled; a reconcile it revokes is cancelled and forgotten.

A Controller works on informers you give it (a :class:`~kubereflector.runtime.Manager`
makes them from resource names), so tests drive one with
:class:`~kubereflector.testing.FakeControllerSource` informers and a
:class:`~kubereflector.testing.FakeClock`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import enum
import logging
import time
from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

from .._aio.calls import is_coroutine_callable
from ..cache.shared_informer import Registration, SharedIndexInformer, wait_for_cache_sync
from ..clock import Clock, RealClock
from ..errors import AlreadyExistsError, ConflictError
from ..workqueue import QueueShutDown, RateLimitingQueue
from ._context import ReconcileContext, reconciling
from .gate import GateTicket, ReconcileGate, ReconcileRevokedError
from .handlers import EnqueueRequestsHandler, Mapper, RequestQueue, enqueue_object, enqueue_owner
from .options import ControllerOptions, _checked_options
from .predicates import Predicate, and_
from .read_your_writes import OwnWrites, StaleReadError
from .reconcile import ReconcileFunc, Request, Result, TerminalError

if TYPE_CHECKING:
    from ..client.discovery import ResourceInfo
    from ..metrics import ControllerMetrics, Metrics

__all__ = ["Controller", "ControllerStoppedError"]

logger = logging.getLogger("kubereflector.runtime")

_YIELD_EVERY: Final = 64
"""Reconciles a worker runs in a row before it lets the loop's other tasks run."""

_RESULT_SUCCESS: Final = "success"
_RESULT_ERROR: Final = "error"
_RESULT_REQUEUE: Final = "requeue"
_RESULT_REQUEUE_AFTER: Final = "requeue_after"


class _State(enum.Enum):
    """A controller's lifecycle: it runs once."""

    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


class ControllerStoppedError(RuntimeError):
    """The controller has run and stopped; make a new one to run again."""


class _NoMetrics:
    def set_max_concurrent_reconciles(self, workers: int) -> None:
        pass

    def worker_started(self) -> None:
        pass

    def worker_finished(self) -> None:
        pass

    def reconciled(self, result: str, seconds: float, *, terminal: bool = False) -> None:
        pass

    def timed_out(self) -> None:
        pass

    def conflicted(self) -> None:
        pass

    def stale(self) -> None:
        pass


class _ReconcileTimeout(Exception):
    """The controller's own timer ran out (told apart from a TimeoutError the
    reconciler raises itself)."""


class _Echoes:
    """A controller's :class:`~kubereflector.runtime.EchoFilter` for one watched informer:
    an event that echoes a write made by the reconcile of the request it maps to does
    not queue that request. While that request's reconcile runs, its writes may not be
    recorded yet (a watch event can come before the write's answer): the event is kept
    and decided when the reconcile ends."""

    __slots__ = ("_controller", "_informer", "_ledger", "skipped")

    def __init__(
        self, ledger: OwnWrites, informer: SharedIndexInformer, controller: Controller
    ) -> None:
        self._ledger = ledger
        self._informer = informer
        self._controller = controller
        self.skipped = 0

    def admit(self, request: Request, obj: Any, deleted: bool, priority: int) -> bool:
        kept = self._controller._reconciling.get(request)
        if kept is not None:  # in flight: queued again (or not) when it ends
            kept.append((self, obj, deleted, priority))
            return False
        return not self.is_echo(request, obj, deleted)

    def is_echo(self, request: Request, obj: Any, deleted: bool) -> bool:
        found = self._ledger.writer_of(self._informer, obj, deleted=deleted)
        if found is None or found != (self._controller._name, request):
            return False
        self.skipped += 1
        return True


class Controller:
    """Reconciles the objects of one resource (controller-runtime's ``Controller``).

    * ``reconcile``: the reconciler (coroutine function or plain function; see
      :data:`~kubereflector.runtime.ReconcileFunc`).
    * ``for_``: the informer of the reconciled resource and its
      :class:`~kubereflector.client.ResourceInfo` (whose group, kind and scope
      identify owners); every change of its objects queues their own request,
      if ``predicates`` (all of them) let it through.
    * ``owns``: informers of owned resources; a change of an object whose
      controller ``ownerReference`` points at a ``for_`` object queues the owner.
      Not filtered by ``predicates``.
    * ``watches``: ``(informer, mapper)`` pairs; a change of a watched object
      queues ``mapper(obj)``'s requests. Not filtered by ``predicates``.
    * ``options``: :class:`~kubereflector.runtime.ControllerOptions` (workers,
      rate limiter); ``name`` labels logs, metrics and the queue (default: the
      resource's qualified name); ``clock`` drives requeues and backoff;
      ``metrics`` receives controller-runtime's and the workqueue's metrics;
      ``own_writes``: the read-your-own-writes ledger of the Manager whose client
      the reconciler writes through (see the module documentation).
    * ``gate``: a :class:`~kubereflector.runtime.gate.ReconcileGate` deciding which
      requests are queued and reconciled (default: all).

    :meth:`run` once; stop it with :meth:`stop` (graceful) or by cancelling it
    (at once). Thread-safety: ``queue`` may be fed from any thread; ``run``,
    ``stop`` and the properties belong to one event loop.
    """

    def __init__(
        self,
        reconcile: ReconcileFunc,
        *,
        for_: tuple[SharedIndexInformer[Any], ResourceInfo],
        owns: Iterable[SharedIndexInformer[Any]] = (),
        watches: Iterable[tuple[SharedIndexInformer[Any], Mapper]] = (),
        predicates: Sequence[Predicate] = (),
        options: ControllerOptions | None = None,
        name: str | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        gate: ReconcileGate | None = None,
        own_writes: OwnWrites | None = None,
    ) -> None:
        if not callable(reconcile):
            raise TypeError(f"reconcile must be callable, not {type(reconcile).__name__}")
        options = _checked_options(options)
        informer, info = for_
        if not isinstance(informer, SharedIndexInformer):
            raise TypeError(f"for_ takes an informer, not {type(informer).__name__}")
        for p in predicates:
            if not isinstance(p, Predicate):
                raise TypeError(f"predicates are Predicates, not {type(p).__name__}")
        self._reconcile = reconcile
        self._is_coroutine = is_coroutine_callable(reconcile)
        self._name = name or info.qualified_name
        self._predicate = and_(*predicates) if predicates else None
        owner = enqueue_owner(info.group, info.kind, namespaced=info.namespaced)
        self._watches: list[tuple[SharedIndexInformer, Mapper, Predicate | None]] = [
            (informer, enqueue_object, self._predicate),
            *((owned, owner, None) for owned in owns),
        ]
        for watched, mapper in watches:
            if not callable(mapper):
                raise TypeError(f"the mapper of a watch must be callable, not {mapper!r}")
            self._watches.append((watched, mapper, None))
        for watched, _, _ in self._watches:
            if not isinstance(watched, SharedIndexInformer):
                raise TypeError(f"watches take informers, not {type(watched).__name__}")
        self._informer = informer
        self._options = options
        self._own_writes = own_writes
        self._echoes: list[_Echoes] = []
        # The requests being reconciled, and the live events that mapped to them meanwhile
        # (decided when the reconcile ends; see _Echoes).
        self._reconciling: dict[Request, list[tuple[_Echoes, Any, bool, int]]] = {}
        self._workers = options.max_concurrent_reconciles
        self._clock: Clock = clock if clock is not None else RealClock()
        self._metrics: ControllerMetrics | _NoMetrics = (
            metrics.controller(self._name) if metrics is not None else _NoMetrics()
        )
        self._queue = RateLimitingQueue(
            options.rate_limiter,
            name=self._name,
            clock=self._clock,
            metrics_provider=metrics.workqueue_provider() if metrics is not None else None,
        )
        self._metrics_registry = metrics
        if gate is not None and not isinstance(gate, ReconcileGate):
            raise TypeError(f"gate must be a ReconcileGate, not {type(gate).__name__}")
        self._gate = gate
        self._state = _State.NEW
        self._stopping = False
        self._worker_tasks: list[asyncio.Task[None]] = []
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._in_flight = 0

    # -- properties -------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The controller's name: its metrics' ``controller`` label and its work queue's name."""
        return self._name

    @property
    def queue(self) -> RateLimitingQueue[Request]:
        """The controller's queue (add requests from anywhere; they are reconciled
        while the controller runs)."""
        return self._queue

    @property
    def informer(self) -> SharedIndexInformer:
        """The informer of the reconciled resource."""
        return self._informer

    @property
    def max_concurrent_reconciles(self) -> int:
        """At most this many requests are reconciled at once (never one request twice)."""
        return self._workers

    def in_flight(self) -> int:
        """Reconciles running right now."""
        return self._in_flight

    def echoes_skipped(self) -> int:
        """Watch events of this controller's own writes that did not queue the request
        whose reconcile made them (see the module documentation)."""
        return sum(e.skipped for e in self._echoes)

    # -- running ----------------------------------------------------------------------

    async def run(self) -> None:
        """Register the watches, wait for their informers to sync, then reconcile
        until :meth:`stop` or cancellation.

        :meth:`stop` lets reconciles in flight finish; cancelling stops at once
        (coroutine reconciles in flight are cancelled; a plain function in flight
        runs to its end on its thread, but nothing new starts). Either way the
        watches are removed and the queue is shut down. Raises
        :class:`ControllerStoppedError` if the controller ran before.
        """
        if self._state is not _State.NEW:
            raise ControllerStoppedError(f"controller {self._name} has already run")
        self._state = _State.RUNNING
        registrations: list[Registration] = []
        if self._metrics_registry is not None:
            self._metrics_registry.track_queue(self._queue)
        try:
            target: RequestQueue = self._queue
            if self._gate is not None:
                target = _GatedQueue(self._queue, self._gate)
            for informer, mapper, predicate in self._watches:
                echoes = None
                if self._own_writes is not None and not self._options.requeue_on_own_writes:
                    echoes = _Echoes(self._own_writes, informer, self)
                    self._echoes.append(echoes)
                handler = EnqueueRequestsHandler(target, mapper, predicate, echoes=echoes)
                registrations.append(informer.add_event_handler(handler))
            # The handlers, not only their informers: every initial request is queued
            # (at its priority) before the first reconcile.
            if not await wait_for_cache_sync(*registrations):
                logger.warning("controller %s: an informer stopped before syncing", self._name)
                return
            if self._stopping:
                return
            if not self._is_coroutine:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._workers, thread_name_prefix=f"reconcile-{self._name}"
                )
            self._metrics.set_max_concurrent_reconciles(self._workers)
            logger.info("controller %s: starting %d workers", self._name, self._workers)
            self._worker_tasks = [
                asyncio.create_task(self._worker(), name=f"{self._name} worker {i}")
                for i in range(self._workers)
            ]
            await asyncio.gather(*self._worker_tasks)
        finally:
            self._state = _State.STOPPED
            self._queue.shut_down()
            for task in self._worker_tasks:
                task.cancel()
            if self._worker_tasks:
                await asyncio.wait(self._worker_tasks)
            for registration in registrations:
                with contextlib.suppress(ValueError):
                    registration.informer.remove_event_handler(registration)
            if self._executor is not None:
                self._executor.shutdown(wait=False)
            if self._metrics_registry is not None:
                self._metrics_registry.untrack_queue(self._queue)
            logger.info("controller %s: stopped", self._name)

    async def stop(self, timeout: float | None = None) -> bool:
        """Stop handing out requests, and wait until the reconciles in flight have
        ended (at most ``timeout`` seconds of the controller's clock; ``None``: no
        limit). Returns ``True`` if they all ended; ``False`` if the timeout came
        first (then they are cancelled, as when the run is cancelled). The
        controller's :meth:`run` then returns."""
        self._stopping = True
        self._queue.shut_down()
        tasks = list(self._worker_tasks)
        if not tasks:
            return True
        done = asyncio.ensure_future(asyncio.wait(tasks))
        waits: set[asyncio.Future[Any]] = {done}
        timer = None
        if timeout is not None:
            timer = asyncio.ensure_future(self._clock.sleep(timeout))
            waits.add(timer)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if timer is not None:
                timer.cancel()
        if done.done():
            return True
        done.cancel()
        logger.warning(
            "controller %s: reconciles still running after %gs; cancelling them",
            self._name,
            timeout,
        )
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        return False

    async def _worker(self) -> None:
        queue = self._queue
        in_a_row = 0
        while not self._stopping:
            try:
                request, priority = await queue.get_with_priority()
            except QueueShutDown:
                return
            try:
                if self._stopping:
                    return
                if not await self._caught_up(request, priority):
                    continue  # postponed: the cache has not seen the request's writes
                ticket = None  # no await from here to the reconcile's start (see .gate)
                if self._gate is not None:
                    ticket = self._gate.enter(request)
                    if ticket is None:  # not this controller's to reconcile now
                        queue.forget(request)
                        continue
                await self._reconcile_one(request, priority, ticket)
            finally:
                queue.done(request)
            in_a_row += 1
            if in_a_row >= _YIELD_EVERY:
                # A full queue and reconciles that never wait would otherwise hold
                # the loop: the watches, the lease renewals and the probes wait.
                in_a_row = 0
                await asyncio.sleep(0)

    async def _caught_up(self, request: Request, priority: int) -> bool:
        """Wait until the cache has seen what earlier reconciles of ``request`` wrote;
        ``False`` when it did not in time (the request is then requeued with backoff)."""
        own_writes = self._own_writes
        if own_writes is None or not own_writes.has_writes_of(self._name, request):
            return True
        unseen = await own_writes.wait_for_request(self._name, request)
        if unseen is None:
            return True
        self._metrics.stale()
        logger.info(
            "controller %s: reconcile of %s postponed (retried after backoff): "
            "the cache has not seen %s within %gs",
            self._name,
            request,
            unseen,
            own_writes.timeout,
        )
        self._queue.add_rate_limited(request, priority=priority)
        return False

    async def _reconcile_one(
        self, request: Request, priority: int = 0, ticket: GateTicket | None = None
    ) -> None:
        queue = self._queue
        metrics = self._metrics
        metrics.worker_started()
        self._in_flight += 1
        started = time.perf_counter()
        token = reconciling.set(ReconcileContext(self._name, request, priority))
        if self._echoes:
            self._reconciling[request] = []
        try:
            result = await self._call(request, ticket)
            if result is None:
                result = Result()
            elif not isinstance(result, Result):
                raise TypeError(
                    f"a reconciler returns a Result or None, not {type(result).__name__}"
                )
        except ReconcileRevokedError as err:
            logger.info("controller %s: reconcile of %s revoked: %s", self._name, request, err)
            queue.forget(request)
            return
        except TerminalError as err:
            metrics.reconciled(_RESULT_ERROR, time.perf_counter() - started, terminal=True)
            logger.error(
                "controller %s: reconcile of %s failed terminally (not retried): %s",
                self._name,
                request,
                err,
            )
            queue.forget(request)
            return
        except _ReconcileTimeout:
            metrics.reconciled(_RESULT_ERROR, time.perf_counter() - started)
            queue.add_rate_limited(request, priority=priority)
            return
        except (ConflictError, AlreadyExistsError, StaleReadError) as err:
            if isinstance(err, (ConflictError, AlreadyExistsError)):
                metrics.conflicted()
            else:
                metrics.stale()
            metrics.reconciled(_RESULT_ERROR, time.perf_counter() - started)
            logger.info(
                "controller %s: reconcile of %s read a stale object (retried after backoff): %s",
                self._name,
                request,
                err,
            )
            queue.add_rate_limited(request, priority=priority)
            return
        except Exception as err:
            metrics.reconciled(_RESULT_ERROR, time.perf_counter() - started)
            logger.error(
                "controller %s: reconcile of %s failed (retried after backoff): %s",
                self._name,
                request,
                err,
                exc_info=err,
            )
            queue.add_rate_limited(request, priority=priority)
            return
        finally:
            reconciling.reset(token)
            if self._echoes:
                self._events_meanwhile(request)
            self._in_flight -= 1
            metrics.worker_finished()
            if ticket is not None:
                ticket.exit()
        seconds = time.perf_counter() - started
        after = result.requeue_after
        if result.priority is not None:
            priority = result.priority
        if after is None:
            queue.forget(request)
            metrics.reconciled(_RESULT_SUCCESS, seconds)
        elif after == 0:
            queue.add_rate_limited(request, priority=priority)
            metrics.reconciled(_RESULT_REQUEUE, seconds)
        else:
            queue.forget(request)
            queue.add_after(request, after, priority=priority)
            metrics.reconciled(_RESULT_REQUEUE_AFTER, seconds)

    def _events_meanwhile(self, request: Request) -> None:
        """Queue ``request`` again for the events that came while it was reconciled,
        but those echoing its own writes (recorded by now)."""
        for echoes, obj, deleted, priority in self._reconciling.pop(request, ()):
            if not echoes.is_echo(request, obj, deleted):
                self._queue.add(request, priority=priority)  # processing: queued after done

    async def _call(self, request: Request, ticket: GateTicket | None) -> object:
        """Run the reconciler (in the reconcile's context; a coroutine under its gate's
        ticket); ``_ReconcileTimeout`` when ``reconcile_timeout`` passes first."""
        timeout = self._options.reconcile_timeout
        work: asyncio.Future[Any]
        if self._is_coroutine:
            call = cast("Awaitable[Result | None]", self._reconcile(request))
            if ticket is not None:
                call = ticket.run(call)
            if timeout is None:  # no task of its own: the worker's is enough
                return await call
            work = asyncio.ensure_future(call)
        else:
            loop = asyncio.get_running_loop()
            context = contextvars.copy_context()
            work = loop.run_in_executor(self._executor, context.run, self._reconcile, request)
            if timeout is None:
                return await work
        timer = asyncio.ensure_future(self._clock.sleep(timeout))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            timer.cancel()
        if work.done():
            return work.result()
        self._metrics.timed_out()  # now, not once a thread that overran gives up
        logger.warning(
            "controller %s: reconcile of %s timed out after %gs (%s; retried after backoff)",
            self._name,
            request,
            timeout,
            "cancelled" if self._is_coroutine else "its result will be dropped",
        )
        if self._is_coroutine:
            work.cancel()
        # A thread cannot be interrupted: wait for it (one worker per request), then
        # drop what it did.
        await asyncio.wait({work})
        if not work.cancelled():
            work.exception()  # retrieved: what it raised after its time is moot
        raise _ReconcileTimeout

    def __repr__(self) -> str:
        return f"<Controller {self._name} {self._state.value} workers={self._workers}>"


class _GatedQueue:
    """A queue's ``add`` behind a gate's ``wanted`` (what a gated controller's handlers
    add to)."""

    __slots__ = ("_gate", "_queue")

    def __init__(self, queue: RequestQueue, gate: ReconcileGate) -> None:
        self._queue = queue
        self._gate = gate

    def add(self, item: Request, *, priority: int = 0) -> None:
        if self._gate.wanted(item):
            self._queue.add(item, priority=priority)
