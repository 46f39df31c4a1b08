"""Who is a member of a sharded controller and who holds which shard, as one replica
sees it (pure: fed with listed Leases and the time, no I/O).

Liveness is judged the way client-go's leader election judges a Lease: by
observation, never by the timestamps written in it. :class:`Observer` notes on
this replica's own monotonic clock when it last saw each Lease *change*; a member
whose Lease has not changed for its ``leaseDurationSeconds`` (or was released:
holder ``""``) is no member any more. Clock skew between nodes does not matter;
a Lease seen for the first time counts as just renewed, so a replica that starts
waits a whole duration before it takes the shards of a member it never saw
renew.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .leases import LeaseRecord

__all__ = ["Observer"]


@dataclass(slots=True)
class _Seen:
    record: LeaseRecord
    lease: dict[str, Any]
    changed_at: float


@dataclass(slots=True)
class Observer:
    """The Leases of one sharded controller as last listed, with when each changed.

    Used from one event loop.
    """

    shards: int
    """The number of virtual shards this replica runs with."""
    _seen: dict[str, _Seen] = field(default_factory=dict)
    _mismatch: int | None = None

    def observe(self, leases: Iterable[Mapping[str, Any]], now: float) -> None:
        """Take a full listing of the Leases: each that changed (or is new) is marked
        changed at ``now``; those no longer listed are forgotten."""
        seen: dict[str, _Seen] = {}
        for lease in leases:
            record = LeaseRecord.of(lease)
            if record is None or not record.name:
                continue
            if record.shards is not None and record.shards != self.shards:
                self._mismatch = record.shards
            previous = self._seen.get(record.name)
            changed_at = now
            if previous is not None and previous.record == record:
                changed_at = previous.changed_at
            seen[record.name] = _Seen(record, dict(lease), changed_at)
        self._seen = seen

    def wrote(self, lease: Mapping[str, Any], now: float) -> None:
        """This replica wrote ``lease`` (the answer of a create or update): it is the
        newest state known, and a change at ``now``."""
        record = LeaseRecord.of(lease)
        if record is not None and record.name:
            self._seen[record.name] = _Seen(record, dict(lease), now)

    @property
    def mismatch(self) -> int | None:
        """A number of virtual shards other than :attr:`shards` that some Lease was
        written with (replicas configured differently), else ``None``."""
        return self._mismatch

    def lease(self, name: str) -> dict[str, Any] | None:
        """The Lease ``name`` as last seen (to write it back: a compare-and-swap)."""
        seen = self._seen.get(name)
        return None if seen is None else seen.lease

    def members(self, now: float) -> set[str]:
        """The identities whose member Lease is held and changed within its duration."""
        out: set[str] = set()
        for seen in self._seen.values():
            record = seen.record
            if record.role != "member" or not record.holder:
                continue
            if now - seen.changed_at < record.duration:
                out.add(record.holder)
        return out

    def holders(self) -> dict[int, str]:
        """Each shard's holder as its Lease says (``""``: nobody); shards without a
        Lease are absent."""
        out: dict[int, str] = {}
        for seen in self._seen.values():
            record = seen.record
            shard = record.shard
            if record.role == "shard" and shard is not None and 0 <= shard < self.shards:
                out[shard] = record.holder
        return out

    def shard_leases(self) -> dict[int, dict[str, Any]]:
        """Each shard's Lease as last seen."""
        out: dict[int, dict[str, Any]] = {}
        for seen in self._seen.values():
            record = seen.record
            if record.role == "shard" and record.shard is not None:
                out[record.shard] = seen.lease
        return out
