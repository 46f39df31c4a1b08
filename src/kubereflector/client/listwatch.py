"""``ResourceListWatch``: the ListerWatcher of any resource on an API server."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from types import TracebackType

from ..errors import ApiError
from ..listwatch import ListOptions, ListResult, WatchEvent, WatchStream
from .discovery import ResourceInfo
from .paths import validate_namespace
from .rest import Client

__all__ = ["ResourceListWatch"]


def _combine(own: str | None, extra: str) -> str:
    """AND two selectors (``,`` joins requirements in label and field selectors)."""
    return ",".join(s for s in (own, extra) if s)


class ResourceListWatch:
    """Lists and watches one resource over HTTP (client-go's ``NewListWatchFromClient``
    plus the dynamic and metadata clients in one).

    ``resource`` is a :class:`ResourceInfo` or any name
    :meth:`Discovery.resolve` accepts (``"pods"``, ``"deploy"``,
    ``"apps/v1/deployments"``, a CRD's plural or short name); a name is resolved
    through ``client.discovery`` (cached) on first use, so an unknown name
    raises :class:`~kubereflector.client.UnknownResourceError` from the first
    ``list`` or from entering the first ``watch``.

    ``namespace`` limits a namespaced resource to one namespace (``None``: all
    namespaces); it is ignored for cluster-scoped resources, as kubectl does.
    A namespace that is not a DNS-1123 label raises ``ValueError`` here.
    ``label_selector`` and ``field_selector`` are fixed for this ListerWatcher;
    selectors in a call's ``ListOptions`` are ANDed with them (both sent,
    joined by ``,``). ``metadata_only`` asks the server for
    ``PartialObjectMetadata`` objects: only ``kind``, ``apiVersion`` and
    ``metadata``, a fraction of the memory in a cache.

    A resource whose discovery lacks the ``list`` or ``watch`` verb raises
    ``ApiError(405, "MethodNotAllowed")`` from that call. Every other error is
    the :class:`~kubereflector.client.Client`'s. Objects returned belong to the
    caller. Use on the Client's event loop; calls may run concurrently.
    """

    __slots__ = (
        "_info",
        "_name",
        "client",
        "field_selector",
        "label_selector",
        "metadata_only",
        "namespace",
    )

    def __init__(
        self,
        client: Client,
        resource: str | ResourceInfo,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> None:
        self.client = client
        self.namespace = validate_namespace(namespace) if namespace else None
        self.label_selector = label_selector or ""
        self.field_selector = field_selector or ""
        self.metadata_only = metadata_only
        self._info = resource if isinstance(resource, ResourceInfo) else None
        self._name = resource if isinstance(resource, str) else str(resource)

    async def resource_info(self) -> ResourceInfo:
        """The resource this lists and watches (resolved through discovery once)."""
        info = self._info
        if info is None:
            info = self._info = await self.client.discovery.resolve(self._name)
        return info

    @property
    def url(self) -> str:
        """The collection URL this lists and watches, for logs
        (``https://host:6443/api/v1/namespaces/default/pods``); until discovery
        has resolved the resource, the server and the name asked for."""
        info = self._info
        if info is None:
            return f"{self.client.server} ({self._name})"
        return self.client.server + info.api_path(self.namespace)

    async def path(self) -> str:
        """The collection path requests go to (``/api/v1/namespaces/default/pods``)."""
        return (await self.resource_info()).api_path(self.namespace)

    def _options(self, options: ListOptions) -> ListOptions:
        label = _combine(self.label_selector, options.label_selector)
        field = _combine(self.field_selector, options.field_selector)
        if label == options.label_selector and field == options.field_selector:
            return options
        return dataclasses.replace(options, label_selector=label, field_selector=field)

    async def _path_for(self, verb: str) -> str:
        info = await self.resource_info()
        if not info.supports(verb):
            path = info.api_path(self.namespace)
            raise ApiError(
                405,
                "MethodNotAllowed",
                f"the server does not support {verb!r} on {info.qualified_name} "
                f"(its verbs: {', '.join(info.verbs)})",
                url=self.client.server + path,
            )
        return info.api_path(self.namespace)

    async def list(self, options: ListOptions) -> ListResult:
        """One page of the list (see :meth:`Client.list`)."""
        path = await self._path_for("list")
        return await self.client.list(
            path, self._options(options), metadata_only=self.metadata_only
        )

    def watch(self, options: ListOptions) -> WatchStream:
        """A watch stream (see :meth:`Client.watch`); resolution happens on entering."""
        return _ResolvingWatch(self, options)

    def __repr__(self) -> str:
        parts = [self._name]
        if self.namespace:
            parts.append(f"namespace={self.namespace!r}")
        if self.label_selector:
            parts.append(f"label_selector={self.label_selector!r}")
        if self.field_selector:
            parts.append(f"field_selector={self.field_selector!r}")
        if self.metadata_only:
            parts.append("metadata_only=True")
        return f"ResourceListWatch({', '.join(parts)})"


class _ResolvingWatch(contextlib.AbstractAsyncContextManager[AsyncIterator[WatchEvent]]):
    """Resolves the resource, then opens the Client's watch."""

    __slots__ = ("_inner", "_lw", "_options")

    def __init__(self, lw: ResourceListWatch, options: ListOptions) -> None:
        self._lw = lw
        self._options = options
        self._inner: WatchStream | None = None

    async def __aenter__(self) -> AsyncIterator[WatchEvent]:
        lw = self._lw
        path = await lw._path_for("watch")
        inner = lw.client.watch(path, lw._options(self._options), metadata_only=lw.metadata_only)
        events = await inner.__aenter__()
        self._inner = inner
        return events

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        inner, self._inner = self._inner, None
        if inner is None:
            return None
        return await inner.__aexit__(exc_type, exc, tb)
