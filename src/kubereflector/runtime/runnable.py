"""What a :class:`~kubereflector.runtime.Manager` runs beside its controllers:
:class:`Runnable` (controller-runtime's ``manager.Runnable``), such as a webhook
server, a loop of your own, or a component of the runtime itself."""

from __future__ import annotations

import asyncio
from typing import Protocol, runtime_checkable

__all__ = ["Runnable"]


@runtime_checkable
class Runnable(Protocol):
    """Something a Manager runs: ``await runnable.run(stopping)``.

    ``run`` starts the work and returns only once ``stopping`` is set and the work
    has ended gracefully (the manager waits up to its
    ``graceful_shutdown_timeout``, then cancels it). Raising from ``run`` fails the
    manager: it stops everything and :meth:`Manager.run
    <kubereflector.runtime.Manager.run>` raises that error. ``run`` is awaited on
    the manager's event loop, once per start: a leader-only runnable (see
    :meth:`Manager.add <kubereflector.runtime.Manager.add>`) runs again each time
    this replica is elected, and is cancelled when leadership is lost.
    """

    async def run(self, stopping: asyncio.Event) -> None:
        """Run until ``stopping`` is set; then end gracefully and return."""
        ...
