"""``ResourceListWatch``: the ListerWatcher of any resource on an API server."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Generic

from ..cache.compact import ObjectMode, _check_object_mode
from ..cache.keys import ModelT
from ..cache.listwatch import ListOptions, ListResult, WatchStream
from .discovery import ResourceInfo
from .resource import ResourceClient, _ResolvingWatch
from .rest import Client

__all__ = ["ResourceListWatch"]


def _combine(own: str | None, extra: str) -> str:
    """AND two selectors (``,`` joins requirements in label and field selectors)."""
    return ",".join(s for s in (own, extra) if s)


class ResourceListWatch(Generic[ModelT]):
    """Lists and watches one resource over HTTP (client-go's ``NewListWatchFromClient``
    plus the dynamic and metadata clients in one).

    ``resource`` is a :class:`ResourceInfo`, any name
    :meth:`Discovery.resolve` accepts (``"pods"``, ``"deploy"``,
    ``"apps/v1/deployments"``, a CRD's plural or short name), or a model class
    (``Pod``: a ``ResourceListWatch[Pod]``, resolved without discovery, see
    :class:`~kubereflector.client.ResourceClient`); a name is resolved
    through ``client.discovery`` (cached) on first use, so an unknown name
    raises :class:`~kubereflector.client.UnknownResourceError` from the first
    ``list`` or from entering the first ``watch``.

    ``namespace`` limits a namespaced resource to one namespace (``None``: all
    namespaces); it is ignored for a cluster-scoped resource given by name, as
    kubectl does, and refused (``ValueError``) for a cluster-scoped model.
    A namespace that is not a DNS-1123 label raises ``ValueError`` here.
    ``label_selector`` and ``field_selector`` are fixed for this ListerWatcher;
    selectors in a call's ``ListOptions`` are ANDed with them (both sent,
    joined by ``,``). ``metadata_only`` asks the server for
    ``PartialObjectMetadata`` objects: only ``kind``, ``apiVersion`` and
    ``metadata``, a fraction of the memory in a cache. ``object_mode``
    ``"compact"`` decodes objects straight into
    :class:`~kubereflector.CompactObject` s (``"dict"``: plain dicts); an
    informer in compact mode asks for it through :meth:`with_object_mode`.
    :meth:`filtered` gives a copy whose watch streams drop the objects of other
    shards as they are decoded (a :class:`~kubereflector.ShardedListWatch` asks
    for it).

    The requests are :class:`~kubereflector.client.ResourceClient`'s
    (:attr:`resource`): a resource whose discovery lacks the ``list`` or
    ``watch`` verb raises :class:`~kubereflector.MethodNotAllowedError` from that
    call. Every other error is the :class:`~kubereflector.client.Client`'s.
    Objects returned belong to the caller. Use on the Client's event loop; calls
    may run concurrently.
    """

    __slots__ = (
        "field_selector",
        "keep",
        "label_selector",
        "metadata_only",
        "object_mode",
        "resource",
    )

    def __init__(
        self,
        client: Client,
        resource: str | ResourceInfo | type[ModelT],
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        object_mode: ObjectMode = "dict",
    ) -> None:
        self.resource: ResourceClient[ModelT] = ResourceClient(client, resource, namespace)
        self.label_selector = label_selector or ""
        self.field_selector = field_selector or ""
        self.metadata_only = metadata_only
        self.object_mode: ObjectMode = _check_object_mode(object_mode)
        self.keep: Callable[[Any], bool] | None = None
        """The watch streams' filter (see :meth:`filtered`; ``None``: none)."""

    def _clone(self) -> ResourceListWatch[ModelT]:
        clone: ResourceListWatch[ModelT] = ResourceListWatch.__new__(ResourceListWatch)
        clone.resource = self.resource
        clone.label_selector = self.label_selector
        clone.field_selector = self.field_selector
        clone.metadata_only = self.metadata_only
        clone.object_mode = self.object_mode
        clone.keep = self.keep
        return clone

    def with_object_mode(self, object_mode: ObjectMode) -> ResourceListWatch[ModelT]:
        """This ListerWatcher decoding objects in ``object_mode`` (itself if it
        already does; else a copy sharing the client and the resolved resource)."""
        if object_mode == self.object_mode:
            return self
        clone = self._clone()
        clone.object_mode = _check_object_mode(object_mode)
        return clone

    def filtered(self, keep: Callable[[Any], bool] | None) -> ResourceListWatch[ModelT]:
        """This ListerWatcher with watch streams that drop the added, modified and
        deleted objects ``keep`` refuses as they are decoded, before they become
        events (``None``: none dropped); lists are not filtered. Itself if it
        already filters so; else a copy sharing the client and the resource."""
        if keep is self.keep:
            return self
        clone = self._clone()
        clone.keep = keep
        return clone

    @property
    def client(self) -> Client:
        """The Client the requests go through."""
        return self.resource.client

    @property
    def namespace(self) -> str | None:
        """The namespace listed and watched (``None``: all namespaces)."""
        return self.resource.namespace

    async def resource_info(self) -> ResourceInfo:
        """The resource this lists and watches (resolved through discovery once)."""
        return await self.resource.resource_info()

    @property
    def url(self) -> str:
        """The collection URL this lists and watches, for logs
        (``https://host:6443/api/v1/namespaces/default/pods``); until discovery
        has resolved the resource, the server and the name asked for."""
        return self.resource.url

    async def path(self) -> str:
        """The collection path requests go to (``/api/v1/namespaces/default/pods``)."""
        return (await self.resource_info()).api_path(self.namespace)

    def _options(self, options: ListOptions) -> ListOptions:
        label = _combine(self.label_selector, options.label_selector)
        field = _combine(self.field_selector, options.field_selector)
        if label == options.label_selector and field == options.field_selector:
            return options
        return dataclasses.replace(options, label_selector=label, field_selector=field)

    async def list(self, options: ListOptions) -> ListResult[ModelT]:
        """One page of the list (see :meth:`Client.list`)."""
        return await self.resource.list_page(
            self._options(options), metadata_only=self.metadata_only, object_mode=self.object_mode
        )

    def watch(self, options: ListOptions) -> WatchStream[ModelT]:
        """A watch stream (see :meth:`Client.watch`); resolution happens on entering."""
        if self.keep is not None:
            return _ResolvingWatch(
                self.resource,
                self._options(options),
                self.metadata_only,
                self.object_mode,
                self.keep,
            )
        return self.resource.watch(
            self._options(options), metadata_only=self.metadata_only, object_mode=self.object_mode
        )

    def __repr__(self) -> str:
        parts = [self.resource.resource_name]
        if self.namespace:
            parts.append(f"namespace={self.namespace!r}")
        if self.label_selector:
            parts.append(f"label_selector={self.label_selector!r}")
        if self.field_selector:
            parts.append(f"field_selector={self.field_selector!r}")
        if self.metadata_only:
            parts.append("metadata_only=True")
        if self.object_mode != "dict":
            parts.append(f"object_mode={self.object_mode!r}")
        return f"ResourceListWatch({', '.join(parts)})"
