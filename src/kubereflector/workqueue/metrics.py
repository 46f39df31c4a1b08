"""What a work queue reports: client-go's ``MetricsProvider`` and its metric names.

A queue created with a ``name`` and a provider asks the provider for one metric
of each kind below, once, and updates them as items flow. Without a name, or
with :class:`NoopMetricsProvider` (the default), a queue keeps no metrics at
all and pays nothing for them. The Prometheus exporter that registers these
under the names below comes with the controller runtime;
:class:`InMemoryMetricsProvider` keeps them in memory for tests.

What each metric means (as in client-go, every duration in seconds of the
queue's clock):

* ``workqueue_depth`` (gauge): items waiting to be handed out;
* ``workqueue_adds_total`` (counter): adds that queued an item (an add of an item
  already queued does not count);
* ``workqueue_queue_duration_seconds`` (histogram): how long an item waited,
  from its first add to the get that handed it out;
* ``workqueue_work_duration_seconds`` (histogram): from get to ``done``;
* ``workqueue_unfinished_work_seconds`` (settable gauge): the sum of the ages of
  the items being processed;
* ``workqueue_longest_running_processor_seconds`` (settable gauge): the age of
  the oldest of them;
* ``workqueue_retries_total`` (counter): ``add_after`` calls (including the
  rate-limited requeues).

The two "unfinished" gauges are refreshed by
:meth:`~kubereflector.workqueue.WorkQueue.update_unfinished_work` (an exporter
calls it before a scrape, so a stuck worker shows; client-go refreshes them
every 500 ms), and set to zero by the ``done`` that leaves nothing in
processing. Summing the ages on every get and ``done`` instead would cost
O(items in processing) per item: with 64 workers, a quarter of a reconcile's
CPU.

Thread-safety: a queue calls its metrics with its own lock held, so one
queue's metrics are never updated concurrently; a provider handing the same
metric to several queues must make it thread-safe itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Final, Protocol, runtime_checkable

__all__ = [
    "ADDS",
    "DEPTH",
    "LONGEST_RUNNING_PROCESSOR",
    "QUEUE_DURATION",
    "RETRIES",
    "UNFINISHED_WORK",
    "WORK_DURATION",
    "CounterMetric",
    "GaugeMetric",
    "HistogramMetric",
    "InMemoryMetric",
    "InMemoryMetricsProvider",
    "MetricsProvider",
    "NoopMetricsProvider",
    "SettableGaugeMetric",
]

DEPTH: Final = "workqueue_depth"
"""``workqueue_depth``: items waiting to be handed out (a gauge)."""
ADDS: Final = "workqueue_adds_total"
"""``workqueue_adds_total``: adds that queued an item (a counter)."""
QUEUE_DURATION: Final = "workqueue_queue_duration_seconds"
"""``workqueue_queue_duration_seconds``: from an item's first add to its get (a histogram)."""
WORK_DURATION: Final = "workqueue_work_duration_seconds"
"""``workqueue_work_duration_seconds``: from get to ``done`` (a histogram)."""
UNFINISHED_WORK: Final = "workqueue_unfinished_work_seconds"
"""``workqueue_unfinished_work_seconds``: the summed ages of the items being processed (a settable
gauge)."""
LONGEST_RUNNING_PROCESSOR: Final = "workqueue_longest_running_processor_seconds"
"""``workqueue_longest_running_processor_seconds``: the age of the oldest item being processed (a
settable gauge)."""
RETRIES: Final = "workqueue_retries_total"
"""``workqueue_retries_total``: ``add_after`` calls, rate-limited requeues included (a counter)."""


@runtime_checkable
class GaugeMetric(Protocol):
    """A gauge a queue moves by one: ``workqueue_depth``."""

    def inc(self) -> None:
        """Add one."""

    def dec(self) -> None:
        """Subtract one."""


@runtime_checkable
class SettableGaugeMetric(Protocol):
    """A gauge a queue sets: the two "unfinished work" gauges."""

    def set(self, value: float) -> None:
        """Set the gauge to ``value``."""


@runtime_checkable
class CounterMetric(Protocol):
    """A counter: ``workqueue_adds_total``, ``workqueue_retries_total``."""

    def inc(self) -> None:
        """Add one."""


@runtime_checkable
class HistogramMetric(Protocol):
    """A histogram of durations in seconds: the queue and work durations."""

    def observe(self, value: float) -> None:
        """Record one observation of ``value`` seconds."""


@runtime_checkable
class MetricsProvider(Protocol):
    """Makes the metrics of the queue called ``name`` (client-go's ``MetricsProvider``).

    Each method is called once per queue, when the queue is created.
    """

    def new_depth_metric(self, name: str) -> GaugeMetric:
        """The ``workqueue_depth`` gauge of the queue called ``name``."""

    def new_adds_metric(self, name: str) -> CounterMetric:
        """The ``workqueue_adds_total`` counter of the queue called ``name``."""

    def new_latency_metric(self, name: str) -> HistogramMetric:
        """The ``workqueue_queue_duration_seconds`` histogram of the queue called ``name``."""

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        """The ``workqueue_work_duration_seconds`` histogram of the queue called ``name``."""

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """The ``workqueue_unfinished_work_seconds`` gauge of the queue called ``name``."""

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """The ``workqueue_longest_running_processor_seconds`` gauge of the queue
        called ``name``."""

    def new_retries_metric(self, name: str) -> CounterMetric:
        """The ``workqueue_retries_total`` counter of the queue called ``name``."""


class _NoopMetric:
    __slots__ = ()

    def inc(self) -> None:
        pass

    def dec(self) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, value: float) -> None:
        pass


_NOOP: Final = _NoopMetric()


class NoopMetricsProvider:
    """Metrics that record nothing; a queue given this provider keeps none at all."""

    __slots__ = ()

    def new_depth_metric(self, name: str) -> GaugeMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_adds_metric(self, name: str) -> CounterMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_latency_metric(self, name: str) -> HistogramMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_retries_metric(self, name: str) -> CounterMetric:
        """A metric that records nothing."""
        return _NOOP

    def __repr__(self) -> str:
        return "NoopMetricsProvider()"


class InMemoryMetric:
    """One metric of one queue, kept in memory: a gauge or counter's ``value``,
    a histogram's ``observations`` (oldest first). Thread-safe."""

    __slots__ = ("_lock", "metric", "observations", "queue", "value")

    def __init__(self, metric: str, queue: str) -> None:
        self.metric = metric
        self.queue = queue
        self.value = 0.0
        self.observations: list[float] = []
        self._lock = threading.Lock()

    def inc(self) -> None:
        """Add one to ``value``."""
        with self._lock:
            self.value += 1

    def dec(self) -> None:
        """Subtract one from ``value``."""
        with self._lock:
            self.value -= 1

    def set(self, value: float) -> None:
        """Set ``value``."""
        with self._lock:
            self.value = value

    def observe(self, value: float) -> None:
        """Append ``value`` to ``observations``."""
        with self._lock:
            self.observations.append(value)

    def __repr__(self) -> str:
        return (
            f"InMemoryMetric({self.metric}{{name={self.queue!r}}} value={self.value} "
            f"observations={len(self.observations)})"
        )


class InMemoryMetricsProvider:
    """Keeps every queue's metrics in memory, for tests (and debugging).

    ``provider.get(ADDS, "my-queue").value`` reads a counter;
    ``.observations`` a histogram's values. A metric no queue asked for yet reads
    as zero / empty. Thread-safe.
    """

    __slots__ = ("_lock", "_metrics")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._metrics: dict[tuple[str, str], InMemoryMetric] = {}

    def get(self, metric: str, queue: str) -> InMemoryMetric:
        """The metric called ``metric`` (one of this module's names) of the queue
        called ``queue``."""
        with self._lock:
            found = self._metrics.get((metric, queue))
            if found is None:
                found = self._metrics[metric, queue] = InMemoryMetric(metric, queue)
            return found

    def new_depth_metric(self, name: str) -> GaugeMetric:
        """The in-memory ``workqueue_depth`` gauge of the queue called ``name`` (the one
        :meth:`get` returns)."""
        return self.get(DEPTH, name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        """The in-memory ``workqueue_adds_total`` counter of the queue called ``name`` (the one
        :meth:`get` returns)."""
        return self.get(ADDS, name)

    def new_latency_metric(self, name: str) -> HistogramMetric:
        """The in-memory ``workqueue_queue_duration_seconds`` histogram of the queue called
        ``name`` (the one :meth:`get` returns)."""
        return self.get(QUEUE_DURATION, name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        """The in-memory ``workqueue_work_duration_seconds`` histogram of the queue called ``name``
        (the one :meth:`get` returns)."""
        return self.get(WORK_DURATION, name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """The in-memory ``workqueue_unfinished_work_seconds`` gauge of the queue called ``name``
        (the one :meth:`get` returns)."""
        return self.get(UNFINISHED_WORK, name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """The in-memory ``workqueue_longest_running_processor_seconds`` gauge of the queue called
        ``name`` (the one :meth:`get` returns)."""
        return self.get(LONGEST_RUNNING_PROCESSOR, name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        """The in-memory ``workqueue_retries_total`` counter of the queue called ``name`` (the one
        :meth:`get` returns)."""
        return self.get(RETRIES, name)

    def __repr__(self) -> str:
        return f"InMemoryMetricsProvider({len(self._metrics)} metrics)"


class _QueueMetrics:
    """What a queue updates as items flow (client-go's ``defaultQueueMetrics``).

    Not thread-safe: the queue calls it with its lock held. ``now`` is the
    queue's clock.
    """

    __slots__ = (
        "_add_times",
        "_adds",
        "_depth",
        "_latency",
        "_longest",
        "_now",
        "_retries",
        "_start_times",
        "_unfinished",
        "_work_duration",
    )

    def __init__(self, provider: MetricsProvider, name: str, now: Callable[[], float]) -> None:
        self._now = now
        self._depth = provider.new_depth_metric(name)
        self._adds = provider.new_adds_metric(name)
        self._latency = provider.new_latency_metric(name)
        self._work_duration = provider.new_work_duration_metric(name)
        self._unfinished = provider.new_unfinished_work_seconds_metric(name)
        self._longest = provider.new_longest_running_processor_seconds_metric(name)
        self._retries = provider.new_retries_metric(name)
        self._add_times: dict[Hashable, float] = {}
        self._start_times: dict[Hashable, float] = {}

    def add(self, item: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        self._add_times.setdefault(item, self._now())

    def get(self, item: Hashable) -> None:
        now = self._now()
        self._depth.dec()
        self._start_times[item] = now
        added = self._add_times.pop(item, None)
        if added is not None:
            self._latency.observe(now - added)

    def done(self, item: Hashable) -> None:
        now = self._now()
        started = self._start_times.pop(item, None)
        if started is not None:
            self._work_duration.observe(now - started)
        if not self._start_times:
            self._unfinished.set(0.0)
            self._longest.set(0.0)

    def retry(self) -> None:
        self._retries.inc()

    def update_unfinished_work(self) -> None:
        now = self._now()
        total = 0.0
        oldest = 0.0
        for started in self._start_times.values():
            age = now - started
            total += age
            oldest = max(oldest, age)
        self._unfinished.set(total)
        self._longest.set(oldest)


def _queue_metrics(
    provider: MetricsProvider | None, name: str, now: Callable[[], float]
) -> _QueueMetrics | None:
    """The metrics a queue called ``name`` keeps, or ``None`` when it keeps none
    (no name, or no provider / the no-op one), as client-go decides."""
    if not name or provider is None or isinstance(provider, NoopMetricsProvider):
        return None
    return _QueueMetrics(provider, name, now)
