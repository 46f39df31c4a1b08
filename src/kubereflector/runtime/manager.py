"""Manager: the caches, the controllers, leader election, metrics, health and shutdown
of one operator process (controller-runtime's ``manager.Manager``).

::

    manager = Manager(load_config(), leader_election=LeaderElection("my-operator"),
                      metrics_port=8080, health_port=8081)

    @manager.reconciler("configmaps", owns=["configmaps"])
    async def reconcile(request: Request) -> Result | None:
        cm = manager.lister_for("configmaps").namespaced(request.namespace).get(request.name)
        ...

    async def main():
        async with manager:
            await manager.run()        # or, with no event loop at all: manager.run_sync()

What :meth:`Manager.run` does, in order:

1. serves ``/metrics`` on ``metrics_port`` and ``/healthz``, ``/readyz`` on
   ``health_port`` (each only if given; the same port may serve both);
2. resolves every registered resource through discovery and starts one shared
   informer per resource: caches warm while this process campaigns, so a new
   leader starts with full caches (``/readyz`` passes once they synced);
3. with ``leader_election``, campaigns for the Lease and runs the controllers
   only while leading: losing the lease stops every reconcile at once (coroutine
   reconciles are cancelled; plain-function ones, which cannot be, are waited
   for before the Lease is released), then ``run`` raises
   :class:`LeaderElectionLostError` (the process should exit non-zero, as
   controller-runtime's do), or, with ``on_lost="campaign"``, campaigns again;
   without it, runs the controllers at once;
4. on SIGTERM or SIGINT (or :meth:`Manager.stop`) shuts down gracefully: stops
   handing out requests, waits up to ``graceful_shutdown_timeout`` seconds for
   the reconciles in flight (then cancels them; a plain-function reconcile
   cannot be, and is waited for to its end, the Lease still renewed, so that no
   two replicas reconcile at once), releases the Lease (so another replica
   takes over at once), stops the informers and servers, and returns.

With ``sharding`` (a :class:`~kubereflector.runtime.sharding.Sharding`) instead
of leader election, the controllers run on every replica, each reconciling the
objects of the virtual shards it holds, its caches holding only those objects
(see :mod:`kubereflector.runtime.sharding`); ``/readyz`` passes once this replica
holds every shard the assignment gives it, and a graceful shutdown hands its
shards back before it returns.

:meth:`Manager.add` adds a :class:`~kubereflector.runtime.Runnable` beside the
controllers: it runs from the start (a webhook server, which every replica
serves), or, with ``leader_only=True``, only while this replica leads.

With ``webhook_port``, the manager serves admission and conversion webhooks
(:mod:`kubereflector.runtime.webhooks`) on every replica, registered with
:meth:`Manager.validator`, :meth:`Manager.defaulter` and :meth:`Manager.converter`;
``/readyz`` then waits for the webhook server too.

Writes made through :attr:`Manager.client` are remembered, so that the manager's
cache reads do not miss them and its controllers do not reconcile again for their
echoes: see :mod:`kubereflector.runtime.read_your_writes`.
:meth:`Manager.event_recorder` gives an
:class:`~kubereflector.client.EventRecorder` to use from coroutine and plain-function
reconcilers alike, made whenever convenient (before the manager runs too).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import signal
import threading
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .._aio.loop_thread import LoopThread, call_in_loop
from .._aio.signals import LoopStopSignals, ThreadStopSignals
from ..cache.keys import KubeObject, ModelT
from ..client._models import model_info
from ..client.config import ClientConfig
from ..client.rest import Client
from ..clock import Clock, RealClock
from ..factory import SharedInformerFactory
from ..leaderelection import LeaderElector
from ..metrics import Metrics, MetricsServer
from ._cache_entries import _CacheEntries
from ._runnables import Runnables
from ._specs import Spec, is_resource
from ._webhook_entries import _WebhookEntries
from .controller import Controller
from .handlers import Mapper
from .leader_election import (
    LEADER_HEALTH_TOLERANCE,
    LeaderElection,
    LeaderElectionLostError,
    _new_elector,
    _pod_namespace,
)
from .options import ControllerOptions, InformerOptions, _checked_informers, _checked_options
from .permissions import (
    ManagerDescription,
    Permission,
    _custom_resources,
    _permissions_for,
    _Reconciles,
)
from .predicates import Predicate
from .reconcile import Request
from .runnable import Runnable
from .sharding import Sharding
from .webhooks.server import WebhookOptions

if TYPE_CHECKING:
    from ..cache.shared_informer import SharedIndexInformer
    from ..client.discovery import ResourceInfo
    from ..client.sync import SyncClient
    from .sharding import ShardCoordinator
    from .sharding._runtime import ShardedRuntime

__all__ = ["Manager", "ManagerError"]

logger = logging.getLogger("kubereflector.runtime")

F = TypeVar("F", bound=Callable[[Request], Any])


class ManagerError(RuntimeError):
    """The manager was used wrongly (run twice, registered after the start, ...)."""


class _State(enum.Enum):
    """A manager's lifecycle: entered (``async with``, or by :meth:`Manager.run`),
    run once, stopped."""

    NEW = "new"
    ENTERED = "entered"
    RUNNING = "running"
    STOPPED = "stopped"


class Manager(_CacheEntries, _WebhookEntries):
    """Runs controllers over shared caches, with leader election, metrics, health
    probes and graceful shutdown (see the module documentation).

    ``config_or_client``: a :class:`~kubereflector.client.ClientConfig` (the
    manager makes the Client and closes it) or a
    :class:`~kubereflector.client.Client` (yours; not closed; its requests are
    counted in the manager's metrics unless it reports elsewhere). ``namespace``:
    watch only this namespace (default: all). ``metrics_port``/``health_port``:
    serve ``/metrics`` and ``/healthz`` + ``/readyz`` there (``None``: not at
    all; ``0``: any free port, see :attr:`metrics_url`), on ``bind_address``.
    ``clock`` drives leader election, requeues and the shutdown timeout;
    ``metrics``: where metrics go (default: a registry of the manager's own).
    ``webhook_port``: serve the registered webhooks over HTTPS there, on every
    replica (``None``: not at all; ``0``: any free port), as ``webhook_options``
    say (:class:`~kubereflector.runtime.webhooks.WebhookOptions`: certificates,
    limits, installing the configurations).
    ``sharding``: split the controllers' objects across the replicas (see the
    module documentation); not together with ``leader_election`` (a sharded
    replica's controllers run everywhere; its runnables all run from the start).

    ``informers``: how the informers list and watch
    (:class:`~kubereflector.runtime.InformerOptions`: the
    :class:`~kubereflector.SharedInformerFactory`'s arguments).
    ``read_your_writes_timeout``: how long the cache may take to see a write of
    :attr:`client` before reads say they are stale (seconds; ``None``: writes are
    not remembered; see :mod:`kubereflector.runtime.read_your_writes`).
    ``stale_watch_threshold``: ``/readyz`` fails while an informer has not heard
    from the API server for longer (seconds; ``None``: no such check; a healthy
    watch hears at least every ``ReflectorOptions.idle_timeout``, 90 s by default).

    Two ways to run, told apart by their types: ``await manager.run()`` (a
    coroutine: mypy flags a call that is not awaited) on your event loop, or
    ``manager.run_sync()`` (blocks; the manager runs its event loop on a
    background thread) where no event loop runs. A manager runs once.

    Thread-safety: :meth:`stop` may be called from any thread and from signal
    handlers; :meth:`reconciler` before the start; cache reads (listers,
    informers) from anywhere.
    """

    def __init__(
        self,
        config_or_client: ClientConfig | Client,
        *,
        namespace: str | None = None,
        leader_election: LeaderElection | None = None,
        metrics_port: int | None = None,
        health_port: int | None = None,
        graceful_shutdown_timeout: float = 30.0,
        bind_address: str = "0.0.0.0",
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        webhook_port: int | None = None,
        webhook_options: WebhookOptions | None = None,
        sharding: Sharding | None = None,
        informers: InformerOptions | None = None,
        read_your_writes_timeout: float | None = 10.0,
        stale_watch_threshold: float | None = 300.0,
    ) -> None:
        if isinstance(config_or_client, ClientConfig):
            self._client = Client(config_or_client)
            self._owns_client = True
        elif isinstance(config_or_client, Client) or hasattr(config_or_client, "discovery"):
            self._client = config_or_client
            self._owns_client = False
        else:
            raise TypeError(
                f"Manager needs a ClientConfig or a Client, not {type(config_or_client).__name__}"
            )
        if leader_election is not None and not isinstance(leader_election, LeaderElection):
            raise TypeError("leader_election must be a LeaderElection (or None)")
        if sharding is not None and not isinstance(sharding, Sharding):
            raise TypeError("sharding must be a Sharding (or None)")
        if sharding is not None and leader_election is not None:
            raise ValueError(
                "sharding and leader_election exclude each other: a sharded manager's "
                "controllers run on every replica, each on its own shards"
            )
        for label, port in (
            ("metrics_port", metrics_port),
            ("health_port", health_port),
            ("webhook_port", webhook_port),
        ):
            if port is not None and (
                isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535
            ):
                raise ValueError(f"{label} must be a port number (0..65535) or None, not {port!r}")
        if graceful_shutdown_timeout < 0:
            raise ValueError(
                f"graceful_shutdown_timeout must be >= 0 (got {graceful_shutdown_timeout})"
            )
        self._namespace = namespace or None
        self._leader_election = leader_election
        self._metrics_port = metrics_port
        self._health_port = health_port
        self._graceful_timeout = float(graceful_shutdown_timeout)
        self._bind_address = bind_address
        self._clock: Clock = clock if clock is not None else RealClock()
        self.metrics = metrics if metrics is not None else Metrics()
        """The manager's :class:`~kubereflector.metrics.Metrics` (served at ``/metrics``)."""
        if getattr(self._client, "request_metrics", False) is None:
            self._client.request_metrics = self.metrics.rest_client()
        self._sharded: ShardedRuntime | None = None
        if sharding is not None:
            from .sharding._runtime import ShardedRuntime

            self._sharded = ShardedRuntime(
                sharding,
                self._client,
                namespace=sharding.namespace or self._namespace or _pod_namespace() or "default",
                clock=self._clock,
                metrics=self.metrics,
            )
        self._factory = SharedInformerFactory(
            self._client,
            namespace=self._namespace,
            wrap_lister_watcher=self._sharded.wrap if self._sharded is not None else None,
            **_checked_informers(informers).as_kwargs(),
        )
        self.metrics.add_informers(self._factory.informers)
        self._specs: list[Spec] = []
        self._runnables: list[tuple[Runnable, bool]] = []
        self._healthz: dict[str, Callable[[], bool]] = {"ping": lambda: True}
        self._readyz: dict[str, Callable[[], bool]] = {"informers": self._informers_synced}
        if self._sharded is not None:
            self._readyz["sharding"] = self._sharded.coordinator.ready
        self._init_cache_entries(read_your_writes_timeout, stale_watch_threshold)
        self._lock = threading.Lock()
        self._state = _State.NEW
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested = False
        self._stop_event: asyncio.Event | None = None
        self._servers: list[MetricsServer] = []
        self._elector: LeaderElector | None = None
        self._controllers: list[Controller] = []
        self._leader_runnables: Runnables | None = None
        self._leading = False
        self._controller_runs: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None
        self._finished: asyncio.Event | None = None
        # Made here, not when run() starts: a wait_elected() awaited right after
        # create_task(manager.run()) may run first (Python 3.12+ wait_for awaits
        # the coroutine in place, 3.10 and 3.11 wrapped it in a task that ran
        # second). asyncio.Event binds to a loop only when first waited on.
        self._elected = asyncio.Event()
        self._loop_handle: LoopThread | None = None
        self._init_webhooks(webhook_port, webhook_options, host=bind_address)

    # -- what the manager holds -------------------------------------------------------

    @property
    def client(self) -> Client:
        """The async Client (use it on the manager's event loop)."""
        return self._client

    @property
    def sync_client(self) -> SyncClient:
        """A :class:`~kubereflector.client.SyncClient` on the manager's Client and
        event loop: blocking writes for plain-function reconcilers (on their worker
        threads) and other threads, while the manager runs. Each call gives a new,
        cheap one; closing it closes nothing. Its calls raise ``RuntimeError`` on
        the manager's own loop thread (use :attr:`client` in coroutines there);
        this raises :class:`ManagerError` before the manager is entered or run."""
        from ..client.sync import SyncClient

        handle = self._loop_handle
        if handle is None:
            raise ManagerError("the manager has no event loop yet: use sync_client while it runs")
        return SyncClient._sharing(self._client, handle)

    @property
    def factory(self) -> SharedInformerFactory:
        """The shared informer factory whose caches the controllers read."""
        return self._factory

    @property
    def namespace(self) -> str | None:
        """The one namespace the caches watch, or ``None`` for every namespace."""
        return self._namespace

    @property
    def elector(self) -> LeaderElector | None:
        """The leader elector while :meth:`run` campaigns (``None`` without leader election)."""
        return self._elector

    @property
    def sharding(self) -> ShardCoordinator | None:
        """This replica's :class:`~kubereflector.runtime.sharding.ShardCoordinator`
        (``None`` without sharding): what it sees and holds (``status()``)."""
        return self._sharded.coordinator if self._sharded is not None else None

    @property
    def controllers(self) -> list[Controller]:
        """The controllers running now (empty while not leading)."""
        return list(self._controllers)

    def is_leader(self) -> bool:
        """Whether the controllers run now (always, once started, without leader election)."""
        return self._leading

    async def wait_elected(self) -> None:
        """Return once this manager leads and its controllers run (at once after the
        start without leader election); controller-runtime's ``Elected()``. Await
        it on the manager's event loop; awaited before :meth:`run` has begun (in a
        task just created), it waits for it."""
        await self._elected.wait()

    @overload
    def informer_for(self, resource: type[ModelT]) -> SharedIndexInformer[ModelT]: ...

    @overload
    def informer_for(self, resource: str | ResourceInfo) -> SharedIndexInformer[KubeObject]: ...

    def informer_for(self, resource: str | ResourceInfo | type[ModelT]) -> SharedIndexInformer[Any]:
        """The shared informer of ``resource``: a ``SharedIndexInformer[Pod]`` for
        the model ``Pod``, of :data:`~kubereflector.KubeObject` for a name or a
        ResourceInfo (see :meth:`SharedInformerFactory.informer_for
        <kubereflector.SharedInformerFactory.informer_for>`, which raises the same)."""
        return self._factory.informer_for(resource)

    @property
    def metrics_url(self) -> str | None:
        """``http://host:port/metrics`` once served (``None`` otherwise)."""
        return self._url("/metrics")

    @property
    def health_url(self) -> str | None:
        """``http://host:port`` of ``/healthz`` and ``/readyz`` once served."""
        url = self._url("/healthz")
        return None if url is None else url.removesuffix("/healthz")

    def _url(self, path: str) -> str | None:
        for server in self._servers:
            if path in server.paths():
                with contextlib.suppress(RuntimeError):
                    return server.url + path
        return None

    def add_healthz_check(self, name: str, check: Callable[[], bool]) -> None:
        """Add a ``/healthz`` check (a quick plain function: ``True`` when healthy)."""
        self._add_check(self._healthz, name, check)

    def add_readyz_check(self, name: str, check: Callable[[], bool]) -> None:
        """Add a ``/readyz`` check (a quick plain function: ``True`` when ready)."""
        self._add_check(self._readyz, name, check)

    def _add_check(self, checks: dict[str, Callable[[], bool]], name: str, check: Any) -> None:
        if not callable(check):
            raise TypeError(f"check {name!r} must be callable")
        if name in checks:
            raise ValueError(f"a check named {name!r} exists already")
        self._check_new("checks")
        checks[name] = check

    def _informers_synced(self) -> bool:
        informers = self._factory.informers().values()
        return self._state is _State.RUNNING and all(i.has_synced() for i in informers)

    def _check_new(self, what: str) -> None:
        if self._state in (_State.RUNNING, _State.STOPPED):
            raise ManagerError(f"add {what} before the manager runs")

    # -- registering reconcilers --------------------------------------------------------

    @overload
    def reconciler(
        self,
        for_: str | type[KubeObject],
        *,
        owns: Iterable[str | type[KubeObject]] = (),
        watches: Iterable[tuple[str | type[KubeObject], Mapper]] = (),
        predicates: Sequence[Predicate] = (),
        options: ControllerOptions | None = None,
        name: str | None = None,
        rbac: Iterable[Permission] = (),
        reconcile: None = None,
    ) -> Callable[[F], F]: ...

    @overload
    def reconciler(
        self,
        for_: str | type[KubeObject],
        *,
        owns: Iterable[str | type[KubeObject]] = (),
        watches: Iterable[tuple[str | type[KubeObject], Mapper]] = (),
        predicates: Sequence[Predicate] = (),
        options: ControllerOptions | None = None,
        name: str | None = None,
        rbac: Iterable[Permission] = (),
        reconcile: F,
    ) -> F: ...

    def reconciler(
        self,
        for_: str | type[KubeObject],
        *,
        owns: Iterable[str | type[KubeObject]] = (),
        watches: Iterable[tuple[str | type[KubeObject], Mapper]] = (),
        predicates: Sequence[Predicate] = (),
        options: ControllerOptions | None = None,
        name: str | None = None,
        rbac: Iterable[Permission] = (),
        reconcile: F | None = None,
    ) -> Callable[[F], F] | F:
        """Register a reconciler of ``for_`` (a resource name discovery resolves:
        ``"configmaps"``, ``"deploy"``, ``"widgets.example.com"``; or a model class:
        ``ConfigMap``, see :meth:`informer_for`).

        As a decorator (``@manager.reconciler("configmaps")``) or a plain call
        (``manager.reconciler("configmaps", reconcile=fn)``); either way the
        function is returned unchanged. ``owns``: resources whose objects have a
        ``for_`` object as controller owner; ``watches``: ``(resource, mapper)``
        pairs; ``predicates``: filters on ``for_``'s events (all must pass);
        ``options``: :class:`~kubereflector.runtime.ControllerOptions` (workers,
        rate limiter); ``name``: see :class:`~kubereflector.runtime.Controller`
        (the default name is ``for_`` as written, or a model's qualified resource
        name: ``deployments.apps``). ``owns`` and ``watches`` take names and models
        alike. ``rbac``: what the reconciler does beyond reading ``for_`` and
        ``watches`` and writing ``owns``, as :class:`~kubereflector.runtime.Permission`
        values (its status, its finalizers, the secrets it reads: see
        :meth:`describe`). Raises :class:`ManagerError` once the manager runs,
        ``TypeError``/``ValueError`` for arguments of the wrong shape,
        ``LookupError`` naming a class that is not a registered model, and
        ``ValueError`` for a name already registered. Unknown resource names
        are reported by :meth:`run`.
        """
        if not is_resource(for_):
            raise TypeError(f"for_ is a resource name or a model, not {for_!r}")
        owns_t = tuple(owns) if not isinstance(owns, str) else (owns,)
        for owned in owns_t:
            if not is_resource(owned):
                raise TypeError(f"owns takes resource names or models, not {owned!r}")
        watches_t: list[tuple[str | type[KubeObject], Mapper]] = []
        for watch in watches:
            if (
                not isinstance(watch, tuple)
                or len(watch) != 2
                or not is_resource(watch[0])
                or not callable(watch[1])
            ):
                raise TypeError(
                    f"watches takes (resource name or model, mapper) pairs, not {watch!r}"
                )
            watches_t.append(watch)
        for p in predicates:
            if not isinstance(p, Predicate):
                raise TypeError(f"predicates are Predicates, not {type(p).__name__}")
        options = _checked_options(options)
        controller_name = name or (
            for_ if isinstance(for_, str) else model_info(for_).qualified_name
        )
        declared = tuple(rbac)
        for permission in declared:
            if not isinstance(permission, Permission):
                raise TypeError(f"rbac takes Permissions, not {type(permission).__name__}")

        def register(fn: F) -> F:
            if not callable(fn):
                raise TypeError(f"a reconciler must be callable, not {type(fn).__name__}")
            with self._lock:
                self._check_new("reconcilers")
                if any(s.name == controller_name for s in self._specs):
                    raise ValueError(
                        f"a reconciler named {controller_name!r} exists already: "
                        "give this one another name="
                    )
                self._specs.append(
                    Spec(
                        fn,
                        for_,
                        owns_t,
                        tuple(watches_t),
                        tuple(predicates),
                        options,
                        controller_name,
                        declared,
                    )
                )
            return fn

        if reconcile is not None:
            return register(reconcile)
        return register

    def describe(self) -> ManagerDescription:
        """What this manager needs to run in a cluster, from its registrations: the
        RBAC rules (see :mod:`kubereflector.runtime.permissions`), the custom resources
        declared in Python that it names by their models, the ports it serves and the
        webhooks it serves; what ``kubereflector manifests`` prints. Needs no server;
        raises ``LookupError`` for a resource name that cannot be resolved without one."""
        with self._lock:
            specs = list(self._specs)
        election = self._leader_election
        lease = None
        if election is not None:
            lease = (election.namespace or self._namespace, election.name)
        reconcilers = [
            _Reconciles(s.for_, s.owns, tuple(name for name, _ in s.watches), s.rbac) for s in specs
        ]
        sharding = None
        if self._sharded is not None:
            sharding = (self._sharded.coordinator.options.namespace or self._namespace,)
        server = self._webhook_server
        return ManagerDescription(
            namespace=self._namespace,
            permissions=_permissions_for(
                reconcilers, namespace=self._namespace, lease=lease, sharding=sharding
            ),
            lease=lease,
            metrics_port=self._metrics_port,
            health_port=self._health_port,
            graceful_shutdown_timeout=self._graceful_timeout,
            custom_resources=_custom_resources(
                [
                    *(r for s in specs for r in (s.for_, *s.owns, *(w for w, _ in s.watches))),
                    *(w.model for w in self._webhooks.admission),
                    *(c.hub for c in self._webhooks.conversions),
                ]
            ),
            webhook_port=None if server is None else server.port,
            webhook_cert_dir=None if server is None else server.options.cert_dir,
            admission_webhooks=tuple(self._webhooks.admission),
            conversions=tuple(self._webhooks.conversions),
        )

    def add(self, runnable: Runnable, *, leader_only: bool = False) -> None:
        """Run ``runnable`` (see :class:`~kubereflector.runtime.Runnable`) with the
        manager: from the start on every replica, or with ``leader_only`` only
        while this replica leads (beside the controllers; without leader election,
        from the start). Stopped gracefully with the controllers. Raises
        :class:`ManagerError` once the manager runs and ``TypeError`` for an object
        without an async ``run(stopping)``."""
        if not isinstance(runnable, Runnable):
            raise TypeError(f"a runnable has an async run(stopping), not {type(runnable).__name__}")
        with self._lock:
            self._check_new("runnables")
            self._runnables.append((runnable, leader_only))

    # -- async use ----------------------------------------------------------------------

    async def __aenter__(self) -> Manager:
        """Bind the manager to the running loop and load discovery (so
        :meth:`lister_for` resolves names at once); leaving the block stops the
        manager if it runs and closes what it opened."""
        await self._enter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._close()

    async def _enter(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._state is not _State.NEW:
                raise ManagerError(f"this manager has been {self._state.value} already")
            self._state = _State.ENTERED
            self._loop = loop
            self._loop_handle = LoopThread.adopt(loop, threading.current_thread())
            self._stop_event = asyncio.Event()
            self._finished = asyncio.Event()
            if self._stop_requested:
                self._stop_event.set()
        self._attach_cache_entries(loop)
        try:
            await self._factory.__aenter__()
        except BaseException:
            await self._close()
            raise

    async def _close(self) -> None:
        self.stop()
        if self._state is _State.RUNNING and self._finished is not None:
            await self._finished.wait()  # run() in another task: let it finish first
        self._state = _State.STOPPED
        try:
            await self._detach_cache_entries(self._graceful_timeout)
            await self._factory.shutdown()
        finally:
            if self._owns_client:
                await self._client.close()

    async def run(self, *, handle_signals: bool = True) -> None:
        """Run until stopped (see the module documentation for the steps).

        ``handle_signals``: on the main thread, SIGTERM and SIGINT trigger a
        graceful :meth:`stop` while this runs. Returns after a graceful stop.
        Raises :class:`LeaderElectionLostError` when the Lease was lost (with
        ``on_lost="exit"``), :class:`~kubereflector.client.UnknownResourceError`
        for a resource name discovery does not know, ``OSError`` when a port
        cannot be bound, and :class:`ManagerError` when run twice.
        """
        entered_here = self._state is _State.NEW
        if entered_here:
            await self._enter()
        elif self._state is not _State.ENTERED:
            raise ManagerError(f"this manager has {self._state.value} already: a manager runs once")
        elif self._loop is not asyncio.get_running_loop():
            raise ManagerError("run the manager on the event loop it was entered on")
        self._state = _State.RUNNING
        signals = (
            LoopStopSignals(asyncio.get_running_loop(), self._on_signal)
            if handle_signals
            else contextlib.nullcontext()
        )
        try:
            with signals:
                await self._run()
        finally:
            self._state = _State.STOPPED
            assert self._finished is not None
            self._finished.set()
            if entered_here:
                await self._close()

    async def _run(self) -> None:
        assert self._stop_event is not None
        work: asyncio.Task[None] | None = None
        await self._start_servers()
        everywhere = self._runnables_of(
            [r for r, leader_only in self._runnables if not leader_only]
        )
        try:
            plans = [await self._plan(spec) for spec in self._specs]
            if self._sharded is not None:
                # Join first: the caches start with this replica's share.
                await self._sharded.coordinator.start()
                everywhere = self._runnables_of([self._sharded.coordinator, *everywhere.runnables])
            self._factory.start()
            everywhere.start()
            if self._leader_election is None:
                work = asyncio.create_task(self._lead(plans), name="kubereflector controllers")
            else:
                work = asyncio.create_task(
                    self._campaign(plans, self._leader_election), name="kubereflector election"
                )
            stopping = asyncio.create_task(self._stop_event.wait())
            try:
                await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
            if not work.done():
                logger.info("shutting down gracefully (at most %gs)", self._graceful_timeout)
                await self._stop_controllers()
                work.cancel()
            await asyncio.wait({work})
            await everywhere.stop(self._graceful_timeout)
            if self._failure is not None:
                raise self._failure
            if not work.cancelled():
                work.result()
        finally:
            # Cancelled (not stopped): everything ends at once; a Lease is released
            # only if release_on_cancel says so.
            if work is not None and not work.done():
                work.cancel()
                await asyncio.wait({work})
            await everywhere.cancel()
            for server in self._servers:
                await server.stop()

    def _on_signal(self, sig: signal.Signals) -> None:
        logger.info("received %s: shutting down", sig.name)
        self.stop()

    def stop(self) -> None:
        """Ask the manager to shut down gracefully (see the module documentation);
        :meth:`run` returns once done. Idempotent; any thread."""
        with self._lock:
            self._stop_requested = True
            loop, event = self._loop, self._stop_event
        if loop is not None and event is not None:
            # Nothing to stop if that loop has closed.
            call_in_loop(loop, lambda: self._stop_now(event))

    def _stop_now(self, event: asyncio.Event) -> None:
        """On the manager's loop: the stop takes effect at once, before run() gets
        to it: no controller hands out another request (those in flight go on)."""
        event.set()
        for controller in self._controllers:
            controller._stop_handing_out()

    # -- sync use -----------------------------------------------------------------------

    def run_sync(self, *, handle_signals: bool = True) -> None:
        """Run on a background event-loop thread and block until stopped: the plain
        threads twin of :meth:`run` (same steps, same errors). Plain-function
        reconcilers run on worker threads; coroutine ones on that loop.

        ``handle_signals``: when called on the main thread, SIGTERM and SIGINT
        trigger a graceful :meth:`stop`. Raises ``RuntimeError`` where an event
        loop runs in this thread (``await manager.run()`` there).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "run_sync() blocks: an event loop runs in this thread, await manager.run() instead"
            )
        thread = LoopThread("kubereflector-manager")
        with ThreadStopSignals(self._on_signal) if handle_signals else contextlib.nullcontext():
            thread.start()
            try:
                thread.run(self.run(handle_signals=False))
            finally:
                thread.stop()

    # -- the parts --------------------------------------------------------------------

    async def _start_servers(self) -> None:
        wanted: dict[int, dict[str, Any]] = {}
        if self._metrics_port is not None:
            wanted.setdefault(self._metrics_port, {})["metrics"] = self.metrics
        if self._health_port is not None:
            entry = wanted.setdefault(self._health_port, {})
            if self._health_port == 0 and "metrics" in entry:
                entry = wanted.setdefault(-1, {})  # two ports, both chosen by the system
            entry["healthz"] = self._healthz
            entry["readyz"] = self._readyz
        for port, parts in wanted.items():
            server = MetricsServer(host=self._bind_address, port=max(port, 0), **parts)
            await server.start()
            self._servers.append(server)

    async def _plan(self, spec: Spec) -> Callable[[], Controller]:
        """Resolve a spec's names and make its informers; a maker of its Controller
        (one per leadership term)."""
        info, informer = await self._informer_of(spec.for_)
        owned_pairs = [await self._informer_of(resource) for resource in spec.owns]
        owned = [owned_informer for _, owned_informer in owned_pairs]
        watched_pairs = [
            (await self._informer_of(resource), mapper) for resource, mapper in spec.watches
        ]
        watched = [(pair[1], mapper) for pair, mapper in watched_pairs]
        sharded = self._sharded
        if sharded is not None:
            sharded.plan_uses((info, informer), owned_pairs, [pair for pair, _ in watched_pairs])

        def make() -> Controller:
            gate = sharded.gate_for(informer) if sharded is not None else None
            controller = Controller(
                spec.reconcile,
                for_=(informer, info),
                owns=owned,
                watches=watched,
                predicates=spec.predicates,
                options=spec.options,
                name=spec.name,
                clock=self._clock,
                metrics=self.metrics,
                gate=gate,
                own_writes=self._own_writes,
            )
            if sharded is not None and gate is not None:
                sharded.attach(controller, gate)
            return controller

        return make

    async def _informer_of(
        self, resource: str | type[KubeObject]
    ) -> tuple[ResourceInfo, SharedIndexInformer[Any]]:
        """The resource (a name resolved through discovery, or a model) and its
        shared informer."""
        if isinstance(resource, str):
            info = await self._factory.resolve(resource)
            return info, self._factory.informer_for(info)
        return model_info(resource), self._factory.informer_for(resource)

    async def _lead(self, plans: list[Callable[[], Controller]]) -> None:
        """Run one Controller per spec until they stop or this is cancelled (when
        leadership ends). A controller that fails stops the manager."""
        if self._stop_requested:
            return  # elected while stopping: reconcile nothing
        controllers = [make() for make in plans]
        self._controllers = controllers
        self._leading = True
        self._elected.set()
        tasks = {asyncio.create_task(c.run(), name=f"controller {c.name}") for c in controllers}
        self._controller_runs = tasks
        leader_only = self._runnables_of([r for r, leader_only in self._runnables if leader_only])
        self._leader_runnables = leader_only
        try:
            pending = tasks | leader_only.start()  # (a runnable's failure is its own to report)
            if not pending:  # nothing to run while leading (webhooks only): lead until stopped
                await asyncio.get_running_loop().create_future()
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done & tasks:
                    err = None if task.cancelled() else task.exception()
                    if err is not None:
                        logger.error("%s failed: %s", task.get_name(), err, exc_info=err)
                        self._failure = self._failure or err
                        self.stop()
        finally:
            self._leading = False
            self._elected.clear()
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks)
            await leader_only.cancel()
            self._controllers = []
            self._controller_runs = set()
            self._leader_runnables = None

    async def _stop_controllers(self) -> None:
        """The graceful part of a stop, while the Lease is still held (and renewed):
        the reconciles in flight end (coroutines are cancelled after the graceful
        timeout), then the controllers' runs, which end only once their plain-function
        reconciles, which cannot be cancelled, have returned. Only then may the Lease
        be given up: another replica would reconcile the same objects at once."""
        controllers = list(self._controllers)
        runs = set(self._controller_runs)
        leader_only = self._leader_runnables
        self._leading = False  # no controller hands out work any more
        waits = [c.stop(self._graceful_timeout) for c in controllers]
        if leader_only is not None:
            waits.append(leader_only.stop(self._graceful_timeout))
        if waits:
            results = await asyncio.gather(*waits)
            if not all(results):
                logger.warning("some work did not end within the graceful shutdown timeout")
        if runs and not all(run.done() for run in runs):
            logger.info(
                "waiting for plain-function reconciles still running (they cannot be cancelled)"
            )
            await asyncio.wait(runs)

    async def _campaign(
        self, plans: list[Callable[[], Controller]], options: LeaderElection
    ) -> None:
        namespace = options.namespace or self._namespace or _pod_namespace() or "default"

        async def lead() -> None:
            await self._lead(plans)

        elector, lock = _new_elector(
            self._client, options, namespace, lead, clock=self._clock, metrics=self.metrics
        )
        self._elector = elector
        self._healthz["leader-election"] = lambda: elector.check(LEADER_HEALTH_TOLERANCE)
        while True:
            await elector.run()
            if self._stop_requested:
                return
            if options.on_lost == "exit":
                holder = elector.get_leader()
                why = (
                    f"held by {holder}, not {lock.identity}"
                    if holder and holder != lock.identity
                    else f"not renewed by {lock.identity} within {options.renew_deadline:g}s"
                )
                raise LeaderElectionLostError(
                    f"leader election lost: lease {lock.describe()} {why}"
                )
            logger.warning("lost lease %s; campaigning again", lock.describe())

    def _runnables_of(self, runnables: list[Runnable]) -> Runnables:
        return Runnables(runnables, self._clock, self._runnable_failed)

    def _runnable_failed(self, err: BaseException) -> None:
        self._failure = self._failure or err
        self.stop()

    def __repr__(self) -> str:
        names = ", ".join(s.name for s in self._specs)
        return f"<Manager {self._state.value} reconcilers=[{names}] leading={self._leading}>"
