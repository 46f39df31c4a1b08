"""Ready-made transforms for :meth:`SharedIndexInformer.set_transform
<kubereflector.SharedIndexInformer.set_transform>` (and the ``transform`` of
:func:`~kubereflector.new_informer`).

A transform runs once per object as it enters the informer's queue, before the
cache and the handlers see it; cutting what a controller never reads there
shrinks the cache. Each transform here is pure (the input is never mutated, so
objects shared with a ListerWatcher stay intact), idempotent, and leaves a
:class:`~kubereflector.DeletedFinalStateUnknown` alone.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, TypeVar, overload

from .compact import CompactObject
from .delta_fifo import TransformFunc
from .keys import DeletedFinalStateUnknown, KubeObject, get_metadata

__all__ = ["compose", "strip_managed_fields"]

_O = TypeVar("_O")


@overload
def strip_managed_fields(obj: KubeObject) -> KubeObject: ...


@overload
def strip_managed_fields(obj: _O) -> _O: ...


def strip_managed_fields(obj: Any) -> Any:
    """``obj`` without ``metadata.managedFields`` (server-side apply bookkeeping,
    often the largest part of an object, which controllers rarely read).

    A mapping comes back as a new dict with a new ``metadata`` (other values are
    shared with the input); an object with a ``metadata`` attribute (official
    client models, ``managed_fields``) comes back as a shallow copy of its own
    type, a :class:`~kubereflector.CompactObject` as a compact object without
    them. An object without managed fields, and a
    :class:`~kubereflector.DeletedFinalStateUnknown`, is returned as it is.
    """
    if type(obj) is DeletedFinalStateUnknown:
        return obj
    if type(obj) is CompactObject:
        return obj.without_managed_fields()
    meta = get_metadata(obj)
    if meta is None:
        return obj
    if isinstance(meta, Mapping):
        if "managedFields" not in meta:
            return obj
        stripped = {k: v for k, v in meta.items() if k != "managedFields"}
        if isinstance(obj, Mapping):
            return {**obj, "metadata": stripped}
        clone = copy.copy(obj)
        clone.metadata = stripped
        return clone
    if getattr(meta, "managed_fields", None) is None:
        return obj
    new_meta: Any = copy.copy(meta)
    new_meta.managed_fields = None
    clone = copy.copy(obj)
    clone.metadata = new_meta
    return clone


def compose(*transforms: TransformFunc) -> TransformFunc:
    """One transform applying ``transforms`` left to right (no transform: identity).

    The result is idempotent when each part is, and raises what a part raises.
    """
    for transform in transforms:
        if not callable(transform):
            raise TypeError(f"a transform is a callable, not {type(transform).__name__}")
    if len(transforms) == 1:
        return transforms[0]
    parts = tuple(transforms)

    def composed(obj: Any) -> Any:
        for transform in parts:
            obj = transform(obj)
        return obj

    composed.__qualname__ = f"compose({', '.join(_name(t) for t in parts)})"
    return composed


def _name(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)
