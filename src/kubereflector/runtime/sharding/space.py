"""The fixed set of virtual shards a sharded controller splits its objects into (pure).

:class:`ShardSpace` cuts the 64-bit FNV-1a hash space of KEP-5866 (see
:mod:`kubereflector.cache.shards`) into ``count`` equal ranges, as
apimachinery's ``NewShardRangeSelector`` does: shard ``i`` holds the hashes
``[i * 2^64 // count, (i + 1) * 2^64 // count)``. An object belongs to the shard
its ``metadata.uid`` hashes into, so a replica holding some shards can ask the
API server for exactly their objects (one ``shardRange`` per run of adjacent
shards). Immutable, thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ...cache.shards import HASH_SPACE, ShardRange, ShardSelector, fnv1a_64

__all__ = ["MAX_SHARDS", "ShardSpace"]

MAX_SHARDS: Final = 1024
"""The most virtual shards a controller may have (each has a Lease)."""


@dataclass(frozen=True, slots=True)
class ShardSpace:
    """``count`` virtual shards over the hash space of objects' uids.

    Raises ``ValueError`` unless ``1 <= count <= MAX_SHARDS``.
    """

    count: int

    def __post_init__(self) -> None:
        count = self.count
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SHARDS:
            raise ValueError(f"shards must be an int from 1 to {MAX_SHARDS}, not {count!r}")

    def start(self, shard: int) -> int:
        """The first hash of ``shard`` (``count`` gives the end of the space)."""
        return shard * HASH_SPACE // self.count

    def range(self, shard: int) -> ShardRange:
        """The hashes of ``shard``. Raises ``ValueError`` for a shard not in the space."""
        if not 0 <= shard < self.count:
            raise ValueError(f"shard {shard} is not one of 0..{self.count - 1}")
        return ShardRange(self.start(shard), self.start(shard + 1))

    def shard_of_hash(self, hash_value: int) -> int:
        """The shard holding ``hash_value`` (``0 <= hash_value < 2**64``)."""
        shard = (hash_value * self.count) >> 64
        if shard + 1 < self.count and hash_value >= self.start(shard + 1):
            shard += 1  # start() rounds down: the boundary hash belongs to the next shard
        return shard

    def shard_of(self, uid: str) -> int:
        """The shard of the object whose ``metadata.uid`` is ``uid``."""
        return self.shard_of_hash(fnv1a_64(uid))

    def selector(self, shards: Iterable[int]) -> ShardSelector | None:
        """The KEP-5866 selector of ``shards`` (adjacent shards in one range); ``None``
        for no shard."""
        ranges = [self.range(shard) for shard in set(shards)]
        return ShardSelector.covering(ranges) if ranges else None
