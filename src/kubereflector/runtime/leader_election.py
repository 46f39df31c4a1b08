"""Leader election for a :class:`~kubereflector.runtime.Manager`: its options
(:class:`LeaderElection`, controller-runtime's), the error a lost Lease ends a run
with, and the elector a manager campaigns with (client-go's ``tools/leaderelection``
on a Lease)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal

from ..client.rest import Client
from ..clock import Clock
from ..leaderelection import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    LeaderElector,
    LeaseLock,
    default_identity,
)
from ..metrics import Metrics

__all__ = ["LeaderElection", "LeaderElectionLostError"]

logger = logging.getLogger("kubereflector.runtime")

_SERVICE_ACCOUNT_NAMESPACE: Final = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

LEADER_HEALTH_TOLERANCE: Final = 20.0
"""Seconds a leader may be overdue on its renewal before ``/healthz`` fails
(client-go's ``NewLeaderHealthzAdaptor(20s)`` in kube-controller-manager)."""


class LeaderElectionLostError(RuntimeError):
    """The manager lost its Lease and stopped (controller-runtime exits the process
    with "leader election lost"): let it end the process non-zero."""


@dataclass(frozen=True, slots=True)
class LeaderElection:
    """How a :class:`Manager` campaigns (controller-runtime's leader election options).

    * ``name``: the Lease's name (one per operator, shared by its replicas);
    * ``namespace``: the Lease's namespace (default: the manager's namespace,
      else the pod's own namespace in a cluster, else ``default``);
    * ``identity``: this replica (default: ``hostname_uuid``);
    * ``lease_duration``, ``renew_deadline``, ``retry_period``: client-go's
      (15 s, 10 s, 2 s);
    * ``release_on_cancel``: release the Lease on graceful shutdown, so another
      replica takes over within its retry period (default ``True``);
    * ``on_lost``: after losing the Lease, ``"exit"`` (``run`` raises
      :class:`LeaderElectionLostError`; the default, as controller-runtime) or
      ``"campaign"`` (stop reconciling and campaign again).
    """

    name: str
    namespace: str | None = None
    identity: str | None = None
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    release_on_cancel: bool = True
    on_lost: Literal["exit", "campaign"] = "exit"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("LeaderElection needs the Lease's name")
        if self.on_lost not in ("exit", "campaign"):
            raise ValueError(f"on_lost must be 'exit' or 'campaign', not {self.on_lost!r}")


def _pod_namespace() -> str | None:
    """The namespace of the pod this process runs in (its service account's), or
    ``None`` outside a cluster."""
    try:
        with open(_SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _new_elector(
    client: Client,
    options: LeaderElection,
    namespace: str,
    lead: Callable[[], Awaitable[None]],
    *,
    clock: Clock,
    metrics: Metrics,
) -> tuple[LeaderElector, LeaseLock]:
    """The elector (and its lock) a manager campaigns with: ``options``' Lease in
    ``namespace``, calling ``lead()`` while this replica leads."""
    lock = LeaseLock(
        client,
        namespace=namespace,
        name=options.name,
        identity=options.identity or default_identity(),
    )
    elector = LeaderElector(
        lock,
        lease_duration=options.lease_duration,
        renew_deadline=options.renew_deadline,
        retry_period=options.retry_period,
        release_on_cancel=options.release_on_cancel,
        on_started_leading=lead,
        on_new_leader=lambda identity: logger.info("new leader: %s", identity),
        name=options.name,  # the metrics' label, as controller-runtime's leader election ID
        clock=clock,
        metrics=metrics.leader_election(),
    )
    return elector, lock
