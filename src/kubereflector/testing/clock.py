"""FakeClock: virtual time for tests, driven explicitly.

``now()`` returns virtual seconds; ``await sleep(d)`` parks the caller until a
test moves time past its deadline with :meth:`FakeClock.advance` (or
:meth:`FakeClock.step`). Nothing ever waits for wall-clock time.

Use one FakeClock from one event loop (the loop the test runs on); it is not
thread-safe.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

__all__ = ["FakeClock", "settle"]


async def settle(rounds: int = 50) -> None:
    """Let every task that is ready run, for ``rounds`` turns of the event loop.

    In-memory chains of awaits (a fake source feeding a Reflector feeding a
    store) finish within a few turns; this waits for no time at all.
    """
    for _ in range(rounds):
        await asyncio.sleep(0)


class FakeClock:
    """A manually advanced :class:`~kubereflector.Clock`."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._changed: asyncio.Event | None = None

    def now(self) -> float:
        """The virtual time: ``start`` plus every :meth:`advance` so far."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Park until virtual time reaches ``now() + seconds``; ``<= 0`` only yields."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), future))
        self._notify()
        try:
            await future
        finally:
            if not future.done():
                future.cancel()  # cancelled sleeper: dropped lazily from the heap

    @property
    def pending(self) -> list[float]:
        """Deadlines of the sleeps currently parked, soonest first."""
        return sorted(d for d, _, f in self._sleepers if not f.done())

    def next_deadline(self) -> float | None:
        """The soonest parked deadline, or ``None``."""
        self._drop_cancelled()
        return self._sleepers[0][0] if self._sleepers else None

    def step(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and wake every sleep that is due.

        The woken tasks run when the caller next yields to the event loop.
        """
        if seconds < 0:
            raise ValueError(f"time only moves forward (got {seconds})")
        self._now += seconds
        self._wake_due()

    async def advance(self, seconds: float, *, rounds: int = 50) -> None:
        """Move time forward by ``seconds``, stopping at each deadline on the way
        and letting woken tasks run (``settle(rounds)``) before going on, so a
        sleep started by a woken task within the window also fires."""
        if seconds < 0:
            raise ValueError(f"time only moves forward (got {seconds})")
        target = self._now + seconds
        await settle(rounds)
        while True:
            deadline = self.next_deadline()
            if deadline is None or deadline > target:
                break
            self._now = max(self._now, deadline)
            self._wake_due()
            await settle(rounds)
        self._now = target
        await settle(rounds)

    async def wait_for_sleepers(self, count: int = 1) -> None:
        """Return once at least ``count`` sleeps are parked (no time passes)."""
        while len(self.pending) < count:
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()
            self._changed.clear()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)

    def _wake_due(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now}, pending={len(self.pending)})"
