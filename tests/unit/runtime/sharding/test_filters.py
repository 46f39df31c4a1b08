"""What a sharded replica's caches keep, per use of a resource: reconciled objects by
their uid (server-side where the server can), owned ones by their controller owner's,
watched ones all; dicts and compact objects alike."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kubereflector import ShardFilter, to_compact
from kubereflector.runtime import ShardSpace
from kubereflector.runtime.sharding._filters import Use, controller_owner_uid, shard_filter

SPACE = ShardSpace(8)


def uid(n: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_OID, str(n)))


def obj(n: int, owner: int | None = None, *, controller: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"o{n}", "namespace": "ns", "uid": uid(n)}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "X", "name": "other", "uid": uid(owner + 1000)},
            {
                "apiVersion": "v1",
                "kind": "X",
                "name": f"o{owner}",
                "uid": uid(owner),
                "controller": controller,
            },
        ]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


MINE = frozenset({1, 4, 5})


def in_mine(u: str) -> bool:
    return SPACE.shard_of(u) in MINE


@pytest.mark.parametrize("compact", [False, True], ids=["dict", "compact"])
def test_reconciled_objects_go_by_their_uid_and_the_server_can_filter(compact: bool) -> None:
    f = shard_filter(SPACE, MINE, Use.OWN)
    assert f.selector is not None  # sent as shardSelector
    assert f.scope == MINE
    for n in range(200):
        o = to_compact(obj(n)) if compact else obj(n)
        assert f.keep(o) == in_mine(uid(n))
        assert f.selector.matches(o) == in_mine(uid(n))


@pytest.mark.parametrize("compact", [False, True], ids=["dict", "compact"])
def test_owned_objects_follow_their_controller_owner(compact: bool) -> None:
    f = shard_filter(SPACE, MINE, Use.OWNER)
    assert f.selector is None  # the server hashes an object's own uid, not its owner's
    for n in range(200):
        o = obj(n, owner=n + 1)
        o = to_compact(o) if compact else o
        assert controller_owner_uid(o) == uid(n + 1)
        assert f.keep(o) == in_mine(uid(n + 1))
    assert not f.keep(obj(3))  # no owner: nobody's
    assert not f.keep(obj(3, owner=4, controller=False))


def test_a_resource_both_reconciled_and_owned_keeps_either() -> None:
    f = shard_filter(SPACE, MINE, Use.OWN | Use.OWNER)
    assert f.selector is None
    for n in range(200):
        o = obj(n, owner=n + 1)
        assert f.keep(o) == (in_mine(uid(n)) or in_mine(uid(n + 1)))


def test_watched_resources_are_cached_whole_and_no_shards_means_nothing() -> None:
    everything = shard_filter(SPACE, MINE, Use.ALL | Use.OWN)
    assert isinstance(everything, ShardFilter)
    assert everything.selector is None
    assert everything.keep(obj(1))
    nothing = shard_filter(SPACE, frozenset(), Use.OWN)
    assert not any(nothing.keep(obj(n)) for n in range(50))
    assert nothing.selector is not None  # one hash value: the server sends all but nothing
