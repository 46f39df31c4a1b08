"""Which member of a sharded controller should hold each virtual shard (pure).

:func:`assign_shards` is a function of the live members and of who holds each shard
now, so every replica that sees the same Leases computes the same answer, and
it is:

* **balanced**: every member gets ``shards // members`` shards or one more; the
  members that get one more are chosen by a hash of their identity, never by
  the current state, so the answer does not move while shards are handed over;
* **sticky**: a member keeps the shards it holds, up to its share (the ones it
  ranks highest), so a join moves only the shards the newcomer takes (the
  ideal ``1/(N+1)`` of them, one shard more at most) and a leave moves only the
  leaver's shards;
* **rendezvous-hashed** for the rest: a shard nobody (live) holds goes to the
  member with a share left that ranks it highest (highest random weight,
  ``blake2b(member, shard)``), as multicluster-runtime's sharded coordinator
  places clusters.

A replica never acts on the answer alone: taking a shard goes through its
Lease (see :mod:`kubereflector.runtime.sharding`), so two replicas that
compute different answers from different views of the Leases delay a handoff,
they never both reconcile a shard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping

__all__ = ["assign_shards", "score"]


def score(member: str, shard: int) -> int:
    """How much ``member`` wants ``shard`` (a 64-bit rendezvous weight)."""
    digest = hashlib.blake2b(f"{member}\x00{shard}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _rank(member: str) -> bytes:
    return hashlib.blake2b(member.encode(), digest_size=8, person=b"kr-extra").digest()


def assign_shards(
    members: Collection[str], holders: Mapping[int, str], shards: int
) -> dict[int, str]:
    """The member each of the ``shards`` shards should be held by (see the module
    documentation); ``{}`` without members. ``holders`` maps a shard to the member
    holding it now (absent or not a member: nobody)."""
    live = sorted(set(members))
    if not live:
        return {}
    base, extra = divmod(shards, len(live))
    ranked = sorted(live, key=_rank)
    share = {member: base + (1 if i < extra else 0) for i, member in enumerate(ranked)}
    held: dict[str, list[int]] = {member: [] for member in live}
    for shard, holder in holders.items():
        if holder in held and 0 <= shard < shards:
            held[holder].append(shard)
    out: dict[int, str] = {}
    load = dict.fromkeys(live, 0)
    for member in live:
        ranked_held = sorted((-score(member, s), s) for s in held[member])
        keep = [s for _, s in ranked_held[: share[member]]]
        for shard in keep:
            out[shard] = member
        load[member] = len(keep)
    free = [shard for shard in range(shards) if shard not in out]
    offers = sorted(
        ((score(member, shard), member, shard) for shard in free for member in live),
        reverse=True,
    )
    for _, member, shard in offers:
        if shard not in out and load[member] < share[member]:
            out[shard] = member
            load[member] += 1
    return out
