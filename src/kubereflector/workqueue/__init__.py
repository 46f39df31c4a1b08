"""The work queue: client-go's ``util/workqueue`` for Python, with rate limiters
and controller-runtime's priorities.

Handlers add keys (:class:`EnqueueHandler` is the one-line wiring from an
informer); workers take a key with ``await queue.get()`` (or
``queue.get_blocking()`` on a plain thread), reconcile it, and call
``queue.done(key)``; on failure ``queue.add_rate_limited(key)`` retries it with
a backoff per key. A key is never processed by two workers at once, a key
added while it is processed is processed again afterwards, and bursts of adds
of one key collapse into one piece of work.

* :class:`WorkQueue`: dedup, the processing set, priorities, shutdown (with drain).
* :class:`DelayingQueue`: ``add_after(item, delay)`` on an injectable clock.
* :class:`RateLimitingQueue`: ``add_rate_limited``, ``forget``, ``num_requeues``.
* rate limiters: :class:`ItemExponentialFailureRateLimiter`,
  :class:`ItemFastSlowRateLimiter`, :class:`BucketRateLimiter`,
  :class:`MaxOfRateLimiter`, :func:`default_controller_rate_limiter`.
* metrics: :class:`MetricsProvider` (client-go's names), :class:`NoopMetricsProvider`
  (the default), :class:`InMemoryMetricsProvider`.
"""

from __future__ import annotations

from .delaying import DelayingQueue
from .handler import LOW_PRIORITY, EnqueueHandler, namespaced_name
from .metrics import (
    ADDS,
    DEPTH,
    LONGEST_RUNNING_PROCESSOR,
    QUEUE_DURATION,
    RETRIES,
    UNFINISHED_WORK,
    WORK_DURATION,
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    InMemoryMetric,
    InMemoryMetricsProvider,
    MetricsProvider,
    NoopMetricsProvider,
    SettableGaugeMetric,
)
from .queue import NotProcessingError, QueueEmpty, QueueShutDown, WorkQueue
from .rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from .rate_limiting import RateLimitingQueue

__all__ = [
    "ADDS",
    "DEPTH",
    "LONGEST_RUNNING_PROCESSOR",
    "LOW_PRIORITY",
    "QUEUE_DURATION",
    "RETRIES",
    "UNFINISHED_WORK",
    "WORK_DURATION",
    "BucketRateLimiter",
    "CounterMetric",
    "DelayingQueue",
    "EnqueueHandler",
    "GaugeMetric",
    "HistogramMetric",
    "InMemoryMetric",
    "InMemoryMetricsProvider",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "MetricsProvider",
    "NoopMetricsProvider",
    "NotProcessingError",
    "QueueEmpty",
    "QueueShutDown",
    "RateLimiter",
    "RateLimitingQueue",
    "SettableGaugeMetric",
    "WorkQueue",
    "default_controller_rate_limiter",
    "namespaced_name",
]
