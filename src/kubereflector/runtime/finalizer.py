"""The finalizer helper (kube-rs's ``finalizer()``): cleanup that must happen before an
object may go.

One call at the top of a reconcile decides, from the object's state, which of
four things to do:

=====================  ===================  ==========================================
finalizer on object?   being deleted?       what happens
=====================  ===================  ==========================================
no                     no                   add the finalizer (a JSON patch), then
                                            ``apply`` the object as patched, return its
                                            result
yes                    no                   ``apply(obj)``, return its result
yes                    yes                  ``cleanup(obj)``; if it returned (did not
                                            raise), remove the finalizer, return its
                                            result
no                     yes                  nothing to do: return ``None``
=====================  ===================  ==========================================

Guarantee: once ``apply`` has run for an object, the object is not removed from
the API server before a ``cleanup`` of it returned without raising (if cleanup
raises, the finalizer stays, the error propagates and the reconcile is retried
with backoff). Both functions must be idempotent: they may run again after a
restart, a conflict or a failure, and ``cleanup`` must cope with ``apply`` never
having run.

The patches test the current finalizers before changing them (as kube-rs
does), so a concurrent change by another controller fails with a 422/409
instead of adding the finalizer twice or removing someone else's; the error
propagates and the retry sees the new state. Errors of ``apply``, ``cleanup``
and the patches propagate unchanged.

The objects are dicts shaped like Kubernetes JSON or typed models
(:mod:`kubereflector.models`): ``apply`` and ``cleanup`` get the type of ``obj``.

The ``add`` step goes on to ``apply`` in the same call rather than waiting for the
patch to queue another reconcile: a controller does not reconcile a request again for
the echoes of its own writes (see :class:`~kubereflector.runtime.ControllerOptions`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol, TypeVar, cast

from ..cache.keys import _meta_field, get_metadata, get_name

__all__ = [
    "FinalizerStep",
    "finalizer",
    "finalizer_step",
    "finalizer_sync",
    "remove_finalizer_patch",
]

T = TypeVar("T")
ObjT = TypeVar("ObjT", bound=Mapping[str, Any])

FinalizerStep = Literal["add", "apply", "cleanup", "done"]
"""Where an object stands with a finalizer (see :func:`finalizer_step`): ``add`` (not there
yet, the object is not being deleted), ``apply`` (there, the object lives), ``cleanup``
(there, the object is being deleted) or ``done`` (gone from an object being deleted)."""


class _AsyncPatcher(Protocol):
    """What the helper needs of a :class:`~kubereflector.client.ResourceClient`."""

    async def patch(self, name: str, patch: Any, *, type: Literal["json"]) -> Any: ...


class _SyncPatcher(Protocol):
    """What the helper needs of a :class:`~kubereflector.client.SyncResourceClient`."""

    def patch(self, name: str, patch: Any, *, type: Literal["json"]) -> Any: ...


def _meta_value(obj: Any, json_name: str, attr_name: str) -> Any:
    return _meta_field(get_metadata(obj), json_name, attr_name)


def remove_finalizer_patch(obj: Any, name: str) -> list[dict[str, Any]] | None:
    """The JSON patch removing finalizer ``name`` from ``obj`` (testing first that
    it is still where ``obj`` has it), or ``None`` if ``obj`` does not have it.
    For a controller that lets go of an object it no longer manages."""
    finalizers = list(_meta_value(obj, "finalizers", "finalizers") or [])
    if name not in finalizers:
        return None
    path = f"/metadata/finalizers/{finalizers.index(name)}"
    return [{"op": "test", "path": path, "value": name}, {"op": "remove", "path": path}]


def finalizer_step(obj: Any, name: str) -> tuple[FinalizerStep, list[dict[str, Any]] | None]:
    """The pure decision: which step the object is at, and the JSON patch to send
    after (``add``) or after a successful cleanup (``cleanup``); ``None`` for the
    other steps. Raises ``ValueError`` for an object without a name or an empty
    finalizer name."""
    if not isinstance(name, str) or not name:
        raise ValueError("a finalizer needs a non-empty name")
    if not get_name(obj):
        raise ValueError("the finalizer helper needs an object with metadata.name")
    finalizers = list(_meta_value(obj, "finalizers", "finalizers") or [])
    deleting = bool(_meta_value(obj, "deletionTimestamp", "deletion_timestamp"))
    if name in finalizers:
        if not deleting:
            return "apply", None
        return "cleanup", remove_finalizer_patch(obj, name)
    if deleting:
        return "done", None
    if not finalizers:
        return "add", [
            {"op": "test", "path": "/metadata/finalizers", "value": None},
            {"op": "add", "path": "/metadata/finalizers", "value": [name]},
        ]
    return "add", [
        {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
        {"op": "add", "path": "/metadata/finalizers/-", "value": name},
    ]


def _patched(obj: ObjT, answer: Any, name: str) -> ObjT:
    """The object as the add patch left it: the server's answer when it is the object
    (a real client's), else ``obj`` with the finalizer added (a test double's)."""
    if isinstance(answer, Mapping) and isinstance(answer.get("metadata"), Mapping):
        return cast("ObjT", answer)
    copied: dict[str, Any] = dict(obj)
    meta = dict(copied.get("metadata") or {})
    meta["finalizers"] = [*(meta.get("finalizers") or ()), name]
    copied["metadata"] = meta
    return cast("ObjT", copied)


async def finalizer(
    api: _AsyncPatcher,
    name: str,
    obj: ObjT,
    *,
    apply: Callable[[ObjT], Awaitable[T]],
    cleanup: Callable[[ObjT], Awaitable[T]],
) -> T | None:
    """Run ``apply`` or ``cleanup`` for ``obj`` while keeping finalizer ``name`` on it
    (see the module documentation). ``api``: the
    :class:`~kubereflector.client.ResourceClient` of ``obj``'s resource and
    namespace; ``apply``/``cleanup``: coroutine functions taking the object and
    returning the reconcile's result."""
    step, patch = finalizer_step(obj, name)
    object_name = get_name(obj)
    assert object_name is not None
    if step == "add":
        patched = await api.patch(object_name, patch, type="json")
        return await apply(_patched(obj, patched, name))
    if step == "apply":
        return await apply(obj)
    if step == "cleanup":
        result = await cleanup(obj)
        await api.patch(object_name, patch, type="json")
        return result
    return None


def finalizer_sync(
    api: _SyncPatcher,
    name: str,
    obj: ObjT,
    *,
    apply: Callable[[ObjT], T],
    cleanup: Callable[[ObjT], T],
) -> T | None:
    """:func:`finalizer` for plain-function reconcilers: ``api`` is the blocking
    twin of the resource client (``SyncClient.resource(...)``), ``apply`` and
    ``cleanup`` plain functions."""
    for fn in (apply, cleanup):
        if inspect.iscoroutinefunction(fn):
            raise TypeError("finalizer_sync takes plain functions; await finalizer() instead")
    step, patch = finalizer_step(obj, name)
    object_name = get_name(obj)
    assert object_name is not None
    if step == "add":
        patched = api.patch(object_name, patch, type="json")
        return apply(_patched(obj, patched, name))
    if step == "apply":
        return apply(obj)
    if step == "cleanup":
        result = cleanup(obj)
        api.patch(object_name, patch, type="json")
        return result
    return None
