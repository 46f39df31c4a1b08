"""``SyncClient``: the REST client for plain threads, no ``async`` anywhere.

One implementation: a SyncClient runs the asyncio :class:`Client` and
:class:`ResourceClient` on a background event-loop thread (the one the sync
:class:`~kubereflector.SyncSharedInformerFactory` uses, when it comes from
:meth:`SyncSharedInformerFactory.sync_client
<kubereflector.SyncSharedInformerFactory.sync_client>`) and blocks the calling
thread for each answer::

    with SyncClient(load_config()) as client:
        deployments = client.resource("deploy", namespace="shop")
        web = deployments.get("web")
        deployments.patch("web", {"spec": {"replicas": 3}})
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from types import TracebackType
from typing import Any, Generic, TypeVar

from typing_extensions import overload  # get_overloads() sees it on Python 3.10 too

from .._aio.loop_thread import LoopThread
from ..cache.compact import ObjectMode
from ..cache.keys import KubeObject, ModelT
from ..cache.listwatch import ListOptions, ListResult, WatchEvent, WatchStream
from ._lines import MAX_LINE_BYTES
from .config import ClientConfig
from .discovery import ResourceInfo
from .resource import PatchType, PropagationPolicy, ResourceClient
from .rest import MAX_BODY_BYTES, Client, JsonValue, QueryParams

__all__ = ["SyncClient", "SyncResourceClient"]

T = TypeVar("T")


class SyncClient:
    """A blocking twin of :class:`~kubereflector.client.Client`.

    ``SyncClient(config, ...)`` starts its own event-loop thread and Client (the
    keyword arguments are the Client's) and :meth:`close` stops both; use it as
    a context manager. A SyncClient from
    :meth:`SyncSharedInformerFactory.sync_client
    <kubereflector.SyncSharedInformerFactory.sync_client>` shares the factory's
    loop thread and Client, so its connection pool too; closing it closes
    nothing (the factory's shutdown does), and it stops working once the
    factory is shut down.

    Thread-safety: every method may be called from any number of threads at
    once, except from the loop thread itself (a coroutine handler of a sync
    factory), where blocking would deadlock: there, ``RuntimeError`` (await the
    async :attr:`client` instead). Calls after :meth:`close` raise
    ``RuntimeError``. Errors are the async client's, raised in the caller's
    thread; interrupting a call (``KeyboardInterrupt``) cancels its request.
    """

    __slots__ = ("_client", "_closed", "_lock", "_owner", "_thread")

    def __init__(
        self,
        config: ClientConfig,
        *,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
        max_connections: int = 0,
        max_event_bytes: int = MAX_LINE_BYTES,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        if not isinstance(config, ClientConfig):
            raise TypeError(f"SyncClient needs a ClientConfig, not {type(config).__name__}")
        client = Client(
            config,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_connections=max_connections,
            max_event_bytes=max_event_bytes,
            max_body_bytes=max_body_bytes,
        )
        thread = LoopThread(name="kubereflector-client")
        thread.start()
        self._setup(client, thread, owner=True)

    @classmethod
    def _sharing(cls, client: Client, thread: LoopThread) -> SyncClient:
        """A SyncClient on ``thread``'s loop using ``client`` (owned by someone else)."""
        self = cls.__new__(cls)
        self._setup(client, thread, owner=False)
        return self

    def _setup(self, client: Client, thread: LoopThread, *, owner: bool) -> None:
        self._client = client
        self._thread = thread
        self._owner = owner
        self._closed = False
        self._lock = threading.Lock()

    @property
    def client(self) -> Client:
        """The async Client underneath (use it only in coroutines on :attr:`loop`)."""
        return self._client

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the client runs on (on its own thread)."""
        return self._thread.loop

    @property
    def server(self) -> str:
        """The API server's base URL, without credentials."""
        return self._client.server

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the client's event loop and block for its result (or
        exception). For anything the blocking API lacks, with :attr:`client`.
        Raises ``RuntimeError`` when closed or on the loop thread."""
        if self._closed:
            coro.close()
            raise RuntimeError("the SyncClient is closed")
        return self._thread.run(coro)

    @overload
    def resource(
        self, resource: type[ModelT], *, namespace: str | None = None
    ) -> SyncResourceClient[ModelT]: ...

    @overload
    def resource(
        self, resource: str | ResourceInfo, *, namespace: str | None = None
    ) -> SyncResourceClient[KubeObject]: ...

    def resource(
        self, resource: str | ResourceInfo | type[ModelT], *, namespace: str | None = None
    ) -> SyncResourceClient[Any]:
        """The blocking :class:`SyncResourceClient` of ``resource`` in ``namespace``:
        a ``SyncResourceClient[Pod]`` for the model ``Pod``, a
        ``SyncResourceClient[KubeObject]`` for a name or a ResourceInfo; the
        arguments and errors are :meth:`Client.resource
        <kubereflector.client.Client.resource>`'s."""
        return SyncResourceClient(self, self._client.resource(resource, namespace=namespace))

    def request(
        self,
        method: str,
        path: str,
        *,
        params: QueryParams | None = None,
        json: Any = None,
        content_type: str | None = None,
        accept: str | None = None,
    ) -> JsonValue:
        """:meth:`Client.request <kubereflector.client.Client.request>`, blocking."""
        return self.run(
            self._client.request(
                method, path, params=params, json=json, content_type=content_type, accept=accept
            )
        )

    def close(self) -> None:
        """Close the connections and stop the loop thread (a SyncClient that owns
        them); idempotent. Must not be called on the loop thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if not self._owner:
            return
        try:
            self._thread.run(self._client.close())
        finally:
            self._thread.stop()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<SyncClient {self.server}{state}>"


class SyncResourceClient(Generic[ModelT]):
    """The blocking twin of :class:`~kubereflector.client.ResourceClient`: the same
    methods with the same arguments, results and errors, each running the async
    one on the :class:`SyncClient`'s loop. A ``SyncResourceClient[T]`` takes and
    returns ``T`` objects, as a ``ResourceClient[T]`` does. Thread-safe (see
    :class:`SyncClient`).
    """

    __slots__ = ("_resource", "_sync")

    def __init__(self, sync: SyncClient, resource: ResourceClient[ModelT]) -> None:
        self._sync = sync
        self._resource = resource

    @property
    def namespace(self) -> str | None:
        """The namespace the resource client reads and writes (``None``: see
        :class:`~kubereflector.client.ResourceClient`)."""
        return self._resource.namespace

    @property
    def resource_name(self) -> str:
        """The resource as given (:attr:`ResourceClient.resource_name
        <kubereflector.client.ResourceClient.resource_name>`)."""
        return self._resource.resource_name

    @property
    def url(self) -> str:
        """The collection URL requests go to, for logs (:attr:`ResourceClient.url
        <kubereflector.client.ResourceClient.url>`)."""
        return self._resource.url

    @property
    def resource_client(self) -> ResourceClient[ModelT]:
        """The async ResourceClient underneath (for coroutines on the client's loop)."""
        return self._resource

    def resource_info(self) -> ResourceInfo:
        """The resource, resolved through discovery once; blocks
        (:meth:`ResourceClient.resource_info
        <kubereflector.client.ResourceClient.resource_info>`)."""
        return self._sync.run(self._resource.resource_info())

    def get(self, name: str) -> ModelT:
        """The object ``name``; blocks. :class:`~kubereflector.NotFoundError` if there is none
        (:meth:`ResourceClient.get <kubereflector.client.ResourceClient.get>`)."""
        return self._sync.run(self._resource.get(name))

    def list(
        self,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
    ) -> ListResult[ModelT]:
        """Every object, all pages at one resourceVersion, with the list's
        ``resource_version``; blocks (:meth:`ResourceClient.list
        <kubereflector.client.ResourceClient.list>`)."""
        return self._sync.run(
            self._resource.list(
                label_selector=label_selector, field_selector=field_selector, limit=limit
            )
        )

    def list_page(
        self,
        options: ListOptions,
        *,
        metadata_only: bool = False,
        object_mode: ObjectMode = "dict",
    ) -> ListResult[ModelT]:
        """One page of a list with ``options`` as given; blocks
        (:meth:`ResourceClient.list_page <kubereflector.client.ResourceClient.list_page>`)."""
        return self._sync.run(
            self._resource.list_page(options, metadata_only=metadata_only, object_mode=object_mode)
        )

    def watch(
        self,
        options: ListOptions | None = None,
        *,
        metadata_only: bool = False,
        object_mode: ObjectMode = "dict",
    ) -> contextlib.AbstractContextManager[Iterator[WatchEvent[ModelT]]]:
        """A watch: entering opens the stream and gives a blocking iterator of
        :class:`~kubereflector.WatchEvent`; leaving closes it. Single use
        (:meth:`ResourceClient.watch <kubereflector.client.ResourceClient.watch>`)."""
        return _SyncWatch(
            self._sync,
            self._resource.watch(options, metadata_only=metadata_only, object_mode=object_mode),
        )

    def create(
        self, obj: ModelT, *, dry_run: bool = False, field_manager: str | None = None
    ) -> ModelT:
        """``POST`` a new object and return it; blocks.
        :class:`~kubereflector.AlreadyExistsError` if the name is taken
        (:meth:`ResourceClient.create <kubereflector.client.ResourceClient.create>`)."""
        return self._sync.run(
            self._resource.create(obj, dry_run=dry_run, field_manager=field_manager)
        )

    def update(
        self, obj: ModelT, *, dry_run: bool = False, field_manager: str | None = None
    ) -> ModelT:
        """``PUT`` the object; blocks. :class:`~kubereflector.ConflictError` when its
        ``metadata.resourceVersion`` is stale (:meth:`ResourceClient.update
        <kubereflector.client.ResourceClient.update>`)."""
        return self._sync.run(
            self._resource.update(obj, dry_run=dry_run, field_manager=field_manager)
        )

    def update_status(
        self, obj: ModelT, *, dry_run: bool = False, field_manager: str | None = None
    ) -> ModelT:
        """``PUT`` the object's ``status`` subresource; blocks. Conflicts as :meth:`update`
        (:meth:`ResourceClient.update_status
        <kubereflector.client.ResourceClient.update_status>`)."""
        return self._sync.run(
            self._resource.update_status(obj, dry_run=dry_run, field_manager=field_manager)
        )

    def patch(
        self,
        name: str,
        patch: Any,
        *,
        type: PatchType = "merge",
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> ModelT:
        """``PATCH`` the object ``name`` (``merge``, ``json``, ``strategic``); blocks
        (:meth:`ResourceClient.patch <kubereflector.client.ResourceClient.patch>`)."""
        return self._sync.run(
            self._resource.patch(
                name,
                patch,
                type=type,
                subresource=subresource,
                dry_run=dry_run,
                field_manager=field_manager,
            )
        )

    def apply(
        self,
        obj: ModelT,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> ModelT:
        """Server-side apply as ``field_manager``; blocks.
        :class:`~kubereflector.ConflictError` for fields another manager owns, unless
        ``force`` (:meth:`ResourceClient.apply
        <kubereflector.client.ResourceClient.apply>`)."""
        return self._sync.run(
            self._resource.apply(
                obj,
                field_manager=field_manager,
                force=force,
                subresource=subresource,
                dry_run=dry_run,
            )
        )

    def delete(
        self,
        name: str,
        *,
        propagation_policy: PropagationPolicy | None = None,
        grace_period_seconds: int | None = None,
        preconditions: Mapping[str, str] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """``DELETE`` the object ``name``; blocks. The server's answer: the object, or a
        ``Status`` (:meth:`ResourceClient.delete
        <kubereflector.client.ResourceClient.delete>`)."""
        return self._sync.run(
            self._resource.delete(
                name,
                propagation_policy=propagation_policy,
                grace_period_seconds=grace_period_seconds,
                preconditions=preconditions,
                dry_run=dry_run,
            )
        )

    def __repr__(self) -> str:
        return f"Sync{self._resource!r}"


class _SyncWatch(contextlib.AbstractContextManager[Iterator[WatchEvent[ModelT]]]):
    """A watch stream driven from a plain thread, one event per round trip."""

    __slots__ = ("_events", "_stream", "_sync")

    def __init__(self, sync: SyncClient, stream: WatchStream[ModelT]) -> None:
        self._sync = sync
        self._stream = stream
        self._events: AsyncIterator[WatchEvent[ModelT]] | None = None

    def __enter__(self) -> Iterator[WatchEvent[ModelT]]:
        if self._events is not None:
            raise RuntimeError("a watch stream can be entered only once")
        self._events = self._sync.run(_enter(self._stream))
        return self._iterate(self._events)

    def _iterate(self, events: AsyncIterator[WatchEvent[ModelT]]) -> Iterator[WatchEvent[ModelT]]:
        while True:
            more, event = self._sync.run(_next(events))
            if not more or event is None:
                return
            yield event

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._events is not None and not self._sync.closed:
            self._sync.run(self._stream.__aexit__(exc_type, exc, tb))


async def _enter(stream: WatchStream[ModelT]) -> AsyncIterator[WatchEvent[ModelT]]:
    return await stream.__aenter__()


async def _next(
    events: AsyncIterator[WatchEvent[ModelT]],
) -> tuple[bool, WatchEvent[ModelT] | None]:
    try:
        return True, await events.__anext__()
    except StopAsyncIteration:
        return False, None
