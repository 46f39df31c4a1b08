"""RateLimitingQueue: a DelayingQueue that requeues with backoff (client-go's
``RateLimitingInterface``).

The usual worker::

    item = await queue.get()
    try:
        reconcile(item)
    except Exception:
        queue.add_rate_limited(item)  # try again later, backing off per item
    else:
        queue.forget(item)  # success: the next failure starts from the base delay
    finally:
        queue.done(item)
"""

from __future__ import annotations

from ..clock import Clock
from .delaying import DelayingQueue
from .metrics import MetricsProvider
from .queue import T
from .rate_limiters import RateLimiter, default_controller_rate_limiter

__all__ = ["RateLimitingQueue"]


class RateLimitingQueue(DelayingQueue[T]):
    """A :class:`~kubereflector.workqueue.DelayingQueue` whose
    :meth:`add_rate_limited` waits as long as ``rate_limiter`` says.

    ``rate_limiter`` defaults to
    :func:`~kubereflector.workqueue.default_controller_rate_limiter` on the
    queue's clock. Thread-safety as the other queues.
    """

    __slots__ = ("rate_limiter",)

    def __init__(
        self,
        rate_limiter: RateLimiter[T] | None = None,
        *,
        name: str = "",
        metrics_provider: MetricsProvider | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(name=name, metrics_provider=metrics_provider, clock=clock)
        if rate_limiter is None:
            rate_limiter = default_controller_rate_limiter(clock=self.clock)
        self.rate_limiter = rate_limiter

    def add_rate_limited(self, item: T, *, priority: int = 0) -> None:
        """Add ``item`` after the rate limiter's delay for it (which counts a requeue)."""
        if self._shutting_down:
            return
        self.add_after(item, self.rate_limiter.when(item), priority=priority)

    def forget(self, item: T) -> None:
        """Tell the rate limiter ``item`` is done with failing: its backoff starts
        over. (The item stays queued if it is.)"""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many times ``item`` was requeued with :meth:`add_rate_limited` since
        it was last forgotten."""
        return self.rate_limiter.num_requeues(item)
