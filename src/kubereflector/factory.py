"""SharedInformerFactory: one shared informer per resource, for a whole program.

client-go's ``SharedInformerFactory``, over the HTTP client. Ask it for the
informer of a resource by any name kubectl accepts (``"pods"``, ``"po"``,
``"Pod"``, ``"deployments.apps"``, a CRD's plural) and every caller gets the
same :class:`~kubereflector.SharedIndexInformer`: one list-and-watch, one
cache, many handlers. ``start()`` runs the informers created so far;
``wait_for_cache_sync()`` waits for their first lists; ``shutdown()`` stops
them all and closes their streams.

Two ways to use it, one asyncio core (fixed by the first ``start()`` or
``async with``):

**Async mode** (``async with``, or ``start()`` called on a running event loop):
informers run as tasks on that loop; ``wait_for_cache_sync()`` and
``shutdown()`` return coroutines to await there::

    async with SharedInformerFactory(load_config()) as factory:
        pods = factory.informer_for("pods")
        pods.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add))
        factory.start()
        await factory.wait_for_cache_sync()
        print(len(factory.lister_for("pods").list()))

**Sync mode** (``start()`` called where no event loop runs, or ``with``): the
factory runs its own event loop on a background thread and everything runs
there; ``wait_for_cache_sync()`` and ``shutdown()`` block; plain-function
handlers run on worker threads, in order per registration. No ``async``
anywhere in the caller's code::

    factory = SharedInformerFactory(load_config())
    pods = factory.informer_for("pods")
    pods.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add))
    factory.start()
    factory.wait_for_cache_sync(timeout=60)
    print(len(factory.lister_for("pods").list()))
    ...
    factory.shutdown()          # or: with SharedInformerFactory(...) as factory:

In both modes the caches (``informer.indexer``, listers) are read
synchronously from any thread, and the informers' own methods
(``add_event_handler``, ``has_synced``, ...) are thread-safe.
``examples/factory_async.py`` and ``examples/factory_sync.py`` are complete
programs, one for each mode.
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
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ._loop_thread import LoopThread
from ._sync import SyncSignal
from .delta_fifo import TransformFunc
from .listers import Lister
from .listwatch import ListerWatcher, ListOptions, ListResult, WatchStream
from .reflector import ReflectorOptions, checked_options
from .shared_informer import Registration, SharedIndexInformer, wait_for_cache_sync
from .store import NAMESPACE_INDEX, meta_namespace_index_func

if TYPE_CHECKING:
    from .client.config import ClientConfig
    from .client.discovery import ResourceInfo, _Index
    from .client.rest import Client

__all__ = ["FactoryMode", "FactoryShutdownError", "SharedInformerFactory", "TweakListOptionsFunc"]

logger = logging.getLogger("kubereflector.factory")

T = TypeVar("T")

TweakListOptionsFunc = Callable[[ListOptions], ListOptions]
"""Rewrites the ``ListOptions`` of every list and watch of a factory's informers
(e.g. to add a label selector); returns new options (``dataclasses.replace``).
Runs on the event loop: it must be quick and must not block."""

FactoryMode = Literal["new", "async", "sync"]
"""``"new"`` until the first ``start()``/``async with``/``with`` (or a name
resolution that fixes the mode), then ``"async"`` or ``"sync"`` for good."""


class FactoryShutdownError(RuntimeError):
    """The factory has been shut down: it starts nothing and makes no new informers."""


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@dataclass(eq=False)
class _Entry:
    """One resource's informer and how far it got."""

    info: ResourceInfo
    informer: SharedIndexInformer
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


class SharedInformerFactory:
    """Makes, shares, starts and stops the informers of one API server
    (client-go's ``SharedInformerFactory``).

    ``client_or_config``: a :class:`~kubereflector.client.Client` (yours: the
    factory never closes it; in sync mode it must not have been used on another
    event loop, a Client being bound to its first loop), or anything with the
    Client's interface (a test double), or a
    :class:`~kubereflector.client.ClientConfig` (the factory makes the Client,
    uses it on its loop and closes it at shutdown).

    Every informer lists and watches ``namespace`` (``None``: all namespaces;
    ignored for cluster-scoped resources), has a namespace index
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

    The mode (see the module documentation) is fixed by the first of:
    ``async with`` or :meth:`resolve` (async), ``with`` (sync), :meth:`start`
    (async on a running event loop, else sync), or :meth:`informer_for` with a
    name on a thread without a running loop (sync: it resolves the name on the
    background loop). It never changes; :attr:`mode` tells it.

    Thread-safety: :meth:`informer_for`, :meth:`lister_for`, :meth:`start` and
    the cache reads may be called from any thread. In sync mode the blocking
    calls (:meth:`wait_for_cache_sync`, :meth:`shutdown`, and
    :meth:`informer_for` when it must fetch discovery) raise ``RuntimeError``
    on the factory's own loop thread (a coroutine handler), where blocking
    would deadlock; never call :meth:`shutdown` from a plain handler either
    (shutdown waits for that handler to return).
    """

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
    ) -> None:
        from .client.config import ClientConfig
        from .client.rest import Client

        if default_resync < 0:
            raise ValueError(f"default_resync must be >= 0 (got {default_resync})")
        custom = dict(custom_resync or {})
        for name, period in custom.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"custom_resync keys are resource names, not {name!r}")
            if period < 0:
                raise ValueError(f"custom_resync[{name!r}] must be >= 0 (got {period})")
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
        self._owns_client = isinstance(client_or_config, ClientConfig)
        if isinstance(client_or_config, ClientConfig):
            # Not bound to any loop yet: a Client binds to the loop it is first used on.
            self._client: Client = Client(client_or_config)
        elif isinstance(client_or_config, Client) or hasattr(client_or_config, "discovery"):
            self._client = client_or_config
        else:
            raise TypeError(
                "SharedInformerFactory needs a Client or a ClientConfig, "
                f"not {type(client_or_config).__name__}"
            )
        self._namespace = namespace or None
        self._default_resync = float(default_resync)
        self._tweak = tweak_list_options
        self._transform = transform
        self._custom_resync = custom
        self._reflector_options = options
        self._custom_options = custom_options
        # name in custom_resync or custom_reflector_options -> (group, resource),
        # once discovery resolved it
        self._custom_keys: dict[str, tuple[str, str]] = {}
        self._lock = threading.RLock()
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._mode: FactoryMode = "new"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: LoopThread | None = None
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
    def mode(self) -> FactoryMode:
        """``"new"``, then ``"async"`` or ``"sync"`` for good (see the class documentation)."""
        return self._mode

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the informers run on (``None`` until the mode is fixed)."""
        return self._loop

    # -- informers ------------------------------------------------------------------------

    def informer_for(self, resource: str | ResourceInfo) -> SharedIndexInformer:
        """The one shared informer of ``resource`` (made on first request, started
        by the next :meth:`start`).

        ``resource`` is a :class:`~kubereflector.client.ResourceInfo` or a name
        discovery resolves (``"pods"``, ``"po"``, ``"Pod"``, ``"deployments.apps"``,
        ``"apps/v1/deployments"``, a CRD's plural or short name); informers are
        keyed by group and resource, so every name of one resource gives the same
        informer (the version of the first request is the one watched).

        Names are resolved against the discovery data the factory loaded. Where
        that data lacks the name: in sync mode (or before any mode, on a thread
        without a running event loop, which fixes sync mode) this blocks while
        discovery is fetched on the background loop; in async mode it raises
        :class:`~kubereflector.client.UnknownResourceError` saying to ``await
        factory.resolve(name)`` (which refreshes discovery) first. Raises
        :class:`FactoryShutdownError` for a resource without an informer once the
        factory is shut down. Thread-safe.
        """
        from .client.discovery import ResourceInfo

        if isinstance(resource, ResourceInfo):
            info = resource
        elif isinstance(resource, str):
            info = self._resolve_now(resource)
        else:
            raise TypeError(
                f"a resource is a name or a ResourceInfo, not {type(resource).__name__}"
            )
        key = (info.group, info.resource)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._check_open()
                entry = _Entry(info, self._new_informer(info))
                self._entries[key] = entry
            return entry.informer

    def lister_for(self, resource: str | ResourceInfo) -> Lister:
        """The :class:`~kubereflector.Lister` of :meth:`informer_for` ``(resource)``."""
        return self.informer_for(resource).lister

    def informers(self) -> dict[str, SharedIndexInformer]:
        """Every informer made so far, by qualified resource name (``pods``,
        ``deployments.apps``)."""
        with self._lock:
            return {e.info.qualified_name: e.informer for e in self._entries.values()}

    async def resolve(self, name: str) -> ResourceInfo:
        """The resource ``name`` means, from discovery (fetched anew when the name is
        not in the cached data, so a CRD created since is found); the factory's
        discovery data is refreshed too, so :meth:`informer_for` accepts the name
        afterwards. Raises :class:`~kubereflector.client.UnknownResourceError`.

        Await it on any event loop (it runs on the factory's); before any mode is
        fixed it fixes async mode on the caller's loop.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            self._check_open()
            if self._mode == "new":
                self._mode = "async"
                self._loop = loop
            factory_loop = self._loop
        assert factory_loop is not None
        return await _on_loop(factory_loop, self._resolve_async(name))

    def _resolve_now(self, name: str) -> ResourceInfo:
        """Resolve synchronously: from the loaded discovery data, else (where
        blocking is allowed) by fetching it on the background loop."""
        with self._lock:
            index, mode, thread = self._index, self._mode, self._thread
        if index is not None:
            found = index.find(name)
            if found is not None:
                return found
        if (
            mode == "async"
            or (mode == "new" and _running_loop() is not None)
            or (thread is not None and thread.in_thread())
        ):
            raise _unresolved(name, index)
        return self._enter_sync_mode().run(self._resolve_async(name))

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
        from .client.discovery import _Index

        index = _Index(resources)
        with self._lock:
            self._index = index

    def _new_informer(self, info: ResourceInfo) -> SharedIndexInformer:
        from .client.listwatch import ResourceListWatch

        lw: ListerWatcher = ResourceListWatch(self._client, info, namespace=self._namespace)
        if self._tweak is not None:
            lw = _TweakedListerWatcher(lw, self._tweak)
        informer = SharedIndexInformer(
            lw,
            expected_kind=info.kind or None,
            default_resync=float(self._custom_for(info, self._custom_resync, self._default_resync)),
            indexers={NAMESPACE_INDEX: meta_namespace_index_func},
            reflector_options=self._custom_for(info, self._custom_options, self._reflector_options),
        )
        if self._transform is not None:
            informer.set_transform(self._transform)
        return informer

    def _custom_for(self, info: ResourceInfo, custom: Mapping[str, T], default: T) -> T:
        """The value ``custom`` gives the resource ``info`` (by any of its names), or
        ``default``."""
        from .client.discovery import _Index

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
            raise FactoryShutdownError("the SharedInformerFactory has been shut down")

    def _enter_sync_mode(self) -> LoopThread:
        """Fix sync mode (starting the loop thread) or confirm it; its thread."""
        with self._lock:
            self._check_open()
            if self._mode == "async":
                raise RuntimeError(
                    "this SharedInformerFactory runs in async mode (on an event loop); "
                    "it cannot switch to sync mode"
                )
            if self._thread is None:
                thread = LoopThread(name="kubereflector-factory")
                thread.start()
                self._thread = thread
                self._loop = thread.loop
                self._mode = "sync"
            return self._thread

    def __enter__(self) -> SharedInformerFactory:
        """Sync use: fixes sync mode (also where an event loop runs, e.g. in a
        notebook); leaving the block calls :meth:`shutdown`."""
        self._enter_sync_mode()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._shutdown_sync()

    async def __aenter__(self) -> SharedInformerFactory:
        """Async use: fixes async mode on the running loop and loads discovery (so
        :meth:`informer_for` resolves names at once); leaving the block awaits
        :meth:`shutdown`. Raises what fetching discovery raises (the factory is
        then shut down)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._check_open()
            if self._mode == "sync":
                raise RuntimeError(
                    "this SharedInformerFactory runs in sync mode (on its own thread); "
                    "it cannot be entered with 'async with'"
                )
            if self._mode == "async" and self._loop is not loop:
                raise RuntimeError("this SharedInformerFactory runs on another event loop")
            self._mode = "async"
            self._loop = loop
        try:
            await self._load_discovery()
        except BaseException:
            await self._shutdown_async()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._shutdown_async()

    # -- starting ---------------------------------------------------------------------

    def start(self) -> None:
        """Start every informer made since the last call (idempotent; informers
        made later start on the next call). Returns once their tasks exist.

        The first call fixes the mode if nothing did: async on the running event
        loop of the calling thread, else sync (the background loop thread starts).
        Raises :class:`FactoryShutdownError` after :meth:`shutdown`. Thread-safe.
        """
        caller_loop = _running_loop()
        with self._lock:
            self._check_open()
            if self._mode == "new" and caller_loop is not None:
                self._mode = "async"
                self._loop = caller_loop
        if self._mode == "new":
            self._enter_sync_mode()
        with self._lock:
            factory_loop = self._loop
            pending = [e for e in self._entries.values() if not e.started]
            for entry in pending:
                entry.started = True
        if not pending:
            return
        assert factory_loop is not None
        if caller_loop is factory_loop:
            self._spawn(pending)
        elif factory_loop.is_running():
            _call_in_loop(factory_loop, lambda: self._spawn(pending))
        else:
            raise RuntimeError("the event loop this SharedInformerFactory runs on has stopped")

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

    def wait_for_cache_sync(
        self, timeout: float | None = None, *, handlers: Iterable[Registration] = ()
    ) -> Any:
        """Wait until every started informer has synced (client-go's
        ``WaitForCacheSync``): ``{qualified resource name: synced}``, e.g.
        ``{"pods": True, "deployments.apps": True}``.

        **Returns, by mode:** in sync mode it blocks and returns the
        ``dict[str, bool]``; in async mode it returns a coroutine to await for that
        dict (``await factory.wait_for_cache_sync()``). Before any mode, nothing
        has started: ``{}`` (a coroutine giving ``{}`` where an event loop runs).

        A value is ``False`` when ``timeout`` seconds passed first, or when the
        informer stopped (shutdown) before syncing. ``handlers``: registrations
        (of this factory's informers) to wait for too: their informer's value is
        ``True`` only once each of them has handled its initial notifications
        (see :meth:`Registration.has_synced <kubereflector.Registration.has_synced>`),
        so after the wait their output is complete. Informers made but not
        started, and their handlers, are left out.

        In sync mode this raises ``RuntimeError`` on the factory's own loop thread
        (await :func:`kubereflector.wait_for_cache_sync` there instead).
        """
        regs = tuple(handlers)
        for reg in regs:
            if not isinstance(reg, Registration):
                raise TypeError(f"handlers are Registrations, not {type(reg).__name__}")
            if not any(reg.informer is e.informer for e in self._snapshot()):
                raise ValueError(f"{reg!r} is not a registration of this factory's informers")
        mode = self._mode
        if mode == "sync":
            return self._wait_sync(timeout, regs)
        if mode == "async" or _running_loop() is not None:
            return self._wait_async(timeout, regs)
        return {}

    def _snapshot(self) -> list[_Entry]:
        with self._lock:
            return list(self._entries.values())

    def _groups(
        self, regs: tuple[Registration, ...]
    ) -> dict[str, tuple[SharedIndexInformer, list[Registration]]]:
        """What to wait for: each started informer with the given registrations of it."""
        groups: dict[str, tuple[SharedIndexInformer, list[Registration]]] = {}
        for entry in self._snapshot():
            if entry.started:
                mine = [r for r in regs if r.informer is entry.informer]
                groups[entry.info.qualified_name] = (entry.informer, mine)
        return groups

    @staticmethod
    def _states(
        groups: dict[str, tuple[SharedIndexInformer, list[Registration]]],
    ) -> dict[str, bool]:
        return {
            name: informer.has_synced() and all(r.has_synced() for r in regs)
            for name, (informer, regs) in groups.items()
        }

    async def _wait_async(
        self, timeout: float | None, regs: tuple[Registration, ...]
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

    def _wait_sync(self, timeout: float | None, regs: tuple[Registration, ...]) -> dict[str, bool]:
        thread = self._thread
        assert thread is not None
        if thread.in_thread():
            raise RuntimeError(
                "wait_for_cache_sync() blocks in sync mode: it cannot run on the factory's own "
                "loop thread (await kubereflector.wait_for_cache_sync(...) there)"
            )
        try:
            return thread.run(self._wait_async(timeout, regs))
        except (RuntimeError, concurrent.futures.CancelledError):
            if not self._closing:
                raise
            # Shut down meanwhile (the loop stopped under the wait): report the states.
            return self._states(self._groups(regs))

    # -- shutting down ----------------------------------------------------------------

    def shutdown(self) -> Any:
        """Stop every informer (their streams closed, their handlers' consumers
        ended; notifications not yet handled are dropped), close the Client if
        the factory made it and, in sync mode, stop and join the loop thread.
        Idempotent; afterwards :meth:`start` and new informers raise
        :class:`FactoryShutdownError`, the caches stay readable.

        **Returns, by mode:** in sync mode it blocks until all that is done and
        returns ``None``; in async mode it returns a coroutine to await (on any
        event loop; the work runs on the factory's). Before any mode: a
        coroutine where an event loop runs, else it blocks (briefly).

        A plain handler in flight is waited for: never call this from a handler
        (sync mode raises ``RuntimeError`` on the factory's loop thread).
        """
        if self._mode == "async" or (self._mode == "new" and _running_loop() is not None):
            return self._shutdown_async()
        self._shutdown_sync()
        return None

    async def _shutdown_async(self) -> None:
        with self._lock:
            factory_loop = self._loop
        if factory_loop is None:  # never bound to a loop: nothing runs
            await self._shutdown_once()
        else:
            await _on_loop(factory_loop, self._shutdown_once())

    async def _shutdown_once(self) -> None:
        """On the factory's loop (or, never bound, the caller's): shut down once;
        concurrent callers wait for the same shutdown."""
        with self._lock:
            task = self._shutdown_task
            if task is None:
                task = self._shutdown_task = asyncio.ensure_future(self._shutdown_core())
        await asyncio.shield(task)
        if self._mode != "sync":
            self._shutdown_done.set()

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

    def _shutdown_sync(self) -> None:
        thread = self._thread
        if thread is not None and thread.in_thread():
            raise RuntimeError(
                "shutdown() blocks in sync mode: it cannot run on the factory's own loop thread"
            )
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

    def is_shut_down(self) -> bool:
        """True once :meth:`shutdown` has completed."""
        return self._shutdown_done.is_set()

    def __repr__(self) -> str:
        with self._lock:
            names = ", ".join(e.info.qualified_name for e in self._entries.values())
        state = "shut down" if self._closing else self._mode
        return f"<SharedInformerFactory {state} informers=[{names}]>"


# -- helpers ---------------------------------------------------------------------------


def _unresolved(name: str, index: _Index | None) -> LookupError:
    """UnknownResourceError for a name the factory cannot resolve without blocking."""
    from .client.discovery import UnknownResourceError

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
