"""Which reconcile the running code belongs to: a context variable the controller sets
around each reconcile (private to the runtime).

A coroutine reconcile and the tasks it starts see it through asyncio's context
copies; a plain-function reconcile sees it on its worker thread (the controller runs
it in a copy of the context), and so do the calls its blocking clients make on the
event loop (``asyncio.run_coroutine_threadsafe`` schedules them in a copy of the
calling thread's context). The runtime reads it to name the field manager of
:func:`~kubereflector.runtime.apply` and to attribute the writes a reconcile makes
(read-your-own-writes, echo handling).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

from .reconcile import Request

__all__ = ["ReconcileContext", "current_reconcile", "reconciling"]


@dataclass(frozen=True, slots=True, eq=False)
class ReconcileContext:
    """One reconcile in progress: its controller's name, its request and the priority
    it was queued at. Compared by identity: each reconcile has its own."""

    controller: str
    request: Request
    priority: int = 0
    writes: list[object] = field(default_factory=list, repr=False)
    """What the read-your-own-writes ledger recorded for this reconcile (its entries)."""


_CURRENT: contextvars.ContextVar[ReconcileContext | None] = contextvars.ContextVar(
    "kubereflector_reconcile", default=None
)

reconciling = _CURRENT
"""The context variable itself (the controller sets and resets it)."""


def current_reconcile() -> ReconcileContext | None:
    """The reconcile the calling code runs in, or ``None`` outside any."""
    return _CURRENT.get()
