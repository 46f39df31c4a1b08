"""What a Controller may reconcile now: :class:`ReconcileGate`.

A gate is consulted by a :class:`~kubereflector.runtime.Controller` given one
(a sharded :class:`~kubereflector.runtime.Manager` gives each controller the
gate of the shards its replica holds):

* before a request is queued (:meth:`ReconcileGate.wanted`: ``False`` drops it);
* when a worker takes a request, right before the reconcile starts
  (:meth:`ReconcileGate.enter`: ``None`` drops it, forgotten; otherwise the
  reconcile runs holding the :class:`GateTicket`, and the gate counts it in
  flight until :meth:`GateTicket.exit`);
* a coroutine reconcile runs through :meth:`GateTicket.run`, so the gate can
  revoke it (it is cancelled; the controller forgets the request, logs it, and
  counts nothing). A plain-function reconcile runs to its end on its thread.

Every method is called on the controller's event loop, in that order, with no
``await`` between :meth:`~ReconcileGate.enter` and the start of the reconcile:
a gate that closes sees every reconcile it admitted in its count.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, TypeVar, runtime_checkable

from .reconcile import Request

__all__ = ["GateTicket", "ReconcileGate", "ReconcileRevokedError"]

T = TypeVar("T")


class ReconcileRevokedError(Exception):
    """A reconcile cancelled by its gate (raised from :meth:`GateTicket.run`): the
    request is no longer this controller's to reconcile."""


class GateTicket(Protocol):
    """One reconcile admitted by a :class:`ReconcileGate`."""

    def run(self, reconcile: Awaitable[T]) -> Awaitable[T]:
        """Await ``reconcile`` (a coroutine reconcile's call) under the gate: its result,
        or its exception; :class:`ReconcileRevokedError` when the gate revoked it."""
        ...

    def exit(self) -> None:
        """The reconcile has ended (however it ended). Called once."""
        ...


@runtime_checkable
class ReconcileGate(Protocol):
    """Decides which requests a controller queues and reconciles (see the module
    documentation). Called on the controller's event loop only; must not block."""

    def wanted(self, request: Request) -> bool:
        """Whether to queue ``request`` now (``False``: it is dropped)."""
        ...

    def enter(self, request: Request) -> GateTicket | None:
        """Admit ``request``'s reconcile, which starts at once (``None``: it is
        dropped and forgotten)."""
        ...
