"""``ResourceClient``: reads and writes of one resource, named as kubectl names it
or by its model.

``client.resource("deploy", namespace="shop")`` gives a :class:`ResourceClient`
for Deployments in ``shop``; the name is resolved through the Client's cached
discovery on the first call (``"deploy"``, ``"deployments.apps"``,
``"apps/v1/deployments"``, a CRD's plural or short name).
``client.resource(Deployment, namespace="shop")`` gives a
``ResourceClient[Deployment]``: typed objects in and out, and no discovery at all
(the model says its group, version, plural and scope). Every path is built by
:meth:`ResourceInfo.api_path <kubereflector.client.ResourceInfo.api_path>` and
:meth:`~kubereflector.client.ResourceInfo.object_path`, which validate the
namespace, the name and the subresource as single path segments.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, Protocol, cast

from ..cache.compact import ObjectMode, _check_object_mode
from ..cache.keys import KubeObject, ModelT
from ..cache.listwatch import ListOptions, ListResult, WatchEvent, WatchStream
from ..errors import ExpiredError, MethodNotAllowedError
from ._models import check_resource, model_info
from .discovery import ResourceInfo
from .paths import validate_name, validate_namespace

if TYPE_CHECKING:
    from .rest import Client

logger = logging.getLogger("kubereflector.client.resource")

__all__ = [
    "APPLY_PATCH_CONTENT_TYPE",
    "PATCH_CONTENT_TYPES",
    "PatchType",
    "PropagationPolicy",
    "ResourceClient",
    "WriteObserver",
]

PatchType = Literal["merge", "json", "strategic"]
"""A patch's format: JSON merge patch (RFC 7386), JSON patch (RFC 6902), or
Kubernetes' strategic merge patch (built-in resources only)."""

PropagationPolicy = Literal["Orphan", "Background", "Foreground"]
"""How a delete treats the object's dependents (``DeleteOptions.propagationPolicy``)."""

PATCH_CONTENT_TYPES: Final[Mapping[str, str]] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
"""The ``Content-Type`` of each :data:`PatchType`."""

APPLY_PATCH_CONTENT_TYPE: Final = "application/apply-patch+yaml"
"""The ``Content-Type`` of a server-side apply (the body is JSON, which is YAML)."""


class WriteObserver(Protocol):
    """Told of each write (create, update, patch, apply, delete; dry runs excepted) a
    :class:`~kubereflector.client.ResourceClient` made and the server accepted: the
    resource, the verb, the object's namespace (``None`` for a cluster-scoped
    resource) and name, and the server's answer (the object, or a ``Status`` for some
    deletes). Called on the Client's event loop before the write returns: it must be
    quick and must not raise."""

    def written(
        self,
        resource: ResourceInfo,
        verb: str,
        namespace: str | None,
        name: str,
        result: Mapping[str, Any],
    ) -> None:
        """A write the server accepted (see the class documentation)."""


class ResourceClient(Generic[ModelT]):
    """Get, list, watch, create, update, patch, apply and delete objects of one
    resource (client-go's typed and dynamic clients, kr8s' ``client.patch(...)``).

    ``resource`` is a :class:`~kubereflector.client.ResourceInfo`, any name
    :meth:`Discovery.resolve <kubereflector.client.Discovery.resolve>` accepts,
    or a model class (``Pod``, ``Deployment``, a custom resource's model: any
    class :func:`kubereflector.models.resource_of` knows). A name is resolved on
    the first call, so an unknown name raises
    :class:`~kubereflector.client.UnknownResourceError` from there; a model is
    resolved here, without a request, and a class that is not a registered model
    raises ``LookupError`` naming it.

    **Types.** A ``ResourceClient[T]`` takes and returns ``T`` objects:
    ``client.resource(Pod)`` is a ``ResourceClient[Pod]``, whose :meth:`create`
    takes a ``Pod`` (a ``Deployment`` there is a type error) and whose
    :meth:`get` returns one. Given a name or a ResourceInfo, it is a
    ``ResourceClient[KubeObject]`` (plain ``ResourceClient``). Types cost nothing
    at run time: nothing is checked or converted.

    **Namespaces.** ``namespace`` (validated here, ``ValueError`` if it is not a
    DNS-1123 label) is where a namespaced resource's objects are read and
    written; a resource given by name ignores it when cluster-scoped, as kubectl
    does, while a cluster-scoped model given a namespace raises ``ValueError``
    here (its scope is known: the namespace is a mistake). A model registered
    with another scope or version than the server's is not asked about (nothing
    is): the server answers for the paths it makes,
    :class:`~kubereflector.NotFoundError` for a path it does not serve,
    :class:`~kubereflector.MethodNotAllowedError` for a create on the
    all-namespaces path of a namespaced resource.
    Without it, :meth:`list` and :meth:`watch` cover all namespaces; the verbs
    that write an object use the object's ``metadata.namespace``; :meth:`get`,
    :meth:`patch` and :meth:`delete` raise ``ValueError`` (before any request),
    as does every verb given a name that is not one path segment.

    **Objects** are Kubernetes JSON as ``dict``\\ s; what is written is never
    modified (a missing ``apiVersion``/``kind`` is filled from discovery, or the
    model, in the copy that is sent; custom resources need them). Returned
    objects are fresh and belong to the caller.

    **Errors.** A verb discovery does not list for the resource raises
    :class:`~kubereflector.MethodNotAllowedError` without a request; the
    server's refusals raise the :mod:`kubereflector.errors` classes:
    :class:`~kubereflector.ConflictError` (a stale ``metadata.resourceVersion``,
    an apply conflict), :class:`~kubereflector.AlreadyExistsError`,
    :class:`~kubereflector.InvalidError` (with its field ``causes``),
    :class:`~kubereflector.BadRequestError`, :class:`~kubereflector.NotFoundError`,
    ... each naming the URL, which names the object.

    **Concurrency.** Use on the Client's event loop (from threads:
    :class:`~kubereflector.client.SyncClient`); calls may run concurrently.
    ``dry_run=True`` on a write asks the server to validate and answer without
    storing anything (``dryRun=All``).
    """

    __slots__ = ("_info", "_name", "client", "namespace")

    def __init__(
        self,
        client: Client,
        resource: str | ResourceInfo | type[ModelT],
        namespace: str | None = None,
    ) -> None:
        check_resource(resource)
        self.client = client
        self.namespace = validate_namespace(namespace) if namespace else None
        if isinstance(resource, type):
            info = model_info(resource)
            if self.namespace and not info.namespaced:
                raise ValueError(
                    f"{resource.__name__} ({info.qualified_name}) is cluster-scoped: "
                    f"it has no namespace {self.namespace!r}"
                )
            resource = info
        self._info = resource if isinstance(resource, ResourceInfo) else None
        self._name = resource if isinstance(resource, str) else str(resource)

    @property
    def resource_name(self) -> str:
        """The resource as given (a name), or ``group/version/plural`` when given a
        ResourceInfo or a model (``apps/v1/deployments``)."""
        return self._name

    async def resource_info(self) -> ResourceInfo:
        """The resource (resolved through the Client's discovery once)."""
        info = self._info
        if info is None:
            info = self._info = await self.client.discovery.resolve(self._name)
        return info

    async def _supporting(self, verb: str) -> ResourceInfo:
        """The resource, if discovery lists ``verb`` for it; else MethodNotAllowedError."""
        info = await self.resource_info()
        if not info.supports(verb):
            raise MethodNotAllowedError(
                405,
                "MethodNotAllowed",
                f"the server does not support {verb!r} on {info.qualified_name} "
                f"(its verbs: {', '.join(info.verbs)})",
                url=self.client.server + info.api_path(self.namespace),
            )
        return info

    # -- reads ----------------------------------------------------------------------

    async def get(self, name: str) -> ModelT:
        """The object ``name`` (:class:`~kubereflector.NotFoundError` if there is none)."""
        info = await self._supporting("get")
        return cast(ModelT, await self.client.get(info.object_path(self.namespace, name)))

    async def list(
        self,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
    ) -> ListResult[ModelT]:
        """Every object (of the namespace, or all): ``items`` and the list's
        ``resource_version``, from which a watch can start.

        ``limit`` is the page size: every page is fetched, all at the list's one
        resourceVersion. Should the continue token expire between pages (410),
        the list starts over in one request without ``limit``, as client-go's
        pager does.
        """
        options = ListOptions(
            label_selector=label_selector or "", field_selector=field_selector or "", limit=limit
        )
        items: list[ModelT] = []
        page = await self.list_page(options)
        while True:
            items.extend(page.items)
            if not page.continue_:
                return ListResult(items, page.resource_version)
            try:
                page = await self.list_page(dataclasses.replace(options, continue_=page.continue_))
            except ExpiredError:
                return await self.list_page(dataclasses.replace(options, limit=None))

    async def list_page(
        self,
        options: ListOptions,
        *,
        metadata_only: bool = False,
        object_mode: ObjectMode = "dict",
    ) -> ListResult[ModelT]:
        """One page of a list with ``options`` as given (see
        :meth:`Client.list <kubereflector.client.Client.list>`): what a
        ListerWatcher's ``list`` does. With ``metadata_only`` the items are
        ``PartialObjectMetadata`` (only ``apiVersion``, ``kind``, ``metadata``), with
        ``object_mode="compact"`` read-only :class:`~kubereflector.CompactObject` s:
        typed as ``T`` still, for reading."""
        info = await self._supporting("list")
        return await self.client.list(
            info.api_path(self.namespace),
            options,
            metadata_only=metadata_only,
            **_mode_keyword(object_mode),
        )

    def watch(
        self,
        options: ListOptions | None = None,
        *,
        metadata_only: bool = False,
        object_mode: ObjectMode = "dict",
    ) -> WatchStream[ModelT]:
        """A watch stream (see :meth:`Client.watch <kubereflector.client.Client.watch>`):
        the stream a Reflector reads, of ``WatchEvent[T]`` s (an ``ERROR`` event's
        object is a ``Status``, see :class:`~kubereflector.WatchEvent`). The resource
        is resolved when it is entered."""
        return _ResolvingWatch(self, options or ListOptions(), metadata_only, object_mode)

    # -- writes ---------------------------------------------------------------------

    async def create(
        self, obj: ModelT, *, dry_run: bool = False, field_manager: str | None = None
    ) -> ModelT:
        """``POST`` a new object; the created object.
        :class:`~kubereflector.AlreadyExistsError` if the name is taken."""
        info = await self._supporting("create")
        body = _body(info, obj)
        namespace = self._namespace_of(info, body, "create")
        path = info.api_path(namespace)
        result = await self.client.create(path, body, params=_write_params(dry_run, field_manager))
        if not dry_run:
            self._written(info, "create", namespace, _name_of(result), result)
        return cast(ModelT, result)

    async def update(
        self, obj: ModelT, *, dry_run: bool = False, field_manager: str | None = None
    ) -> ModelT:
        """``PUT`` the object (named by its ``metadata``): the stored object.

        With ``metadata.resourceVersion`` set, the write happens only if the object
        is still at that version, else :class:`~kubereflector.ConflictError`
        (optimistic concurrency: read, modify, update, and on a conflict start
        over, see :func:`~kubereflector.client.retry_on_conflict`). Without it the
        object is overwritten unconditionally. For resources with a status
        subresource, ``status`` is left as it is (see :meth:`update_status`).
        """
        return await self._put(obj, None, dry_run, field_manager)

    async def update_status(
        self, obj: ModelT, *, dry_run: bool = False, field_manager: str | None = None
    ) -> ModelT:
        """``PUT`` the object's ``status`` subresource: only ``status`` changes.
        Conflicts as :meth:`update`."""
        return await self._put(obj, "status", dry_run, field_manager)

    async def _put(
        self,
        obj: ModelT,
        subresource: str | None,
        dry_run: bool,
        field_manager: str | None,
    ) -> ModelT:
        info = await (self.resource_info() if subresource else self._supporting("update"))
        body = _body(info, obj)
        namespace, name = self._namespace_of(info, body, "update"), _name_of(body)
        path = info.object_path(namespace, name, subresource)
        result = await self.client.update(path, body, params=_write_params(dry_run, field_manager))
        if not dry_run:
            self._written(info, "update", namespace, name, result)
        return cast(ModelT, result)

    async def patch(
        self,
        name: str,
        patch: Any,
        *,
        type: PatchType = "merge",
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> ModelT:
        """``PATCH`` the object ``name`` (or its ``subresource``): the patched object.

        ``patch`` is a mapping (``merge``, ``strategic``) or a list of operations
        (``json``). A ``metadata.resourceVersion`` in a merge patch makes it
        conditional (:class:`~kubereflector.ConflictError` if stale); a JSON
        patch's ``test`` operation likewise fails with
        :class:`~kubereflector.InvalidError`.
        """
        content_type = PATCH_CONTENT_TYPES.get(type)
        if content_type is None:
            raise ValueError(f"type must be one of {', '.join(PATCH_CONTENT_TYPES)}, not {type!r}")
        info = await (self.resource_info() if subresource else self._supporting("patch"))
        path = info.object_path(self.namespace, name, subresource)
        patched = await self.client.patch(
            path, patch, content_type=content_type, params=_write_params(dry_run, field_manager)
        )
        if not dry_run:
            self._written(info, "patch", self.namespace, name, patched)
        return cast(ModelT, patched)

    async def apply(
        self,
        obj: ModelT,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> ModelT:
        """Server-side apply: make ``field_manager`` own exactly the fields ``obj``
        sets, with those values; the resulting object (created if absent).

        Fields this manager set in its previous apply and leaves out now are
        removed (unless another manager owns them too). Changing a field another
        manager owns raises :class:`~kubereflector.ConflictError` whose ``causes``
        name each field and owner, unless ``force`` (then the fields change hands).
        ``obj`` holds only the fields you have an opinion on; a
        ``metadata.resourceVersion`` in it makes the apply conditional. (A model's
        required fields are required here too: for a partial object of a typed
        client, apply through ``client.resource(name)`` or ``typing.cast``.)
        """
        if not isinstance(field_manager, str) or not field_manager:
            raise ValueError("apply needs a field_manager (a non-empty string)")
        info = await (self.resource_info() if subresource else self._supporting("patch"))
        body = _body(info, obj)
        namespace, name = self._namespace_of(info, body, "apply"), _name_of(body)
        path = info.object_path(namespace, name, subresource)
        params = _write_params(dry_run, field_manager)
        if force:
            params["force"] = True
        applied = await self.client.patch(
            path, body, content_type=APPLY_PATCH_CONTENT_TYPE, params=params
        )
        if not dry_run:
            self._written(info, "apply", namespace, name, applied)
        return cast(ModelT, applied)

    async def delete(
        self,
        name: str,
        *,
        propagation_policy: PropagationPolicy | None = None,
        grace_period_seconds: int | None = None,
        preconditions: Mapping[str, str] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """``DELETE`` the object ``name``: the server's answer, the object (with a
        ``deletionTimestamp`` when finalizers or a grace period keep it for now)
        or a ``Status`` (hence a plain ``dict``, whatever the client's type).

        ``preconditions`` (``{"uid": ..., "resourceVersion": ...}``) make the
        delete conditional: :class:`~kubereflector.ConflictError` if the object
        no longer matches.
        """
        info = await self._supporting("delete")
        path = info.object_path(self.namespace, name)
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = int(grace_period_seconds)
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if dry_run:
            options["dryRun"] = ["All"]
        result = await self.client.delete(path, body=options)
        if not dry_run:
            self._written(info, "delete", self.namespace, name, result)
        return result

    # -- helpers --------------------------------------------------------------------

    def _written(
        self, info: ResourceInfo, verb: str, namespace: str | None, name: str, result: Any
    ) -> None:
        """Tell the Client's write observers (see ``Client.write_observers``)."""
        observers = getattr(self.client, "write_observers", None)
        if not observers or not isinstance(result, Mapping):
            return
        where = namespace if info.namespaced else None
        for observer in tuple(observers):
            _tell(observer, info, verb, where, name, result)

    def _namespace_of(self, info: ResourceInfo, body: Mapping[str, Any], verb: str) -> str | None:
        """Where ``body`` is written: the client's namespace, else the object's."""
        if not info.namespaced:
            return None
        namespace = self.namespace or body["metadata"].get("namespace")
        if not namespace:
            raise ValueError(
                f"{info.qualified_name} is namespaced: to {verb} "
                f"{body['metadata'].get('name') or 'an object'!r}, give the ResourceClient "
                "a namespace or the object a metadata.namespace"
            )
        return validate_namespace(namespace)

    @property
    def url(self) -> str:
        """The collection URL requests go to, for logs
        (``https://host:6443/api/v1/namespaces/default/pods``); until discovery has
        resolved the resource, the server and the name asked for."""
        info = self._info
        if info is None:
            return f"{self.client.server} ({self._name})"
        return self.client.server + info.api_path(self.namespace)

    def __repr__(self) -> str:
        where = f", namespace={self.namespace!r}" if self.namespace else ""
        return f"ResourceClient({self._name}{where})"


def _tell(
    observer: Any, info: ResourceInfo, verb: str, namespace: str | None, name: str, result: Any
) -> None:
    """One write observer told of one write; what it raises is logged, not raised."""
    try:
        observer.written(info, verb, namespace, name, result)
    except Exception:
        logger.exception("a write observer failed on the %s of %s", verb, name)


def _body(info: ResourceInfo, obj: KubeObject) -> dict[str, Any]:
    """A shallow copy of ``obj`` to send, with ``apiVersion`` and ``kind`` filled in."""
    if not isinstance(obj, Mapping):
        raise TypeError(f"an object is a mapping (Kubernetes JSON), not {type(obj).__name__}")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise ValueError(f"the {info.kind or 'object'} to write has no metadata mapping")
    body = dict(obj)
    body.setdefault("apiVersion", info.api_version)
    if info.kind:
        body.setdefault("kind", info.kind)
    return body


def _name_of(body: Mapping[str, Any]) -> str:
    name = body["metadata"].get("name")
    if not name:
        raise ValueError(f"the {body.get('kind') or 'object'} to write has no metadata.name")
    return validate_name(name)


def _write_params(dry_run: bool, field_manager: str | None) -> dict[str, str | int | bool]:
    params: dict[str, str | int | bool] = {}
    if dry_run:
        params["dryRun"] = "All"
    if field_manager is not None:
        params["fieldManager"] = field_manager
    return params


def _mode_keyword(object_mode: ObjectMode) -> dict[str, ObjectMode]:
    """The Client's ``object_mode`` keyword, only when not the default (so that a
    Client double without it keeps working in dict mode)."""
    return {} if object_mode == "dict" else {"object_mode": _check_object_mode(object_mode)}


class _ResolvingWatch(contextlib.AbstractAsyncContextManager[AsyncIterator[WatchEvent[ModelT]]]):
    """Resolves the resource, then opens the Client's watch (``keep``: its filter,
    see :meth:`Client.watch <kubereflector.client.Client.watch>`)."""

    __slots__ = ("_inner", "_keep", "_metadata_only", "_mode", "_options", "_resource")

    def __init__(
        self,
        resource: ResourceClient[ModelT],
        options: ListOptions,
        metadata_only: bool,
        object_mode: ObjectMode,
        keep: Callable[[Any], bool] | None = None,
    ) -> None:
        self._resource = resource
        self._options = options
        self._metadata_only = metadata_only
        self._mode: ObjectMode = object_mode
        self._keep = keep
        self._inner: WatchStream | None = None

    async def __aenter__(self) -> AsyncIterator[WatchEvent[ModelT]]:
        resource = self._resource
        info = await resource._supporting("watch")
        extra: dict[str, Any] = dict(_mode_keyword(self._mode))
        if self._keep is not None:  # (only when set: a Client double may not take it)
            extra["keep"] = self._keep
        inner = resource.client.watch(
            info.api_path(resource.namespace),
            self._options,
            metadata_only=self._metadata_only,
            **extra,
        )
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
