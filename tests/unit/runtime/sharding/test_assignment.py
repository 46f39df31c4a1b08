"""The assignment of virtual shards: balanced, sticky, minimal movement, stable while
shards move, the same on every replica."""

from __future__ import annotations

import random

import pytest

from kubereflector.cache.shards import HASH_SPACE
from kubereflector.runtime.sharding import ShardSpace, assign_shards


def members(rng: random.Random, n: int) -> list[str]:
    return [f"pod-{rng.getrandbits(40):010x}_{rng.getrandbits(32):08x}" for _ in range(n)]


def loads(assignment: dict[int, str], live: list[str]) -> dict[str, int]:
    counts = dict.fromkeys(live, 0)
    for holder in assignment.values():
        counts[holder] += 1
    return counts


def moved(before: dict[int, str], after: dict[int, str]) -> int:
    return sum(1 for shard, member in after.items() if before.get(shard) != member)


@pytest.mark.parametrize("shards", [1, 7, 16, 32, 64, 256])
def test_every_member_gets_its_share_and_one_more_at_most(shards: int) -> None:
    rng = random.Random(shards)
    for _ in range(40):
        live = members(rng, rng.randint(1, 12))
        assignment = assign_shards(live, {}, shards)
        assert sorted(assignment) == list(range(shards))
        counts = loads(assignment, live).values()
        assert max(counts) - min(counts) <= 1
        assert max(counts) == -(-shards // len(live))


def test_no_members_no_assignment() -> None:
    assert assign_shards([], {0: "gone"}, 8) == {}


def test_the_answer_depends_on_what_is_seen_not_on_who_computes_it() -> None:
    rng = random.Random(7)
    live = members(rng, 5)
    holders = {s: rng.choice(live) for s in range(32) if rng.random() < 0.7}
    first = assign_shards(live, holders, 32)
    assert assign_shards(list(reversed(live)), dict(reversed(list(holders.items()))), 32) == first


@pytest.mark.parametrize("shards", [16, 32, 64])
def test_a_join_moves_only_the_newcomers_share(shards: int) -> None:
    rng = random.Random(shards + 1)
    for _ in range(60):
        live = members(rng, rng.randint(1, 7))
        before = assign_shards(live, {}, shards)
        newcomer = members(rng, 1)[0]
        after = assign_shards([*live, newcomer], before, shards)
        changes = [(s, before[s], after[s]) for s in range(shards) if before[s] != after[s]]
        assert all(new == newcomer for _, _, new in changes), "only the newcomer takes shards"
        assert len(changes) == loads(after, [*live, newcomer])[newcomer]
        assert len(changes) <= -(-shards // (len(live) + 1))  # its share, rounded up


@pytest.mark.parametrize("shards", [16, 32, 64])
def test_a_leave_moves_only_the_leavers_shards(shards: int) -> None:
    rng = random.Random(shards + 2)
    for _ in range(60):
        live = members(rng, rng.randint(2, 8))
        before = assign_shards(live, {}, shards)
        gone = rng.choice(live)
        rest = [m for m in live if m != gone]
        after = assign_shards(rest, {s: m for s, m in before.items() if m != gone}, shards)
        for shard in range(shards):
            if before[shard] != gone:
                assert after[shard] == before[shard]
        counts = loads(after, rest).values()
        assert max(counts) - min(counts) <= 1


def test_the_answer_holds_still_while_shards_move_to_it() -> None:
    """Shards are handed over one at a time (freed, then taken): every intermediate
    view must point at the same target, or shards would bounce."""
    rng = random.Random(3)
    for shards in (16, 32, 64):
        for _ in range(15):
            live = members(rng, rng.randint(1, 6))
            current = assign_shards(live, {}, shards)
            live = [*live, *members(rng, rng.randint(1, 2))]
            target = assign_shards(live, current, shards)
            movers = [s for s in range(shards) if current[s] != target[s]]
            rng.shuffle(movers)
            holders: dict[int, str] = dict(current)
            for shard in movers:
                del holders[shard]  # freed
                assert assign_shards(live, holders, shards) == target
                holders[shard] = target[shard]  # taken
                assert assign_shards(live, holders, shards) == target


def test_the_fourth_replica_takes_a_quarter_of_the_keys() -> None:
    """What benchmarks/sharding.py measures, on the assignment alone: with 32 shards,
    a fourth replica joining three takes its ideal quarter of 30,000 uids (within
    the hash's noise) and nothing else moves."""
    space = ShardSpace(32)
    rng = random.Random(4)
    uids = [f"{rng.getrandbits(128):032x}" for _ in range(30_000)]
    three = members(rng, 3)
    before = assign_shards(three, {}, 32)
    fourth = members(rng, 1)[0]
    after = assign_shards([*three, fourth], before, 32)
    moved_keys = sum(1 for uid in uids if before[space.shard_of(uid)] != after[space.shard_of(uid)])
    assert moved_keys <= 1.2 * len(uids) / 4
    assert moved(before, after) == 8


def test_shard_space_cuts_the_hash_space_like_apimachinery() -> None:
    space = ShardSpace(3)
    assert [space.start(i) for i in range(4)] == [
        0,
        HASH_SPACE // 3,
        2 * HASH_SPACE // 3,
        HASH_SPACE,
    ]
    for shard in range(3):
        r = space.range(shard)
        assert space.shard_of_hash(r.start) == shard
        assert space.shard_of_hash(r.end - 1) == shard
    selector = space.selector([0, 1])
    assert selector is not None
    assert len(selector.ranges) == 1
    assert space.selector([]) is None
    with pytest.raises(ValueError, match="shards must be an int from 1 to 1024"):
        ShardSpace(0)
    with pytest.raises(ValueError, match=r"shard 3 is not one of 0\.\.2"):
        space.range(3)
