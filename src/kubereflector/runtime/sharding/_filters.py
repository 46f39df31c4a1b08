"""What each cache of a sharded replica keeps (pure): a resource's objects in the
replica's shards, by their own uid (the reconciled resource), by their controller
owner's uid (owned resources follow their owner), or all of them (resources
watched through a mapper, which may point anywhere)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from ...cache.compact import CompactObject
from ...cache.keys import get_metadata
from ...cache.sharded_listwatch import ShardFilter
from .space import ShardSpace

__all__ = ["Use", "controller_owner_uid", "shard_filter"]


class Use(enum.Flag):
    """How a sharded replica's controllers use a resource's cache."""

    OWN = enum.auto()
    """Reconciled (``for_``): an object goes where its own uid hashes."""
    OWNER = enum.auto()
    """Owned (``owns``): an object goes where its controller owner's uid hashes."""
    ALL = enum.auto()
    """Watched through a mapper, or read otherwise: every object, everywhere."""


def controller_owner_uid(obj: Any) -> str | None:
    """The uid in ``obj``'s ``ownerReferences`` entry with ``controller: true``, or ``None``
    (quick for dicts and compact objects: a client-side filter calls it per event)."""
    kind = type(obj)
    if kind is CompactObject and obj._metadata is not None:
        refs: Any = obj._metadata._owner_references
    elif kind is dict and type(meta := obj.get("metadata")) is dict:
        refs = meta.get("ownerReferences")
    else:
        meta = get_metadata(obj)
        if meta is None:
            return None
        if isinstance(meta, Mapping):
            refs = meta.get("ownerReferences")
        else:
            refs = getattr(meta, "owner_references", None)
    for ref in refs or ():
        if isinstance(ref, Mapping):
            if ref.get("controller") is True:
                uid = ref.get("uid")
                return uid if isinstance(uid, str) and uid else None
        elif getattr(ref, "controller", None) is True:
            uid = getattr(ref, "uid", None)
            return uid if isinstance(uid, str) and uid else None
    return None


def _own_uid(obj: Any) -> str:
    kind = type(obj)
    if kind is CompactObject and obj._metadata is not None:
        return obj._metadata._uid or ""
    if kind is dict and type(meta := obj.get("metadata")) is dict:
        uid = meta.get("uid")
        return uid if isinstance(uid, str) else ""
    meta = get_metadata(obj)
    if meta is None:
        return ""
    uid = meta.get("uid") if isinstance(meta, Mapping) else getattr(meta, "uid", None)
    return uid if isinstance(uid, str) else ""


def shard_filter(space: ShardSpace, shards: frozenset[int], use: Use) -> ShardFilter:
    """The filter of a cache used as ``use`` on a replica whose caches hold ``shards``.

    Only a cache of reconciled objects alone can be filtered by the API server
    (KEP-5866 hashes an object's own uid); an owner's uid is matched on the client.
    The filter's scope is ``shards`` (``None`` for a cache that keeps everything).
    """
    everything = bool(use & Use.ALL)
    by_owner = bool(use & Use.OWNER)
    by_own = bool(use & Use.OWN)
    if everything:
        return ShardFilter()
    if not shards:
        return ShardFilter.nothing(scope=shards)
    if by_own and not by_owner:
        selector = space.selector(shards)
        assert selector is not None
        return ShardFilter.of(selector, scope=shards)
    shard_of = space.shard_of

    def keep(obj: Any) -> bool:
        if by_own and shard_of(_own_uid(obj)) in shards:
            return True
        if by_owner:
            owner = controller_owner_uid(obj)
            return owner is not None and shard_of(owner) in shards
        return False

    return ShardFilter(keep, None, shards)
