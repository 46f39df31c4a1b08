"""The writes of a reconcile: :func:`apply` (server-side apply, the normal write),
:func:`create_or_update` and :func:`create_or_patch` (controller-runtime's
``controllerutil``), each with a blocking twin for plain-function reconcilers.

* :func:`apply` sends the fields the reconcile has an opinion on; the API server
  merges them, owns them for the field manager (the controller's name by default)
  and removes those it set before and leaves out now. No read first, no conflict
  with other writers' fields, no resourceVersion to get right: the write Kubernetes
  recommends for controllers (with ``force=True``, also the default here, since a
  controller cannot resolve a conflict by hand).
* :func:`create_or_update` reads the object (from ``cache`` if given, else from the
  API server), lets ``mutate`` set what the reconcile manages, and creates it, updates
  it (a ``PUT`` conditional on the resourceVersion read: a stale read fails with a
  409 and the reconcile is retried) or leaves it alone when nothing changed.
* :func:`create_or_patch` does the same with merge patches of what changed: one of
  the object and, when ``status`` changed, one of the ``status`` subresource.

Both return an :class:`OperationResult` and the object as the server last returned
it (the object read when unchanged). ``mutate`` gets the existing object (a copy of
it) or, when there is none, a copy of ``obj``: write it so that it works on both
(set the fields you manage; leave the others alone). It must not change the name or
the namespace (``ValueError``). Errors of the reads and writes propagate unchanged.

``api`` is the :class:`~kubereflector.client.ResourceClient` (or, for the ``_sync``
twins, the :class:`~kubereflector.client.SyncResourceClient`) of the object's
resource in its namespace. Inside a :class:`~kubereflector.runtime.Manager`, writes
through its client are remembered, so its cache reads in a later reconcile see them
(read-your-own-writes).
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, TypeVar, cast

from ..errors import NotFoundError
from ._context import current_reconcile

__all__ = [
    "OperationResult",
    "apply",
    "apply_sync",
    "create_or_patch",
    "create_or_patch_sync",
    "create_or_update",
    "create_or_update_sync",
    "default_field_manager",
    "merge_patch",
]

ObjT = TypeVar("ObjT", bound=Mapping[str, Any])


class OperationResult(str, enum.Enum):
    """What :func:`create_or_update` or :func:`create_or_patch` did (controller-runtime's
    ``OperationResult``; each value completes "the object has been ...")."""

    NONE = "unchanged"
    """Nothing: ``mutate`` changed nothing."""
    CREATED = "created"
    """The object did not exist and was created."""
    UPDATED = "updated"
    """The object (not its status) was updated or patched."""
    UPDATED_STATUS = "updatedStatus"
    """The object and its status were patched (:func:`create_or_patch` only)."""
    UPDATED_STATUS_ONLY = "updatedStatusOnly"
    """Only the status was patched (:func:`create_or_patch` only)."""

    def __str__(self) -> str:
        return self.value


class _Reader(Protocol):
    """A cache view that gets objects by name (a NamespaceLister, a Lister of a
    cluster-scoped resource)."""

    def get(self, name: str) -> Any: ...


class _AsyncWriter(Protocol[ObjT]):
    """What the helpers need of a :class:`~kubereflector.client.ResourceClient`."""

    async def get(self, name: str) -> ObjT: ...

    async def create(
        self, obj: ObjT, *, dry_run: bool = ..., field_manager: str | None = ...
    ) -> ObjT: ...

    async def update(
        self, obj: ObjT, *, dry_run: bool = ..., field_manager: str | None = ...
    ) -> ObjT: ...

    async def patch(
        self,
        name: str,
        patch: Any,
        *,
        type: Literal["merge"],
        subresource: str | None = ...,
        dry_run: bool = ...,
        field_manager: str | None = ...,
    ) -> ObjT: ...

    async def apply(
        self,
        obj: ObjT,
        *,
        field_manager: str,
        force: bool = ...,
        subresource: str | None = ...,
        dry_run: bool = ...,
    ) -> ObjT: ...


class _SyncWriter(Protocol[ObjT]):
    """What the helpers need of a :class:`~kubereflector.client.SyncResourceClient`."""

    def get(self, name: str) -> ObjT: ...

    def create(
        self, obj: ObjT, *, dry_run: bool = ..., field_manager: str | None = ...
    ) -> ObjT: ...

    def update(
        self, obj: ObjT, *, dry_run: bool = ..., field_manager: str | None = ...
    ) -> ObjT: ...

    def patch(
        self,
        name: str,
        patch: Any,
        *,
        type: Literal["merge"],
        subresource: str | None = ...,
        dry_run: bool = ...,
        field_manager: str | None = ...,
    ) -> ObjT: ...

    def apply(
        self,
        obj: ObjT,
        *,
        field_manager: str,
        force: bool = ...,
        subresource: str | None = ...,
        dry_run: bool = ...,
    ) -> ObjT: ...


# -- field managers ---------------------------------------------------------------------


def default_field_manager(field_manager: str | None = None) -> str:
    """``field_manager`` if given, else the name of the controller whose reconcile is
    running. Raises ``ValueError`` outside a reconcile without one."""
    if field_manager is not None:
        if not isinstance(field_manager, str) or not field_manager:
            raise ValueError("field_manager must be a non-empty string")
        return field_manager
    running = current_reconcile()
    if running is None:
        raise ValueError(
            "apply needs a field_manager outside a reconcile (inside one it defaults to "
            "the controller's name)"
        )
    return running.controller


async def apply(
    api: _AsyncWriter[ObjT],
    obj: ObjT,
    *,
    field_manager: str | None = None,
    force: bool = True,
    subresource: str | None = None,
) -> ObjT:
    """Server-side apply ``obj`` (the fields you have an opinion on, with ``apiVersion``,
    ``kind`` and ``metadata.name``); the object as stored, created if absent.

    ``field_manager`` defaults to the running controller's name (``ValueError`` outside
    a reconcile without one); ``force`` (default ``True``, as Kubernetes advises for
    controllers) takes over fields another manager set instead of failing with a
    :class:`~kubereflector.ConflictError`; ``subresource="status"`` applies the
    status."""
    manager = default_field_manager(field_manager)
    result = await api.apply(obj, field_manager=manager, force=force, subresource=subresource)
    return result


def apply_sync(
    api: _SyncWriter[ObjT],
    obj: ObjT,
    *,
    field_manager: str | None = None,
    force: bool = True,
    subresource: str | None = None,
) -> ObjT:
    """:func:`apply` for plain-function reconcilers (``api``: a
    :class:`~kubereflector.client.SyncResourceClient`); blocks."""
    manager = default_field_manager(field_manager)
    result = api.apply(obj, field_manager=manager, force=force, subresource=subresource)
    return result


# -- the pure parts ----------------------------------------------------------------------


def _identity(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise ValueError("the object needs metadata.name (and its namespace, if namespaced)")
    return meta.get("namespace") or "", meta["name"]


def _plain(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``obj`` as a ``dict`` (of a compact object too)."""
    copied = copy.deepcopy(obj)
    return copied if type(copied) is dict else dict(copied)


def _mutated(obj: Mapping[str, Any], mutate: Callable[[Any], object]) -> dict[str, Any]:
    """A deep copy of ``obj`` after ``mutate``; ValueError if it moved the object."""
    before = _identity(obj)
    changed = _plain(obj)
    if mutate(changed) is not None:
        raise TypeError("mutate changes the object it is given in place and returns None")
    if _identity(changed) != before:
        raise ValueError("mutate must not change the object's name or namespace")
    return changed


def _cached(cache: _Reader | None, name: str) -> Mapping[str, Any] | None:
    return None if cache is None else cast("Mapping[str, Any] | None", cache.get(name))


def merge_patch(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) turning ``before`` into ``after``: changed and
    new keys with their values (nested mappings as patches of their own), removed keys
    as ``None``; lists are replaced whole."""
    patch: dict[str, Any] = {}
    for key in before:
        if key not in after:
            patch[key] = None
    for key, value in after.items():
        if key not in before:
            patch[key] = value
            continue
        old = before[key]
        if old == value:
            continue
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            patch[key] = merge_patch(old, value)
        else:
            patch[key] = value
    return patch


def _without_status(obj: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    rest = dict(obj)
    return rest, rest.pop("status", None)


def _patches(
    existing: Mapping[str, Any], wanted: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The merge patch of the object without status, and of the status (``None``: no
    change)."""
    before, before_status = _without_status(existing)
    after, after_status = _without_status(wanted)
    object_patch = merge_patch(before, after) if before != after else None
    status_patch = None
    if before_status != after_status:
        if isinstance(before_status, Mapping) and isinstance(after_status, Mapping):
            status_patch = {"status": merge_patch(before_status, after_status)}
        else:
            status_patch = {"status": after_status}
    return object_patch, status_patch


def _patch_result(object_patched: bool, status_patched: bool) -> OperationResult:
    if object_patched:
        return OperationResult.UPDATED_STATUS if status_patched else OperationResult.UPDATED
    return OperationResult.UPDATED_STATUS_ONLY if status_patched else OperationResult.NONE


# -- create or update ----------------------------------------------------------------------


async def create_or_update(
    api: _AsyncWriter[ObjT],
    obj: ObjT,
    mutate: Callable[[ObjT], None],
    *,
    cache: _Reader | None = None,
    field_manager: str | None = None,
) -> tuple[OperationResult, ObjT]:
    """Create the object or update it to what ``mutate`` makes of it (see the module
    documentation): ``(result, object)``. ``cache`` (e.g.
    ``manager.lister_for("deployments").namespaced(ns)``) is read instead of the API
    server; ``field_manager`` names the writer. Changes ``mutate`` makes to ``status``
    are not written by the update (a status subresource ignores them; use
    :func:`create_or_patch`)."""
    _, name = _identity(obj)
    existing = _cached(cache, name)
    if existing is None and cache is None:
        try:
            existing = await api.get(name)
        except NotFoundError:
            existing = None
    if existing is None:
        created = await api.create(cast("ObjT", _mutated(obj, mutate)), field_manager=field_manager)
        return OperationResult.CREATED, created
    current = _plain(existing)
    wanted = _mutated(current, mutate)
    if wanted == current:
        return OperationResult.NONE, cast("ObjT", existing)
    updated = await api.update(cast("ObjT", wanted), field_manager=field_manager)
    return OperationResult.UPDATED, updated


def create_or_update_sync(
    api: _SyncWriter[ObjT],
    obj: ObjT,
    mutate: Callable[[ObjT], None],
    *,
    cache: _Reader | None = None,
    field_manager: str | None = None,
) -> tuple[OperationResult, ObjT]:
    """:func:`create_or_update` for plain-function reconcilers (``api``: a
    :class:`~kubereflector.client.SyncResourceClient`); blocks."""
    _, name = _identity(obj)
    existing = _cached(cache, name)
    if existing is None and cache is None:
        try:
            existing = api.get(name)
        except NotFoundError:
            existing = None
    if existing is None:
        created = api.create(cast("ObjT", _mutated(obj, mutate)), field_manager=field_manager)
        return OperationResult.CREATED, created
    current = _plain(existing)
    wanted = _mutated(current, mutate)
    if wanted == current:
        return OperationResult.NONE, cast("ObjT", existing)
    updated = api.update(cast("ObjT", wanted), field_manager=field_manager)
    return OperationResult.UPDATED, updated


# -- create or patch -------------------------------------------------------------------------


async def create_or_patch(
    api: _AsyncWriter[ObjT],
    obj: ObjT,
    mutate: Callable[[ObjT], None],
    *,
    cache: _Reader | None = None,
    field_manager: str | None = None,
) -> tuple[OperationResult, ObjT]:
    """Create the object or patch it to what ``mutate`` makes of it (see the module
    documentation): one merge patch of what changed outside ``status``, and one of the
    ``status`` subresource if ``status`` changed; ``(result, object)``. A created
    object's ``status`` is not written (the API server ignores it on create): the
    next reconcile patches it."""
    _, name = _identity(obj)
    existing = _cached(cache, name)
    if existing is None and cache is None:
        try:
            existing = await api.get(name)
        except NotFoundError:
            existing = None
    if existing is None:
        created = await api.create(cast("ObjT", _mutated(obj, mutate)), field_manager=field_manager)
        return OperationResult.CREATED, created
    current = _plain(existing)
    object_patch, status_patch = _patches(current, _mutated(current, mutate))
    result: Mapping[str, Any] = existing
    if object_patch is not None:
        result = await api.patch(name, object_patch, type="merge", field_manager=field_manager)
    if status_patch is not None:
        result = await api.patch(
            name, status_patch, type="merge", subresource="status", field_manager=field_manager
        )
    return _patch_result(object_patch is not None, status_patch is not None), cast("ObjT", result)


def create_or_patch_sync(
    api: _SyncWriter[ObjT],
    obj: ObjT,
    mutate: Callable[[ObjT], None],
    *,
    cache: _Reader | None = None,
    field_manager: str | None = None,
) -> tuple[OperationResult, ObjT]:
    """:func:`create_or_patch` for plain-function reconcilers (``api``: a
    :class:`~kubereflector.client.SyncResourceClient`); blocks."""
    _, name = _identity(obj)
    existing = _cached(cache, name)
    if existing is None and cache is None:
        try:
            existing = api.get(name)
        except NotFoundError:
            existing = None
    if existing is None:
        created = api.create(cast("ObjT", _mutated(obj, mutate)), field_manager=field_manager)
        return OperationResult.CREATED, created
    current = _plain(existing)
    object_patch, status_patch = _patches(current, _mutated(current, mutate))
    result: Mapping[str, Any] = existing
    if object_patch is not None:
        result = api.patch(name, object_patch, type="merge", field_manager=field_manager)
    if status_patch is not None:
        result = api.patch(
            name, status_patch, type="merge", subresource="status", field_manager=field_manager
        )
    return _patch_result(object_patch is not None, status_patch is not None), cast("ObjT", result)
