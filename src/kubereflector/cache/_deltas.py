"""Applying popped Deltas to an informer's cache, and the notifications they make
(private; client-go's ``processDeltas``), shared by the simple informers of
:mod:`kubereflector.cache.controller` and the SharedIndexInformer."""

from __future__ import annotations

import logging
from typing import Any

from ._listener import ADD, DELETE, UPDATE, Notification
from .delta_fifo import DeltaType, ReplacedAllInfo
from .keys import DeletedFinalStateUnknown, T, deletion_handling_meta_namespace_key_func
from .store import Cache

__all__ = ["apply_deltas", "describe_item"]

logger = logging.getLogger("kubereflector.controller")


def describe_item(item: Any) -> str:
    """The key of what a queue popped (its newest delta's object), for log lines."""
    obj = item
    if isinstance(item, list) and item:
        obj = item[-1]
    obj = getattr(obj, "object", obj)
    try:
        return repr(deletion_handling_meta_namespace_key_func(obj))
    except Exception:
        return f"an item of type {type(item).__name__}"


def apply_deltas(
    cache: Cache[T],
    deltas: list[Any],  # Delta[T]s; only a Deleted one may hold a tombstone, which mypy cannot tell
    is_in_initial_list: bool,
    notifications: list[Notification],
    name: str,
) -> int:
    """Apply ``deltas`` (oldest first) to ``cache`` and append one notification
    per change to ``notifications`` (client-go's ``processDeltas``); return how
    many of them are adds of the initial list.

    Sync, Replaced, Added and Updated store the object: ``(UPDATE, old, new)``
    if the cache held it, else ``(ADD, new, is_in_initial_list)``. Deleted
    removes it: ``(DELETE, obj, None)``. ReplacedAll swaps the whole content
    (see :func:`_apply_replaced_all`); SyncAll re-announces every cached object
    as ``(UPDATE, obj, obj)``. A delta the cache refuses (an index function
    raising) is logged with its key and leaves no notification; the others are
    applied all the same.
    """
    deleted = DeltaType.DELETED
    replaced_all = DeltaType.REPLACED_ALL
    sync_all = DeltaType.SYNC_ALL
    append = notifications.append
    swap = cache.swap
    initial_adds = 0
    for delta_type, obj in deltas:
        try:
            if delta_type is deleted:
                cache.delete(obj)
                append((DELETE, obj, None))
                continue
            if delta_type is replaced_all:
                initial_adds += _apply_replaced_all(
                    cache, obj, is_in_initial_list, notifications, name
                )
                continue
            if delta_type is sync_all:
                notifications.extend([(UPDATE, cached, cached) for cached in cache.list()])
                continue
            old = swap(obj)
            if old is not None:
                append((UPDATE, old, obj))
            else:
                append((ADD, obj, is_in_initial_list))
                initial_adds += is_in_initial_list
        except Exception:
            logger.exception(
                "%s: could not apply a %s delta of %s", name, delta_type, describe_item(obj)
            )
    return initial_adds


def _apply_replaced_all(
    cache: Cache[T],
    info: ReplacedAllInfo[T],
    is_in_initial_list: bool,
    notifications: list[Notification],
    name: str,
) -> int:
    """Make ``info.objects`` the whole content of ``cache`` in one swap, then
    append the notifications (client-go's ``processReplacedAllInfo``): first
    ``(DELETE, DeletedFinalStateUnknown(key, old), None)`` for each key that is
    gone, then, in list order, ``(UPDATE, old, new)`` for a key the cache held
    and ``(ADD, new, is_in_initial_list)`` for a new one. The cache holds the
    whole new list before any handler hears of it. Objects without a key or
    refused by an index function are logged and left out; the rest is applied.
    Returns how many of the notifications are adds of the initial list.
    """
    try:
        replaced, removed = cache.swap_all(info.objects, info.resource_version)
    except Exception:
        objects = _acceptable(cache, info.objects, name)
        replaced, removed = cache.swap_all(objects, info.resource_version)
    notifications.extend(
        [(DELETE, DeletedFinalStateUnknown(key, old), None) for key, old in removed]
    )
    notifications.extend(
        [
            (ADD, new, is_in_initial_list) if old is None else (UPDATE, old, new)
            for new, old in replaced
        ]
    )
    if not is_in_initial_list:
        return 0
    return sum(1 for _new, old in replaced if old is None)


def _acceptable(cache: Cache[T], objects: list[T], name: str) -> list[T]:
    """The objects the cache accepts: each one whose key and index values can be
    computed (the others are logged)."""
    key_func = cache.key_func
    indexers = cache.get_indexers()
    accepted = []
    for obj in objects:
        try:
            key_func(obj)
            for index_func in indexers.values():
                index_func(obj)
        except Exception:
            logger.exception("%s: could not apply %s of a relist", name, describe_item(obj))
            continue
        accepted.append(obj)
    return accepted


# -- Controller -------------------------------------------------------------------------
