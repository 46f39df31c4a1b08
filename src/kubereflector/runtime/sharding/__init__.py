"""Scale out: one controller sharded across replicas, on Kubernetes' own Leases.

``Manager(config, sharding=Sharding(name="my-operator"))`` runs the manager's
controllers on every replica, each replica reconciling only the objects of the
virtual shards it holds, its caches holding only those objects:

* **Membership and assignment.** Each replica renews a member Lease; every
  replica reads them all and computes the same balanced, sticky assignment of
  the fixed virtual shards (:mod:`.assignment`): a join moves only the
  newcomer's share, a leave only the leaver's.
* **Safety.** A shard's keys are handed out only while its Lease names the
  replica and the replica's membership is valid; a replica giving a shard up
  stops handing out its keys and waits for its reconciles in flight before it
  frees the Lease (:mod:`.handoff`); one that cannot renew stops before the
  others may take over. No object is ever reconciled by two replicas at once
  (the argument is in ARCHITECTURE.md).
* **Less work per replica.** Objects belong to the shard their uid hashes into
  with KEP-5866's FNV-1a; each replica's caches list and watch only their
  shards (``shardSelector`` where the API server has sharded lists, the same
  hash on the client otherwise); owned objects follow their owner.
* **Warm standby.** A replica's caches hold the shards it should hold before it
  takes them, so it reconciles at once when they come.

The building blocks are usable alone: :class:`ShardSpace` (the shards),
:func:`assign_shards`, :class:`~.membership.Observer`, the :class:`~.handoff.Handoff`
state machine, :class:`ShardCoordinator` over any :class:`LeaseStore`.
"""

from __future__ import annotations

from .assignment import assign_shards
from .coordinator import ShardCoordinator, ShardingStatus
from .leases import ClientLeaseStore, LeaseStore
from .options import Sharding
from .space import ShardSpace

__all__ = [
    "ClientLeaseStore",
    "LeaseStore",
    "ShardCoordinator",
    "ShardSpace",
    "Sharding",
    "ShardingStatus",
    "assign_shards",
]
