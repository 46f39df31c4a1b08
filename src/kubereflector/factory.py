"""SharedInformerFactory and SyncSharedInformerFactory: one shared informer per
resource, for a whole program.

client-go's ``SharedInformerFactory``, over the HTTP client. Ask a factory for
the informer of a resource by any name kubectl accepts (``"pods"``, ``"po"``,
``"Pod"``, ``"deployments.apps"``, a CRD's plural) or by its model (``Pod``,
from :mod:`kubereflector.models`: a ``SharedIndexInformer[Pod]``, no discovery
needed) and every caller gets the same
:class:`~kubereflector.SharedIndexInformer`: one list-and-watch, one cache, many
handlers. ``start()`` runs the informers created so far;
``wait_for_cache_sync()`` waits for their first lists; ``shutdown()`` stops
them all and closes their streams.

Two classes, one asyncio core; which one you construct says how you call it,
so a type checker catches a missing ``await``:

:class:`SharedInformerFactory`, for asyncio programs: informers run as tasks
on the event loop that enters it (``async with``) or starts it;
``wait_for_cache_sync()`` and ``shutdown()`` are coroutines::

    async with SharedInformerFactory(load_config()) as factory:
        pods = factory.informer_for("pods")
        pods.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add))
        factory.start()
        await factory.wait_for_cache_sync()
        print(len(factory.lister_for("pods").list()))

:class:`SyncSharedInformerFactory`, for plain threads: the factory runs its
own event loop on a background thread and everything runs there;
``wait_for_cache_sync()`` and ``shutdown()`` block; plain-function handlers run
on worker threads, in order per registration. No ``async`` anywhere in the
caller's code::

    with SyncSharedInformerFactory(load_config()) as factory:
        pods = factory.informer_for("pods")
        pods.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add))
        factory.start()
        factory.wait_for_cache_sync(timeout=60)
        print(len(factory.lister_for("pods").list()))

For writes, :meth:`SyncSharedInformerFactory.sync_client` hands out a blocking
:class:`~kubereflector.client.SyncClient` on the factory's own loop and connection
pool (``factory.sync_client().resource("pods", namespace="default").delete("web-1")``);
with :class:`SharedInformerFactory`, use ``factory.client.resource(...)`` on the
factory's loop.

With either, the caches (``informer.indexer``, listers) are read
synchronously from any thread, and the informers' own methods
(``add_event_handler``, ``has_synced``, ...) are thread-safe.
``examples/factory_async.py`` and ``examples/factory_sync.py`` are complete
programs, one for each.

This is the one module that joins :mod:`kubereflector.cache` and
:mod:`kubereflector.client`. Importing it loads aiohttp, so the package loads it
on first use of one of its names (``kubereflector.SharedInformerFactory``), not
at ``import kubereflector``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from typing_extensions import Self

from ._aio.loop_thread import LoopThread
from ._aio.tasks import running_loop
from .cache._synced import SyncSignal
from .cache.compact import ObjectMode, _check_object_mode
from .cache.delta_fifo import TransformFunc
from .cache.keys import KubeObject, ModelT
from .cache.listers import Lister
from .cache.listwatch import ListerWatcher, ListOptions, ListResult, WatchStream
from .cache.reflector import ReflectorOptions, checked_options
from .cache.shared_informer import Registration, SharedIndexInformer, wait_for_cache_sync
from .cache.store import NAMESPACE_INDEX, meta_namespace_index_func
from .client._models import check_resource, model_info
from .client.config import ClientConfig
from .client.discovery import ResourceInfo, UnknownResourceError, _Index
from .client.listwatch import ResourceListWatch
from .client.paths import validate_namespace
from .client.rest import Client
from .client.sync import SyncClient

__all__ = [
    "FactoryShutdownError",
    "SharedInformerFactory",
    "SyncSharedInformerFactory",
    "TweakListOptionsFunc",
    "WrapListerWatcherFunc",
]

logger = logging.getLogger("kubereflector.factory")

T = TypeVar("T")

TweakListOptionsFunc = Callable[[ListOptions], ListOptions]
"""Rewrites the ``ListOptions`` of every list and watch of a factory's informers
(e.g. to add a label selector); returns new options (``dataclasses.replace``).
Runs on the event loop: it must be quick and must not block."""

WrapListerWatcherFunc = Callable[[ResourceInfo, ListerWatcher], ListerWatcher]
"""Wraps the ListerWatcher of each informer a factory makes (its resource, its
ListerWatcher; e.g. in a :class:`~kubereflector.ShardedListWatch`). Called once per
informer, when it is made, on the thread that asked for it."""


class FactoryShutdownError(RuntimeError):
    """The factory has been shut down: it starts nothing and makes no new informers."""


@dataclass(eq=False)
class _Entry:
    """One resource's informer and how far it got."""

    info: ResourceInfo
    informer: SharedIndexInformer[Any]
    """Of KubeObject, or of the model it was first asked for by: the same objects."""
    started: bool = False
    """``start()`` has claimed it (its task exists, or is being created)."""
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class _TweakedListerWatcher:
    """A ListerWatcher whose every list and watch options pass through ``tweak``."""

    __slots__ = ("_inner", "_tweak")

    def __init__(self, inner: ListerWatcher, tweak: TweakListOptionsFunc) -> None:
        self._inner = inner
        self._tweak = tweak

    def _apply(self, options: ListOptions) -> ListOptions:
        tweaked = self._tweak(options)
        if not isinstance(tweaked, ListOptions):
            raise TypeError(
                f"tweak_list_options must return ListOptions, not {type(tweaked).__name__}"
            )
        return tweaked

    async def list(self, options: ListOptions) -> ListResult:
        return await self._inner.list(self._apply(options))

    def watch(self, options: ListOptions) -> WatchStream:
        return self._inner.watch(self._apply(options))

    @property
    def url(self) -> str | None:
        """The inner ListerWatcher's ``url``, for logs (see ``Reflector.source``)."""
        url = getattr(self._inner, "url", None)
        return url if isinstance(url, str) else None

    def __repr__(self) -> str:
        return f"{self._inner!r} (tweaked)"


class _FactoryBase:
    """What both factories share: the informers, name resolution, starting, waiting
    and shutting down on the factory's event loop. Which loop that is, and how the
    caller waits, is the subclass's: see :class:`SharedInformerFactory` and
    :class:`SyncSharedInformerFactory`."""

    def __init__(
        self,
        client_or_config: Client | ClientConfig,
        *,
        namespace: str | None = None,
        default_resync: float = 0,
        tweak_list_options: TweakListOptionsFunc | None = None,
        transform: TransformFunc | None = None,
        custom_resync: Mapping[str, float] | None = None,
        reflector_options: ReflectorOptions | None = None,
        custom_reflector_options: Mapping[str, ReflectorOptions] | None = None,
        object_mode: ObjectMode = "dict",
        wrap_lister_watcher: WrapListerWatcherFunc | None = None,
    ) -> None:

        if namespace:
            validate_namespace(namespace)  # fail here, not in every informer's first list
        if default_resync < 0:
            raise ValueError(f"default_resync must be >= 0 (got {default_resync})")
        custom = dict(custom_resync or {})
        for name, period in custom.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"custom_resync keys are resource names, not {name!r}")
            if period < 0:
                raise ValueError(f"custom_resync[{name!r}] must be >= 0 (got {period})")
        if reflector_options is None and object_mode == "compact-protobuf":
            # Protobuf comes with a list (the watch stays JSON): sync with one.
            reflector_options = ReflectorOptions(use_watch_list=False)
        options = checked_options(reflector_options, "reflector_options")
        custom_options = dict(custom_reflector_options or {})
        for name, value in custom_options.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"custom_reflector_options keys are resource names, not {name!r}")
            checked_options(value, f"custom_reflector_options[{name!r}]")
        if tweak_list_options is not None and not callable(tweak_list_options):
            raise TypeError("tweak_list_options must be callable")
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable")
        if wrap_lister_watcher is not None and not callable(wrap_lister_watcher):
            raise TypeError("wrap_lister_watcher must be callable")
        self._owns_client = isinstance(client_or_config, ClientConfig)
        if isinstance(client_or_config, ClientConfig):
            # Not bound to any loop yet: a Client binds to the loop it is first used on.
            self._client: Client = Client(client_or_config)
        elif isinstance(client_or_config, Client) or hasattr(client_or_config, "discovery"):
            self._client = client_or_config
        else:
            raise TypeError(
                f"{type(self).__name__} needs a Client or a ClientConfig, "
                f"not {type(client_or_config).__name__}"
            )
        self._namespace = namespace or None
        self._default_resync = float(default_resync)
        self._tweak = tweak_list_options
        self._wrap = wrap_lister_watcher
        self._transform = transform
        self._object_mode = _check_object_mode(object_mode)
        self._custom_resync = custom
        self._reflector_options = options
        self._custom_options = custom_options
        # name in custom_resync or custom_reflector_options -> (group, resource),
        # once discovery resolved it
        self._custom_keys: dict[str, tuple[str, str]] = {}
        self._lock = threading.RLock()
        self._entries: dict[tuple[str, str], _Entry] = {}
        # informer_for's answers by model class or name, each with the discovery index
        # it was resolved against: valid while that index is the factory's (reconcilers
        # ask on every reconcile; resolving scans discovery).
        self._answers: dict[str | type, tuple[_Index | None, SharedIndexInformer[Any]]] = {}
        # The loop the informers run on: bound on first use, then fixed.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._index: _Index | None = None
        self._closing = False  # shutdown has begun: nothing new starts
        self._shutdown_task: asyncio.Task[None] | None = None
        self._shutdown_started = False
        self._shutdown_done = threading.Event()
        self._closed_signal = SyncSignal()

    # -- properties -----------------------------------------------------------------------

    @property
    def client(self) -> Client:
        """The Client the informers use (use it only on the factory's loop)."""
        return self._client

    @property
    def namespace(self) -> str | None:
        """The namespace every informer is limited to (``None``: all)."""
        return self._namespace

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the informers run on (``None`` until the factory first
        needs one; then it never changes)."""
        return self._loop

    # -- what the subclasses decide ---------------------------------------------------------

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        """The factory's loop, binding it now if need be, for :meth:`start` and
        :meth:`resolve`. Raises :class:`FactoryShutdownError` once shut down."""
        raise NotImplementedError

    def _resolve_missing(self, name: str, index: _Index | None) -> ResourceInfo:
        """Resolve a name the loaded discovery data lacks, for :meth:`informer_for`."""
        raise NotImplementedError

    # -- informers ------------------------------------------------------------------------

    @overload
    def informer_for(self, resource: type[ModelT]) -> SharedIndexInformer[ModelT]: ...

    @overload
    def informer_for(self, resource: str | ResourceInfo) -> SharedIndexInformer[KubeObject]: ...

    def informer_for(self, resource: str | ResourceInfo | type[ModelT]) -> SharedIndexInformer[Any]:
        """The one shared informer of ``resource`` (made on first request, started
        by the next :meth:`start`).

        ``resource`` is a model class, a :class:`~kubereflector.client.ResourceInfo`
        or a name discovery resolves (``"pods"``, ``"po"``, ``"Pod"``,
        ``"deployments.apps"``, ``"apps/v1/deployments"``, a CRD's plural or short
        name). Informers are keyed by group and resource, so every name of one
        resource, and its model, give the same informer (the version of the first
        request is the one watched).

        A model (``Pod``, ``Deployment``: any class
        :func:`kubereflector.models.resource_of` knows, custom resources registered
        with :func:`kubereflector.models.register` among them) gives a
        ``SharedIndexInformer[Pod]``, whose cache, lister and handlers are typed
        ``Pod``, and needs no discovery: the model says its group, version, plural
        and scope. In compact mode its objects are read-only
        :class:`~kubereflector.CompactObject` s typed as the model, for reading: a
        write raises :class:`~kubereflector.ReadOnlyObjectError` at run time (copy with
        ``copy.deepcopy`` to change one). Raises ``LookupError`` naming a class
        that is not a registered model, and ``ValueError`` when the informer of its
        resource exists already for another version or scope, or discovery (when
        loaded) serves the resource in another scope than the model says. A name or
        a ResourceInfo gives a ``SharedIndexInformer[KubeObject]``.

        Names are resolved against the discovery data the factory loaded. Where
        that data lacks the name, :class:`SyncSharedInformerFactory` blocks while
        discovery is fetched on its loop thread; :class:`SharedInformerFactory`
        raises :class:`~kubereflector.client.UnknownResourceError` saying to
        ``await factory.resolve(name)`` (which refreshes discovery) first. Raises
        :class:`FactoryShutdownError` for a resource without an informer once the
        factory is shut down, and ``TypeError`` for anything but a name, a
        ResourceInfo or a class. Thread-safe.
        """

        if isinstance(resource, (str, type)):
            answer = self._answers.get(resource)
            if answer is not None and answer[0] is self._index:
                return answer[1]
        check_resource(resource)
        model = resource if isinstance(resource, type) else None
        if isinstance(resource, ResourceInfo):
            info = resource
        elif isinstance(resource, str):
            info = self._resolve_now(resource)
        else:
            info = model_info(resource)
            self._check_served_as(resource, info)
        key = (info.group, info.resource)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._check_open()
                entry = _Entry(info, self._new_informer(info))
                self._entries[key] = entry
            elif model is not None:
                _check_same(model, info, entry.info)
            if not isinstance(resource, ResourceInfo):
                self._answers[resource] = (self._index, entry.informer)
            return entry.informer

    @overload
    def lister_for(self, resource: type[ModelT]) -> Lister[ModelT]: ...

    @overload
    def lister_for(self, resource: str | ResourceInfo) -> Lister[KubeObject]: ...

    def lister_for(self, resource: str | ResourceInfo | type[ModelT]) -> Lister[Any]:
        """The :class:`~kubereflector.Lister` of :meth:`informer_for` ``(resource)``:
        a ``Lister[Pod]`` for the model ``Pod`` (``get`` gives a ``Pod | None``), a
        ``Lister[KubeObject]`` for a name or a ResourceInfo. Raises as
        :meth:`informer_for`."""
        informer: SharedIndexInformer[Any] = self.informer_for(resource)
        return informer.lister

    def informers(self) -> dict[str, SharedIndexInformer[KubeObject]]:
        """Every informer made so far, by qualified resource name (``pods``,
        ``deployments.apps``), typed as holding :data:`~kubereflector.KubeObject` s
        (whatever model made them: the objects are the same)."""
        with self._lock:
            return {e.info.qualified_name: e.informer for e in self._entries.values()}

    async def resolve(self, name: str) -> ResourceInfo:
        """The resource ``name`` means, from discovery (fetched anew when the name is
        not in the cached data, so a CRD created since is found); the factory's
        discovery data is refreshed too, so :meth:`informer_for` accepts the name
        afterwards. Raises :class:`~kubereflector.client.UnknownResourceError`.

        Await it on any event loop; it runs on the factory's (an unbound
        :class:`SharedInformerFactory` binds to the caller's loop).
        """
        factory_loop = self._bind_loop()
        return await _on_loop(factory_loop, self._resolve_async(name))

    def _check_served_as(self, model: type, info: ResourceInfo) -> None:
        """``ValueError`` if the discovery data the factory loaded (if any: nothing
        is fetched) serves the model's group, version and resource in another scope."""
        with self._lock:
            index = self._index
        served = None if index is None else index.find(str(info))
        if served is not None and served.namespaced != info.namespaced:
            raise ValueError(
                f"{_model_name(model)} is registered as {_scope(info)}, but the server "
                f"serves {served} {_scope(served)}: fix its kubereflector.models.register"
            )

    def _resolve_now(self, name: str) -> ResourceInfo:
        """Resolve from the loaded discovery data, else as the subclass says."""
        with self._lock:
            index = self._index
        if index is not None:
            found = index.find(name)
            if found is not None:
                return found
        return self._resolve_missing(name, index)

    async def _resolve_async(self, name: str) -> ResourceInfo:
        """On the factory's loop: resolve ``name`` (and the custom resync names)."""
        await self._load_discovery()
        info = await self._client.discovery.resolve(name)
        self._set_index(await self._client.discovery.resources())
        return info

    async def _load_discovery(self) -> None:
        """On the factory's loop: fetch discovery (unless cached) and resolve the
        names of ``custom_resync`` and ``custom_reflector_options``."""
        discovery = self._client.discovery
        for name in {**self._custom_resync, **self._custom_options}:
            if name not in self._custom_keys:
                info = await discovery.resolve(name)
                with self._lock:
                    self._custom_keys[name] = (info.group, info.resource)
        self._set_index(await discovery.resources())

    def _set_index(self, resources: list[ResourceInfo]) -> None:

        index = _Index(resources)
        with self._lock:
            self._index = index

    def _new_informer(self, info: ResourceInfo) -> SharedIndexInformer[KubeObject]:

        lw: ListerWatcher = ResourceListWatch(
            self._client, info, namespace=self._namespace, object_mode=self._object_mode
        )
        if self._tweak is not None:
            lw = _TweakedListerWatcher(lw, self._tweak)
        if self._wrap is not None:
            lw = self._wrap(info, lw)
        informer = SharedIndexInformer(
            lw,
            expected_kind=info.kind or None,
            default_resync=float(self._custom_for(info, self._custom_resync, self._default_resync)),
            indexers={NAMESPACE_INDEX: meta_namespace_index_func},
            reflector_options=self._custom_for(info, self._custom_options, self._reflector_options),
            object_mode=self._object_mode,
        )
        if self._transform is not None:
            informer.set_transform(self._transform)
        return informer

    def _custom_for(self, info: ResourceInfo, custom: Mapping[str, T], default: T) -> T:
        """The value ``custom`` gives the resource ``info`` (by any of its names), or
        ``default``."""

        value = default
        for name, candidate in custom.items():
            key = self._custom_keys.get(name)
            if key is not None:
                matches = key == (info.group, info.resource)
            else:  # discovery not loaded yet: does the name denote this resource?
                matches = _Index([info]).find(name) is not None
            if matches:
                value = candidate
        return value

    # -- modes ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        """Lock held."""
        if self._closing:
            raise FactoryShutdownError(f"the {type(self).__name__} has been shut down")

    # -- starting ---------------------------------------------------------------------

    def start(self) -> None:
        """Start every informer made since the last call (idempotent; informers
        made later start on the next call). Returns once their tasks exist.

        Raises :class:`FactoryShutdownError` after :meth:`shutdown`, and
        ``RuntimeError`` when a :class:`SharedInformerFactory` has no event loop
        to run on (see there). Thread-safe.
        """
        factory_loop = self._bind_loop()
        with self._lock:
            pending = [e for e in self._entries.values() if not e.started]
            for entry in pending:
                entry.started = True
        if not pending:
            return
        if running_loop() is factory_loop:
            self._spawn(pending)
        elif factory_loop.is_running():
            _call_in_loop(factory_loop, lambda: self._spawn(pending))
        else:
            raise RuntimeError(f"the event loop this {type(self).__name__} runs on has stopped")

    def _spawn(self, entries: list[_Entry]) -> None:
        """On the factory's loop: one task per informer."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closing:
                return
            for entry in entries:
                entry.task = loop.create_task(
                    self._run_informer(entry), name=f"kubereflector informer {entry.info}"
                )

    @staticmethod
    async def _run_informer(entry: _Entry) -> None:
        try:
            await entry.informer.run()
        except Exception:
            logger.exception("the informer of %s failed", entry.info.qualified_name)
        else:
            logger.debug("the informer of %s ended", entry.info.qualified_name)

    # -- waiting ----------------------------------------------------------------------

    def _registrations(
        self, handlers: Iterable[Registration[Any]]
    ) -> tuple[Registration[Any], ...]:
        """``handlers`` checked: registrations of this factory's informers."""
        regs = tuple(handlers)
        for reg in regs:
            if not isinstance(reg, Registration):
                raise TypeError(f"handlers are Registrations, not {type(reg).__name__}")
            if not any(reg.informer is e.informer for e in self._snapshot()):
                raise ValueError(f"{reg!r} is not a registration of this factory's informers")
        return regs

    def _snapshot(self) -> list[_Entry]:
        with self._lock:
            return list(self._entries.values())

    def _groups(
        self, regs: tuple[Registration[Any], ...]
    ) -> dict[str, tuple[SharedIndexInformer[Any], list[Registration[Any]]]]:
        """What to wait for: each started informer with the given registrations of it."""
        groups: dict[str, tuple[SharedIndexInformer[Any], list[Registration[Any]]]] = {}
        for entry in self._snapshot():
            if entry.started:
                mine = [r for r in regs if r.informer is entry.informer]
                groups[entry.info.qualified_name] = (entry.informer, mine)
        return groups

    @staticmethod
    def _states(
        groups: dict[str, tuple[SharedIndexInformer[Any], list[Registration[Any]]]],
    ) -> dict[str, bool]:
        return {
            name: informer.has_synced() and all(r.has_synced() for r in regs)
            for name, (informer, regs) in groups.items()
        }

    async def _wait_async(
        self, timeout: float | None, regs: tuple[Registration[Any], ...]
    ) -> dict[str, bool]:
        groups = self._groups(regs)
        if not groups:
            return {}
        loop = asyncio.get_running_loop()
        closed: asyncio.Future[None] = loop.create_future()
        self._closed_signal.subscribe(closed)
        waits = {
            name: asyncio.ensure_future(wait_for_cache_sync(informer, *mine, timeout=timeout))
            for name, (informer, mine) in groups.items()
        }
        everything: asyncio.Future[Any] = asyncio.gather(*waits.values())
        pending: set[asyncio.Future[Any]] = {everything, closed}
        try:
            if not self._closing:
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            states = self._states(groups)
            for name, wait in waits.items():
                if wait.done() and not wait.cancelled():
                    states[name] = wait.result()
            return states
        finally:
            self._closed_signal.unsubscribe(closed)
            closed.cancel()
            everything.cancel()
            for wait in waits.values():
                wait.cancel()
            await asyncio.wait({everything, *waits.values()})
            if not everything.cancelled():
                everything.exception()  # retrieved: never "exception was never retrieved"

    # -- shutting down ----------------------------------------------------------------

    async def _shutdown_once(self) -> None:
        """On the factory's loop (or, never bound, the caller's): shut down once;
        concurrent callers wait for the same shutdown."""
        with self._lock:
            task = self._shutdown_task
            if task is None:
                task = self._shutdown_task = asyncio.ensure_future(self._shutdown_core())
        await asyncio.shield(task)

    async def _shutdown_core(self) -> None:
        with self._lock:
            self._closing = True
            self._shutdown_started = True
            entries = list(self._entries.values())
        # Tasks created just before take their first step, so every informer that
        # was started runs (and so stops) for real.
        await asyncio.sleep(0)
        tasks = [e.task for e in entries if e.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        try:
            if self._owns_client:
                await self._client.close()
        finally:
            self._closed_signal.notify()
            logger.debug("factory shut down (%d informers)", len(entries))

    def is_shut_down(self) -> bool:
        """True once :meth:`shutdown` has completed."""
        return self._shutdown_done.is_set()

    def __repr__(self) -> str:
        with self._lock:
            entries = list(self._entries.values())
        names = ", ".join(e.info.qualified_name for e in entries)
        started = any(e.started for e in entries)
        state = "shut down" if self._closing else "started" if started else "new"
        return f"<{type(self).__name__} {state} informers=[{names}]>"


class SharedInformerFactory(_FactoryBase):
    """Makes, shares, starts and stops the informers of one API server, for asyncio
    programs (client-go's ``SharedInformerFactory``). For plain threads, use
    :class:`SyncSharedInformerFactory`.

    Use it with ``async with`` (which loads discovery, so :meth:`informer_for`
    resolves names at once, and shuts down on the way out); ``await``
    :meth:`wait_for_cache_sync` and :meth:`shutdown`. The informers run as tasks
    on the event loop that first enters it, starts it or awaits :meth:`resolve`;
    a plain ``with`` raises ``TypeError``, and :meth:`start` with no event loop
    running raises ``RuntimeError``, both naming :class:`SyncSharedInformerFactory`.

    ``client_or_config``: a :class:`~kubereflector.client.Client` (yours: the
    factory never closes it), or anything with the Client's interface (a test
    double), or a :class:`~kubereflector.client.ClientConfig` (the factory makes
    the Client, uses it on its loop and closes it at shutdown).

    Every informer lists and watches ``namespace`` (``None``: all namespaces;
    ignored for cluster-scoped resources; ``ValueError`` here unless it is a
    DNS-1123 label), has a namespace index
    (:data:`~kubereflector.NAMESPACE_INDEX`), applies ``transform`` (see
    :meth:`SharedIndexInformer.set_transform
    <kubereflector.SharedIndexInformer.set_transform>`) and passes the options
    of every list and watch through ``tweak_list_options``. ``default_resync``
    (seconds, ``0``: never) is each informer's default resync period;
    ``custom_resync`` maps resource names (any name :meth:`informer_for`
    accepts) to a period that replaces it for that resource. In the same way
    ``reflector_options`` (a :class:`~kubereflector.ReflectorOptions`; ``None``:
    the defaults) tunes how every informer lists, watches and recovers, and
    ``custom_reflector_options`` replaces it for the resources it names (derive
    one from the default with ``dataclasses.replace(default, page_size=100)``).
    ``object_mode`` (``"dict"``, the default, or ``"compact"``) is every
    informer's (see :class:`~kubereflector.SharedIndexInformer`).
    ``wrap_lister_watcher`` (a :data:`WrapListerWatcherFunc`) wraps each
    informer's ListerWatcher when the informer is made (a sharded Manager wraps
    them in :class:`~kubereflector.ShardedListWatch` es).

    Thread-safety: :meth:`informer_for`, :meth:`lister_for`, :meth:`start` and
    the cache reads may be called from any thread; the coroutines may be
    awaited on any loop (the work runs on the factory's).
    """

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        caller = running_loop()
        with self._lock:
            self._check_open()
            if self._loop is None:
                if caller is None:
                    raise RuntimeError(
                        "SharedInformerFactory runs on asyncio: start it on a running event "
                        "loop (e.g. inside 'async with'); for plain threads, use "
                        "SyncSharedInformerFactory"
                    )
                self._loop = caller
            return self._loop

    def _resolve_missing(self, name: str, index: _Index | None) -> ResourceInfo:
        raise _unresolved(name, index)

    async def __aenter__(self) -> Self:
        """Binds the factory to the running loop and loads discovery (so
        :meth:`informer_for` resolves names at once); leaving the block awaits
        :meth:`shutdown`. Raises what fetching discovery raises (the factory is
        then shut down), and ``RuntimeError`` if the factory runs on another loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._check_open()
            if self._loop is not None and self._loop is not loop:
                raise RuntimeError("this SharedInformerFactory runs on another event loop")
            self._loop = loop
        try:
            await self._load_discovery()
        except BaseException:
            await self.shutdown()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Awaits :meth:`shutdown`."""
        await self.shutdown()

    if not TYPE_CHECKING:  # a type checker reports 'with' itself; this says what to do

        def __enter__(self):
            """Raises ``TypeError``: this factory is entered with ``async with``."""
            raise TypeError(
                "SharedInformerFactory is for asyncio: use 'async with "
                "SharedInformerFactory(...)'; for 'with' and plain threads, use "
                "SyncSharedInformerFactory"
            )

        def __exit__(self, *exc_info):
            """Never reached (``__enter__`` raises)."""
            return None

    async def wait_for_cache_sync(
        self, timeout: float | None = None, *, handlers: Iterable[Registration[Any]] = ()
    ) -> dict[str, bool]:
        """Wait until every started informer has synced (client-go's
        ``WaitForCacheSync``): ``{qualified resource name: synced}``, e.g.
        ``{"pods": True, "deployments.apps": True}`` (``{}`` if nothing started).

        A value is ``False`` when ``timeout`` seconds passed first, or when the
        informer stopped (shutdown) before syncing. ``handlers``: registrations
        (of this factory's informers) to wait for too: their informer's value is
        ``True`` only once each of them has handled its initial notifications
        (see :meth:`Registration.has_synced <kubereflector.Registration.has_synced>`),
        so after the wait their output is complete. Informers made but not
        started, and their handlers, are left out. Raises ``TypeError`` or
        ``ValueError`` for ``handlers`` that are not registrations of this
        factory's informers.
        """
        return await self._wait_async(timeout, self._registrations(handlers))

    async def shutdown(self) -> None:
        """Stop every informer (their streams closed, their handlers' consumers
        ended; notifications not yet handled are dropped) and close the Client if
        the factory made it. Idempotent, and concurrent calls wait for the same
        shutdown; afterwards :meth:`start` and new informers raise
        :class:`FactoryShutdownError`, the caches stay readable. Await it on any
        event loop (the work runs on the factory's); never from a handler, which
        it would wait for."""
        with self._lock:
            factory_loop = self._loop
        if factory_loop is None:  # never bound to a loop: nothing runs
            await self._shutdown_once()
        else:
            await _on_loop(factory_loop, self._shutdown_once())
        self._shutdown_done.set()


class SyncSharedInformerFactory(_FactoryBase):
    """Makes, shares, starts and stops the informers of one API server, for
    programs without asyncio (client-go's ``SharedInformerFactory``); for asyncio
    programs, use :class:`SharedInformerFactory`.

    The factory runs its own event loop on a background thread, started by the
    first ``with``, :meth:`start` or name resolution, and everything runs there:
    plain-function handlers on worker threads (in order per registration),
    coroutine handlers on that loop. :meth:`wait_for_cache_sync` and
    :meth:`shutdown` block; leaving ``with`` shuts down (stopping and joining the
    thread). It works where an event loop runs too (e.g. in a notebook).

    The arguments are those of :class:`SharedInformerFactory`; a
    :class:`~kubereflector.client.Client` passed in must not have been used on
    another event loop (a Client is bound to the first loop it runs on).

    Thread-safety: every method and the cache reads may be called from any
    thread. The blocking calls (:meth:`wait_for_cache_sync`, :meth:`shutdown`,
    and :meth:`informer_for` when it must fetch discovery) raise
    ``RuntimeError`` on the factory's own loop thread (in a coroutine handler),
    where blocking would deadlock; never call :meth:`shutdown` from a plain
    handler either (shutdown waits for that handler to return).
    """

    _thread: LoopThread | None = None
    """The background loop thread, once started (never replaced)."""

    def _loop_thread(self) -> LoopThread:
        """The background loop thread, started on first use."""
        with self._lock:
            self._check_open()
            if self._thread is None:
                thread = LoopThread(name="kubereflector-factory")
                thread.start()
                self._thread = thread
                self._loop = thread.loop
            return self._thread

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop_thread().loop

    def sync_client(self) -> SyncClient:
        """A :class:`~kubereflector.client.SyncClient` for writes from plain threads,
        on the factory's loop thread and Client (one connection pool).

        Starts the loop thread if nothing did; raises :class:`FactoryShutdownError`
        after shutdown. Closing the SyncClient closes nothing; it stops working
        when the factory shuts down. Each call gives a new, cheap SyncClient.
        Thread-safe. (:class:`SharedInformerFactory` programs write with
        ``factory.client.resource(...)`` on the factory's loop.)
        """

        return SyncClient._sharing(self._client, self._loop_thread())

    def _resolve_missing(self, name: str, index: _Index | None) -> ResourceInfo:
        thread = self._thread
        if thread is not None and thread.in_thread():  # blocking here would deadlock
            raise _unresolved(name, index)
        return self._loop_thread().run(self._resolve_async(name))

    def __enter__(self) -> Self:
        """Starts the loop thread; leaving the block calls :meth:`shutdown`."""
        self._loop_thread()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Calls :meth:`shutdown`."""
        self.shutdown()

    if not TYPE_CHECKING:  # a type checker reports 'async with' itself; this says what to do

        async def __aenter__(self):
            """Raises ``TypeError``: this factory is entered with ``with``."""
            raise TypeError(
                "SyncSharedInformerFactory is for plain threads: use 'with "
                "SyncSharedInformerFactory(...)'; for 'async with' and asyncio, use "
                "SharedInformerFactory"
            )

        async def __aexit__(self, *exc_info):
            """Never reached (``__aenter__`` raises)."""
            return None

    def wait_for_cache_sync(
        self, timeout: float | None = None, *, handlers: Iterable[Registration[Any]] = ()
    ) -> dict[str, bool]:
        """Block until every started informer has synced (client-go's
        ``WaitForCacheSync``): ``{qualified resource name: synced}``, e.g.
        ``{"pods": True, "deployments.apps": True}`` (``{}`` if nothing started).

        ``timeout`` and ``handlers`` as for
        :meth:`SharedInformerFactory.wait_for_cache_sync`. Raises
        ``RuntimeError`` on the factory's own loop thread (await
        :func:`kubereflector.wait_for_cache_sync` there instead).
        """
        regs = self._registrations(handlers)
        thread = self._thread
        if thread is None:  # nothing ever ran
            return {}
        if thread.in_thread():
            raise RuntimeError(
                "wait_for_cache_sync() blocks: it cannot run on the factory's own "
                "loop thread (await kubereflector.wait_for_cache_sync(...) there)"
            )
        try:
            return thread.run(self._wait_async(timeout, regs))
        except (RuntimeError, concurrent.futures.CancelledError):
            if not self._closing:
                raise
            # Shut down meanwhile (the loop stopped under the wait): report the states.
            return self._states(self._groups(regs))

    def shutdown(self) -> None:
        """Stop every informer (their streams closed, their handlers' consumers
        ended; notifications not yet handled are dropped), close the Client if
        the factory made it, and stop and join the loop thread; returns when all
        that is done. Idempotent, and concurrent calls wait for the same shutdown;
        afterwards :meth:`start` and new informers raise
        :class:`FactoryShutdownError`, the caches stay readable.

        A plain handler in flight is waited for: never call this from a handler
        (it raises ``RuntimeError`` on the factory's loop thread).
        """
        thread = self._thread
        if thread is not None and thread.in_thread():
            raise RuntimeError("shutdown() blocks: it cannot run on the factory's own loop thread")
        with self._lock:
            thread = self._thread
            first = not self._shutdown_started
            self._shutdown_started = True
            self._closing = True
        if not first:
            self._shutdown_done.wait()
            return
        try:
            if thread is not None:
                with contextlib.suppress(FactoryShutdownError):
                    thread.run(self._shutdown_once())
            elif self._owns_client:  # never ran: the Client holds no connection
                asyncio.run(self._client.close())
        finally:
            try:
                if thread is not None:
                    thread.stop()
            finally:
                self._closed_signal.notify()
                self._shutdown_done.set()


# -- helpers ---------------------------------------------------------------------------


def _model_name(model: type) -> str:
    return f"{model.__module__}.{model.__qualname__}"


def _scope(info: ResourceInfo) -> str:
    return "namespaced" if info.namespaced else "cluster-scoped"


def _check_same(model: type, wanted: ResourceInfo, existing: ResourceInfo) -> None:
    """``ValueError`` unless the informer made for ``existing`` holds ``model``'s
    objects: the same version and scope (its group and resource are the same)."""
    if (wanted.version, wanted.namespaced) == (existing.version, existing.namespaced):
        return
    raise ValueError(
        f"{_model_name(model)} is {wanted} ({_scope(wanted)}), but this factory's "
        f"informer of {existing.qualified_name} watches {existing} ({_scope(existing)}), "
        "as first asked for: ask for the same version everywhere"
    )


def _unresolved(name: str, index: _Index | None) -> LookupError:
    """UnknownResourceError for a name the factory cannot resolve without blocking."""

    if index is None:
        err = UnknownResourceError(name)
        hint = (
            "the factory has not loaded discovery: enter it with 'async with' first, "
            f"or 'await factory.resolve({name!r})' and pass the ResourceInfo"
        )
    else:
        err = UnknownResourceError(name, index.suggest(name))
        hint = (
            "it is not in the discovery data the factory loaded; "
            f"'await factory.resolve({name!r})' refreshes it"
        )
    err.args = (f"{err}; {hint}",)
    return err


async def _on_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on ``loop`` from whatever loop runs the caller."""
    if asyncio.get_running_loop() is loop:
        return await coro
    try:
        future = asyncio.run_coroutine_threadsafe(coro, loop)
    except RuntimeError:  # that loop is closed
        coro.close()
        raise
    return await asyncio.wrap_future(future)


def _call_in_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
    """Run ``fn`` on ``loop`` (from another thread) and block until it returned."""
    done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def call() -> None:
        try:
            fn()
        except BaseException as exc:
            done.set_exception(exc)
        else:
            done.set_result(None)

    loop.call_soon_threadsafe(call)
    done.result()
