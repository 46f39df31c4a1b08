"""Leader election on ``coordination.k8s.io/v1`` Leases, with client-go's semantics.

Usable on its own (the :class:`~kubereflector.runtime.Manager` uses it too)::

    from kubereflector.leaderelection import LeaderElector, LeaseLock, default_identity

    async def lead():
        ...  # the work only one replica may do; cancelled when leadership is lost

    async with Client(load_config()) as client:
        lock = LeaseLock(client, namespace="default", name="my-app", identity=default_identity())
        elector = LeaderElector(lock, on_started_leading=lead, release_on_cancel=True)
        await elector.run()  # returns when leadership is lost
"""

from __future__ import annotations

from .elector import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    JITTER_FACTOR,
    LeaderElector,
    LeaderMetrics,
    default_identity,
)
from .lock import LEASES, LeaderElectionRecord, LeaseLock, ResourceLock, micro_time

__all__ = [
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_RENEW_DEADLINE",
    "DEFAULT_RETRY_PERIOD",
    "JITTER_FACTOR",
    "LEASES",
    "LeaderElectionRecord",
    "LeaderElector",
    "LeaderMetrics",
    "LeaseLock",
    "ResourceLock",
    "default_identity",
    "micro_time",
]
