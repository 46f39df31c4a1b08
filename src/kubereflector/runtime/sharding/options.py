"""How a Manager's controllers are sharded across replicas: :class:`Sharding`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .leases import check_name
from .space import MAX_SHARDS

__all__ = ["Sharding"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Sharding:
    """Split the objects of a :class:`~kubereflector.runtime.Manager`'s controllers
    across the replicas that run it (``Manager(..., sharding=Sharding(name=...))``).

    * ``name``: the sharded controller's name, shared by its replicas (it names
      the Leases: lowercase letters, digits and ``-``, at most 40);
    * ``shards``: the number of virtual shards (default 32; 1 to 1024): each
      replica holds about ``shards / replicas`` of them, so more shards balance
      more finely (and cost one Lease each). Every replica must use the same
      number: change it by stopping them all;
    * ``namespace``: where the Leases live (default: the manager's namespace, else
      the pod's own, else ``default``);
    * ``identity``: this replica, unique among them (default: ``hostname_uuid``,
      new at each start);
    * ``lease_duration``, ``renew_deadline``, ``retry_period``: a replica renews
      its member Lease every ``retry_period`` seconds; one that has not renewed
      for ``renew_deadline`` stops reconciling its shards; the others take them
      over once its Lease has not changed for ``lease_duration`` (client-go's
      leader election defaults: 15, 10, 2);
    * ``drain_timeout``: seconds a shard being handed over waits for its
      reconciles in flight before it cancels them (coroutine reconciles; a
      plain function runs to its end, and the handover waits for it).

    Raises ``ValueError`` naming the field for a value out of range, and unless
    ``lease_duration > renew_deadline > retry_period > 0``.
    """

    name: str
    shards: int = 32
    namespace: str | None = None
    identity: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    drain_timeout: float = 30.0

    def __post_init__(self) -> None:
        check_name(self.name)
        shards = self.shards
        if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
            raise ValueError(f"shards must be an int from 1 to {MAX_SHARDS}, not {shards!r}")
        if self.identity is not None and (not isinstance(self.identity, str) or not self.identity):
            raise ValueError("identity must be a non-empty string (or None for the default)")
        for label in ("lease_duration", "renew_deadline", "retry_period", "drain_timeout"):
            value = getattr(self, label)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValueError(f"{label} must be a number of seconds > 0, not {value!r}")
        if self.lease_duration < 1:
            raise ValueError(f"lease_duration must be at least 1 second, not {self.lease_duration}")
        if not self.lease_duration > self.renew_deadline > self.retry_period:
            raise ValueError(
                "lease_duration > renew_deadline > retry_period is required (got "
                f"{self.lease_duration}, {self.renew_deadline}, {self.retry_period}): a replica "
                "must stop before the others may take its shards, and renew in between"
            )
