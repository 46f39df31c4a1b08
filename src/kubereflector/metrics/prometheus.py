"""The Prometheus exporter: every metric of the runtime, under the names Go components use.

One :class:`Metrics` owns one ``prometheus_client.CollectorRegistry`` (its own,
so several managers in one process never collide; pass ``registry=`` to share
one) and hands each part of kubereflector the small recorder it reports to:

* :meth:`Metrics.controller` -- controller-runtime's reconcile metrics;
* :meth:`Metrics.workqueue_provider` -- client-go's workqueue metrics, as
  controller-runtime registers them (labels ``name`` and ``controller``);
* :meth:`Metrics.leader_election` -- ``leader_election_master_status`` and
  ``leader_election_slowpath_total``;
* :meth:`Metrics.sharding` -- a sharded controller's shards, members and
  handoffs, under the ``kubereflector_sharding_`` prefix;
* :meth:`Metrics.rest_client` -- ``rest_client_requests_total`` and
  ``rest_client_request_duration_seconds`` (install it on a
  :class:`~kubereflector.client.Client` as ``request_metrics``);
* :meth:`Metrics.webhooks` -- controller-runtime's webhook server metrics
  (``controller_runtime_webhook_requests_total``, ``..._latency_seconds``,
  ``..._requests_in_flight``);
* :meth:`Metrics.add_informers` -- the informers' state under the
  ``kubereflector_informer_`` prefix, read from their stats at scrape time
  (nothing is counted on the watch path);
* process and platform metrics (``process_*``, ``python_*``), as Go components
  export their process and runtime metrics.

Recording is cheap (a few bytecodes per update, see ``_families``): the
metrics are kept as plain numbers and handed to prometheus-client as metric
families when the registry is scraped. Each recorder is updated from one thread
at a time: the runtime's from its event loop, a work queue's with the queue's
lock held; :class:`RestClientMetrics` takes a lock of its own (clients on
several loops may share one).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final, Literal, Protocol

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ._families import Counter, Families, Family, Gauge, Histogram

if TYPE_CHECKING:
    from ..cache.shared_informer import SharedIndexInformer

__all__ = [
    "ACTIVE_WORKERS",
    "INFORMER_PREFIX",
    "LEADER_ELECTION_MASTER_STATUS",
    "LEADER_ELECTION_SLOWPATH_TOTAL",
    "MAX_CONCURRENT_RECONCILES",
    "RECONCILE_CONFLICTS_TOTAL",
    "RECONCILE_ERRORS_TOTAL",
    "RECONCILE_STALE_TOTAL",
    "RECONCILE_TIMEOUTS_TOTAL",
    "RECONCILE_TIME_SECONDS",
    "RECONCILE_TOTAL",
    "REST_CLIENT_REQUESTS_TOTAL",
    "REST_CLIENT_REQUEST_DURATION_SECONDS",
    "SHARDING_ACQUISITIONS_TOTAL",
    "SHARDING_HANDOFF_SECONDS",
    "SHARDING_MEMBERS",
    "SHARDING_RELEASES_TOTAL",
    "SHARDING_SHARDS_HELD",
    "SHARDING_SHARD_HELD",
    "TERMINAL_RECONCILE_ERRORS_TOTAL",
    "WEBHOOK_LATENCY_SECONDS",
    "WEBHOOK_REQUESTS_IN_FLIGHT",
    "WEBHOOK_REQUESTS_TOTAL",
    "WORKQUEUE_ADDS_TOTAL",
    "WORKQUEUE_DEPTH",
    "WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS",
    "WORKQUEUE_QUEUE_DURATION_SECONDS",
    "WORKQUEUE_RETRIES_TOTAL",
    "WORKQUEUE_UNFINISHED_WORK_SECONDS",
    "WORKQUEUE_WORK_DURATION_SECONDS",
    "ControllerMetrics",
    "InformerSource",
    "LeaderElectionMetrics",
    "Metrics",
    "RestClientMetrics",
    "ShardingMetrics",
    "WebhookMetrics",
    "WorkqueueMetricsProvider",
]

# -- names (exactly as controller-runtime and client-go export them) -------------------

RECONCILE_TOTAL: Final = "controller_runtime_reconcile_total"
"""Reconciles by ``controller`` and ``result`` (success, error, requeue, requeue_after): a
counter."""
RECONCILE_ERRORS_TOTAL: Final = "controller_runtime_reconcile_errors_total"
"""Reconciles that raised, by ``controller``: a counter."""
TERMINAL_RECONCILE_ERRORS_TOTAL: Final = "controller_runtime_terminal_reconcile_errors_total"
"""Reconciles that raised a ``TerminalError``, by ``controller``: a counter."""
RECONCILE_TIMEOUTS_TOTAL: Final = "controller_runtime_reconcile_timeouts_total"
"""Reconciles that ran past ``ControllerOptions.reconcile_timeout``, by ``controller``: a
counter."""
RECONCILE_CONFLICTS_TOTAL: Final = "kubereflector_reconcile_conflicts_total"
"""Reconciles that failed with a 409 (Conflict, or AlreadyExists: a create the cache had not
seen yet) and were retried, by ``controller``: a counter (they count as errors too)."""
RECONCILE_STALE_TOTAL: Final = "kubereflector_reconcile_stale_reads_total"
"""Reconciles postponed, or failed with ``StaleReadError``, because the cache had not seen
the request's own writes in time, by ``controller``: a counter."""
RECONCILE_TIME_SECONDS: Final = "controller_runtime_reconcile_time_seconds"
"""How long each reconcile took, by ``controller``: a histogram."""
MAX_CONCURRENT_RECONCILES: Final = "controller_runtime_max_concurrent_reconciles"
"""Each controller's ``max_concurrent_reconciles``: a gauge."""
ACTIVE_WORKERS: Final = "controller_runtime_active_workers"
"""Workers reconciling right now, by ``controller``: a gauge."""
WORKQUEUE_DEPTH: Final = "workqueue_depth"
"""Items waiting in each work queue (labels ``name``, ``controller``): a gauge."""
WORKQUEUE_ADDS_TOTAL: Final = "workqueue_adds_total"
"""Adds that queued an item, by queue: a counter."""
WORKQUEUE_QUEUE_DURATION_SECONDS: Final = "workqueue_queue_duration_seconds"
"""From an item's first add to its get, by queue: a histogram."""
WORKQUEUE_WORK_DURATION_SECONDS: Final = "workqueue_work_duration_seconds"
"""From an item's get to its ``done``, by queue: a histogram."""
WORKQUEUE_UNFINISHED_WORK_SECONDS: Final = "workqueue_unfinished_work_seconds"
"""The summed ages of the items being processed, by queue: a gauge."""
WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS: Final = "workqueue_longest_running_processor_seconds"
"""The age of the oldest item being processed, by queue: a gauge."""
WORKQUEUE_RETRIES_TOTAL: Final = "workqueue_retries_total"
"""Rate-limited and delayed requeues, by queue: a counter."""
LEADER_ELECTION_MASTER_STATUS: Final = "leader_election_master_status"
"""1 while this process leads the election ``name``, else 0: a gauge."""
LEADER_ELECTION_SLOWPATH_TOTAL: Final = "leader_election_slowpath_total"
"""Lease renewals that had to read the Lease first, by election ``name``: a counter."""
REST_CLIENT_REQUESTS_TOTAL: Final = "rest_client_requests_total"
"""Requests to the API server by ``code``, ``method`` and ``host``: a counter."""
REST_CLIENT_REQUEST_DURATION_SECONDS: Final = "rest_client_request_duration_seconds"
"""From sending a request to its answer's headers, by ``verb`` and ``host``: a histogram."""
WEBHOOK_REQUESTS_TOTAL: Final = "controller_runtime_webhook_requests_total"
"""Requests to the webhook server by ``webhook`` (its path) and HTTP ``code``: a counter."""
WEBHOOK_LATENCY_SECONDS: Final = "controller_runtime_webhook_latency_seconds"
"""How long the webhook server took to answer, by ``webhook`` (its path): a histogram."""
WEBHOOK_REQUESTS_IN_FLIGHT: Final = "controller_runtime_webhook_requests_in_flight"
"""Requests the webhook server is answering now, by ``webhook`` (its path): a gauge."""
SHARDING_SHARDS_HELD: Final = "kubereflector_sharding_shards_held"
"""Virtual shards this replica holds now, by sharded controller ``name``: a gauge."""
SHARDING_SHARD_HELD: Final = "kubereflector_sharding_shard_held"
"""1 while this replica holds virtual shard ``shard`` of ``name``, else 0: a gauge."""
SHARDING_MEMBERS: Final = "kubereflector_sharding_members"
"""Replicas of ``name`` this one sees alive (itself included): a gauge."""
SHARDING_ACQUISITIONS_TOTAL: Final = "kubereflector_sharding_acquisitions_total"
"""Shards this replica took, by ``name``: a counter."""
SHARDING_RELEASES_TOTAL: Final = "kubereflector_sharding_releases_total"
"""Shards this replica stopped reconciling, by ``name`` and ``reason`` (``rebalance``,
``shutdown``, ``lost``: its membership lapsed, ``taken``): a counter."""
SHARDING_HANDOFF_SECONDS: Final = "kubereflector_sharding_handoff_seconds"
"""From a shard's drain to its Lease freed (the reconciles in flight ending, and the
write), by ``name``: a histogram."""
INFORMER_PREFIX: Final = "kubereflector_informer_"
"""The prefix of the informer metrics this library adds (client-go exports none): objects cached,
relists, watch restarts, last sync resourceVersion, seconds since the server was last heard
from, by ``resource``."""

_RECONCILE_BUCKETS: Final = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    *(0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5),
    *(5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60),
)
"""controller-runtime's buckets for reconcile times and REST latencies."""
_WEBHOOK_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Prometheus' default buckets, which controller-runtime's webhook latency uses."""
_WORKQUEUE_BUCKETS: Final = tuple(1e-8 * 10**i for i in range(12))
"""client-go's ``ExponentialBuckets(10e-9, 10, 12)``: 10 ns to 1000 s."""

_RESULTS: Final = ("success", "error", "requeue", "requeue_after")


class ControllerMetrics:
    """The reconcile metrics of one controller (controller-runtime's), label
    ``controller`` bound. Update it from one thread at a time."""

    __slots__ = (
        "_active",
        "_conflicts",
        "_errors",
        "_max",
        "_results",
        "_stale",
        "_terminal",
        "_time",
        "_timeouts",
    )

    def __init__(self, metrics: Metrics, controller: str) -> None:
        self._results = {r: metrics._reconcile_total.counter(controller, r) for r in _RESULTS}
        self._errors = metrics._reconcile_errors.counter(controller)
        self._terminal = metrics._terminal_errors.counter(controller)
        self._timeouts = metrics._reconcile_timeouts.counter(controller)
        self._conflicts = metrics._reconcile_conflicts.counter(controller)
        self._stale = metrics._reconcile_stale.counter(controller)
        self._time = metrics._reconcile_time.histogram(controller)
        self._max = metrics._max_concurrent.gauge(controller)
        self._active = metrics._active_workers.gauge(controller)

    def set_max_concurrent_reconciles(self, workers: int) -> None:
        """The controller runs at most ``workers`` reconciles at once
        (``controller_runtime_max_concurrent_reconciles``)."""
        self._max.set(workers)

    def worker_started(self) -> None:
        """A worker took a request (``controller_runtime_active_workers`` + 1)."""
        self._active.inc()

    def worker_finished(self) -> None:
        """A worker finished its request (``controller_runtime_active_workers`` - 1)."""
        self._active.dec()

    def reconciled(self, result: str, seconds: float, *, terminal: bool = False) -> None:
        """One reconcile ended: ``result`` is ``success``, ``error``, ``requeue`` or
        ``requeue_after``; an ``error`` also counts an error (and a terminal one)."""
        self._results[result].inc()
        self._time.observe(seconds)
        if result == "error":
            self._errors.inc()
            if terminal:
                self._terminal.inc()

    def timed_out(self) -> None:
        """A reconcile ran past its timeout (``controller_runtime_reconcile_timeouts_total``)."""
        self._timeouts.inc()

    def conflicted(self) -> None:
        """A reconcile failed with a 409 Conflict (:data:`RECONCILE_CONFLICTS_TOTAL`)."""
        self._conflicts.inc()

    def stale(self) -> None:
        """A reconcile was postponed or failed for a stale cache (:data:`RECONCILE_STALE_TOTAL`)."""
        self._stale.inc()


class LeaderElectionMetrics:
    """``leader_election_master_status{name}`` (1 leading, 0 not) and
    ``leader_election_slowpath_total{name}``: a
    :class:`~kubereflector.leaderelection.LeaderMetrics`."""

    __slots__ = ("_slowpath", "_status")

    def __init__(self, metrics: Metrics) -> None:
        self._status = metrics._leader_status
        self._slowpath = metrics._leader_slowpath

    def on(self, name: str) -> None:
        """This process now leads the election ``name`` (status 1)."""
        self._status.gauge(name).set(1)

    def off(self, name: str) -> None:
        """This process no longer leads the election ``name`` (status 0)."""
        self._status.gauge(name).set(0)

    def slowpath_exercised(self, name: str) -> None:
        """A renewal of ``name`` had to read the Lease from the server first."""
        self._slowpath.counter(name).inc()


class ShardingMetrics:
    """The metrics of one replica of the sharded controller ``name`` (see the
    ``SHARDING_*`` names). Update it from one thread at a time."""

    __slots__ = ("_acquired", "_handoff", "_held", "_members", "_metrics", "_name", "_shard")

    def __init__(self, metrics: Metrics, name: str) -> None:
        self._metrics = metrics
        self._name = name
        self._held = metrics._sharding_held.gauge(name)
        self._members = metrics._sharding_members.gauge(name)
        self._acquired = metrics._sharding_acquisitions.counter(name)
        self._handoff = metrics._sharding_handoff.histogram(name)
        self._shard: dict[int, Gauge] = {}

    def _shard_gauge(self, shard: int) -> Gauge:
        gauge = self._shard.get(shard)
        if gauge is None:
            gauge = self._shard[shard] = self._metrics._sharding_shard.gauge(self._name, str(shard))
        return gauge

    def held(self, shards: Iterable[int], total: int) -> None:
        """This replica holds ``shards`` (of ``total``) now."""
        now = set(shards)
        self._held.set(len(now))
        for shard in range(total):
            self._shard_gauge(shard).set(1 if shard in now else 0)

    def members(self, count: int) -> None:
        """``count`` members are alive."""
        self._members.set(count)

    def acquired(self) -> None:
        """A shard was taken."""
        self._acquired.inc()

    def released(self, reason: str) -> None:
        """A shard stopped being reconciled here, for ``reason``."""
        self._metrics._sharding_releases.counter(self._name, reason).inc()

    def handoff(self, seconds: float) -> None:
        """A shard was handed back ``seconds`` after its drain began."""
        self._handoff.observe(seconds)


class RestClientMetrics:
    """``rest_client_requests_total{code,method,host}`` and
    ``rest_client_request_duration_seconds{verb,host}``: a
    :class:`~kubereflector.client.RequestMetrics` (``code`` is ``<error>`` when no
    answer came). The latency runs from sending to the answer's headers.
    Thread-safe."""

    __slots__ = ("_latency", "_lock", "_requests")

    def __init__(self, metrics: Metrics) -> None:
        self._requests = metrics._rest_requests
        self._latency = metrics._rest_latency
        self._lock = threading.Lock()

    def observe(self, method: str, code: str, host: str, seconds: float) -> None:
        """Count one request: its ``method``, the answer's status ``code`` (``<error>`` when none
        came), the server's ``host``, and ``seconds`` until the answer's headers. Any thread."""
        with self._lock:
            self._requests.counter(code, method, host).inc()
            self._latency.histogram(method, host).observe(seconds)


class WebhookMetrics:
    """controller-runtime's webhook server metrics: ``controller_runtime_webhook_requests_total
    {webhook,code}``, ``controller_runtime_webhook_latency_seconds{webhook}`` and
    ``controller_runtime_webhook_requests_in_flight{webhook}`` (``webhook`` is the path
    served). Update it from the server's event loop."""

    __slots__ = ("_in_flight", "_latency", "_requests")

    def __init__(self, metrics: Metrics) -> None:
        self._requests = metrics._webhook_requests
        self._latency = metrics._webhook_latency
        self._in_flight = metrics._webhook_in_flight

    def started(self, webhook: str) -> None:
        """A request to ``webhook`` arrived (in flight + 1)."""
        self._in_flight.gauge(webhook).inc()

    def finished(self, webhook: str, code: int, seconds: float) -> None:
        """The request to ``webhook`` was answered with HTTP ``code`` after ``seconds``
        (in flight - 1)."""
        self._in_flight.gauge(webhook).dec()
        self._requests.counter(webhook, str(code)).inc()
        self._latency.histogram(webhook).observe(seconds)


class WorkqueueMetricsProvider:
    """client-go's workqueue ``MetricsProvider``, with controller-runtime's labels:
    each ``new_*_metric(name)`` returns the metric's child for ``name`` (labels
    ``name`` and ``controller`` both set to it), with ``inc``, ``dec``, ``set``
    or ``observe`` as the metric's kind has them. (A work queue updates its
    metrics with its lock held.)"""

    __slots__ = ("_m",)

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics

    def new_depth_metric(self, name: str) -> Gauge:
        """The :data:`WORKQUEUE_DEPTH` child of the queue called ``name``."""
        return self._m._wq_depth.gauge(name, name)

    def new_adds_metric(self, name: str) -> Counter:
        """The :data:`WORKQUEUE_ADDS_TOTAL` child of the queue called ``name``."""
        return self._m._wq_adds.counter(name, name)

    def new_latency_metric(self, name: str) -> Histogram:
        """The :data:`WORKQUEUE_QUEUE_DURATION_SECONDS` child of the queue called ``name``."""
        return self._m._wq_latency.histogram(name, name)

    def new_work_duration_metric(self, name: str) -> Histogram:
        """The :data:`WORKQUEUE_WORK_DURATION_SECONDS` child of the queue called ``name``."""
        return self._m._wq_work_duration.histogram(name, name)

    def new_unfinished_work_seconds_metric(self, name: str) -> Gauge:
        """The :data:`WORKQUEUE_UNFINISHED_WORK_SECONDS` child of the queue called ``name``."""
        return self._m._wq_unfinished.gauge(name, name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> Gauge:
        """The :data:`WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS` child of the queue called
        ``name``."""
        return self._m._wq_longest.gauge(name, name)

    def new_retries_metric(self, name: str) -> Counter:
        """The :data:`WORKQUEUE_RETRIES_TOTAL` child of the queue called ``name``."""
        return self._m._wq_retries.counter(name, name)


InformerSource = Callable[[], Mapping[str, "SharedIndexInformer"]]
"""Returns the informers to report, by resource name (``factory.informers``)."""


class _UnfinishedWork(Protocol):
    def update_unfinished_work(self) -> None: ...


class _QueueRefresher(Collector):
    """Exports nothing: refreshes the queues' unfinished-work gauges before the
    registry reads them (registered first, so it runs first)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queues: dict[int, _UnfinishedWork] = {}

    def collect(self) -> Iterable[Metric]:
        with self.lock:
            queues = list(self.queues.values())
        for queue in queues:
            queue.update_unfinished_work()
        return ()


class _InformerCollector(Collector):
    """Reads the informers' stats at scrape time."""

    def __init__(self, sources: list[InformerSource]) -> None:
        self._sources = sources

    def collect(self) -> Iterable[Metric]:
        p = INFORMER_PREFIX
        objects = GaugeMetricFamily(p + "objects", "Objects in the cache", labels=["resource"])
        synced = GaugeMetricFamily(
            p + "synced", "1 once the initial list is in the cache", labels=["resource"]
        )
        pending = GaugeMetricFamily(
            p + "pending_notifications",
            "Notifications buffered for the handlers, not yet handled",
            labels=["resource"],
        )
        last_rv = GaugeMetricFamily(
            p + "last_sync_resource_version",
            "The resourceVersion the cache is at (NaN when not a number)",
            labels=["resource"],
        )
        silence = GaugeMetricFamily(
            p + "last_event_age_seconds",
            "Seconds since the server was last heard from: a watch event or bookmark, a "
            "list, a watch opened (NaN before the first)",
            labels=["resource"],
        )
        counters = {
            field: CounterMetricFamily(p + field, help_text, labels=["resource"])
            for field, help_text in (
                ("events", "Watch events received, bookmarks included"),
                ("deltas", "Changes applied to the cache"),
                ("lists", "Lists made (the initial one and relists)"),
                ("relists", "Lists made after the first"),
                ("watch_restarts", "Watches started again after one ended"),
                ("stalls", "Watches ended for being silent too long"),
            )
        }
        for source in self._sources:
            for resource, informer in sorted(source().items()):
                stats = informer.stats()
                objects.add_metric([resource], stats.objects)
                synced.add_metric([resource], 1.0 if informer.has_synced() else 0.0)
                pending.add_metric([resource], stats.pending)
                last_rv.add_metric([resource], _as_number(stats.last_sync_resource_version))
                age = stats.watch_silence
                silence.add_metric([resource], math.nan if age is None else age)
                for field, family in counters.items():
                    family.add_metric([resource], getattr(stats, field))
        return [objects, synced, pending, last_rv, silence, *counters.values()]


def _as_number(resource_version: str) -> float:
    try:
        return float(int(resource_version))
    except ValueError:
        return math.nan


class Metrics:
    """Every kubereflector metric, in one Prometheus registry.

    ``registry``: where to register (default: a new registry of this object's
    own). ``process``: also export the process' and the interpreter's metrics
    (``process_cpu_seconds_total``, ``python_gc_*``, ...). Constructing two
    Metrics on one registry raises ``ValueError`` (duplicate names).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        reg = self.registry
        self._refresher = _QueueRefresher()
        reg.register(self._refresher)
        families = Families()

        def family(
            kind: Literal["counter", "gauge", "histogram"],
            name: str,
            documentation: str,
            labels: list[str],
            buckets: tuple[float, ...] = (),
        ) -> Family:
            return families.add(Family(kind, name, documentation, labels, buckets))

        self._reconcile_total = family(
            "counter",
            RECONCILE_TOTAL,
            "Total number of reconciliations per controller",
            ["controller", "result"],
        )
        self._reconcile_errors = family(
            "counter",
            RECONCILE_ERRORS_TOTAL,
            "Total number of reconciliation errors per controller",
            ["controller"],
        )
        self._terminal_errors = family(
            "counter",
            TERMINAL_RECONCILE_ERRORS_TOTAL,
            "Total number of terminal reconciliation errors per controller",
            ["controller"],
        )
        self._reconcile_timeouts = family(
            "counter",
            RECONCILE_TIMEOUTS_TOTAL,
            "Total number of reconciliation timeouts per controller",
            ["controller"],
        )
        self._reconcile_conflicts = family(
            "counter",
            RECONCILE_CONFLICTS_TOTAL,
            "Reconciles that failed with a conflict and were retried, per controller",
            ["controller"],
        )
        self._reconcile_stale = family(
            "counter",
            RECONCILE_STALE_TOTAL,
            "Reconciles postponed or failed because the cache had not seen the "
            "request's own writes in time, per controller",
            ["controller"],
        )
        self._reconcile_time = family(
            "histogram",
            RECONCILE_TIME_SECONDS,
            "Length of time per reconciliation per controller",
            ["controller"],
            _RECONCILE_BUCKETS,
        )
        self._max_concurrent = family(
            "gauge",
            MAX_CONCURRENT_RECONCILES,
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
        )
        self._active_workers = family(
            "gauge",
            ACTIVE_WORKERS,
            "Number of currently used workers per controller",
            ["controller"],
        )
        queue = ["name", "controller"]
        self._wq_depth = family("gauge", WORKQUEUE_DEPTH, "Current depth of workqueue", queue)
        self._wq_adds = family(
            "counter", WORKQUEUE_ADDS_TOTAL, "Total number of adds handled by workqueue", queue
        )
        self._wq_latency = family(
            "histogram",
            WORKQUEUE_QUEUE_DURATION_SECONDS,
            "How long in seconds an item stays in workqueue before being requested",
            queue,
            _WORKQUEUE_BUCKETS,
        )
        self._wq_work_duration = family(
            "histogram",
            WORKQUEUE_WORK_DURATION_SECONDS,
            "How long in seconds processing an item from workqueue takes",
            queue,
            _WORKQUEUE_BUCKETS,
        )
        self._wq_unfinished = family(
            "gauge",
            WORKQUEUE_UNFINISHED_WORK_SECONDS,
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads. One can deduce "
            "the number of stuck threads by observing the rate at which this increases.",
            queue,
        )
        self._wq_longest = family(
            "gauge",
            WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS,
            "How many seconds has the longest running processor for workqueue been running.",
            queue,
        )
        self._wq_retries = family(
            "counter",
            WORKQUEUE_RETRIES_TOTAL,
            "Total number of retries handled by workqueue",
            queue,
        )
        self._leader_status = family(
            "gauge",
            LEADER_ELECTION_MASTER_STATUS,
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease. "
            "Please make sure to group by name.",
            ["name"],
        )
        self._leader_slowpath = family(
            "counter",
            LEADER_ELECTION_SLOWPATH_TOTAL,
            "Total number of slow path exercised in renewing leader leases. 'name' is the "
            "string used to identify the lease. Please make sure to group by name.",
            ["name"],
        )
        self._rest_requests = family(
            "counter",
            REST_CLIENT_REQUESTS_TOTAL,
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
        )
        self._rest_latency = family(
            "histogram",
            REST_CLIENT_REQUEST_DURATION_SECONDS,
            "Request latency in seconds. Broken down by verb and host.",
            ["verb", "host"],
            _RECONCILE_BUCKETS,
        )
        self._webhook_requests = family(
            "counter",
            WEBHOOK_REQUESTS_TOTAL,
            "Total number of admission requests by HTTP status code.",
            ["webhook", "code"],
        )
        self._webhook_latency = family(
            "histogram",
            WEBHOOK_LATENCY_SECONDS,
            "Histogram of the latency of processing admission requests",
            ["webhook"],
            _WEBHOOK_BUCKETS,
        )
        self._webhook_in_flight = family(
            "gauge",
            WEBHOOK_REQUESTS_IN_FLIGHT,
            "Current number of admission requests being served.",
            ["webhook"],
        )
        self._sharding_held = family(
            "gauge", SHARDING_SHARDS_HELD, "Virtual shards held by this replica", ["name"]
        )
        self._sharding_shard = family(
            "gauge",
            SHARDING_SHARD_HELD,
            "Whether this replica holds the virtual shard (1) or not (0)",
            ["name", "shard"],
        )
        self._sharding_members = family(
            "gauge", SHARDING_MEMBERS, "Replicas seen alive, this one included", ["name"]
        )
        self._sharding_acquisitions = family(
            "counter", SHARDING_ACQUISITIONS_TOTAL, "Virtual shards taken by this replica", ["name"]
        )
        self._sharding_releases = family(
            "counter",
            SHARDING_RELEASES_TOTAL,
            "Virtual shards this replica stopped reconciling, by reason",
            ["name", "reason"],
        )
        self._sharding_handoff = family(
            "histogram",
            SHARDING_HANDOFF_SECONDS,
            "Seconds from a shard's drain to its Lease freed",
            ["name"],
            _RECONCILE_BUCKETS,
        )
        reg.register(families)
        self._informer_sources: list[InformerSource] = []
        reg.register(_InformerCollector(self._informer_sources))
        if process:
            ProcessCollector(registry=reg)
            PlatformCollector(registry=reg)
            GCCollector(registry=reg)

    def controller(self, name: str) -> ControllerMetrics:
        """The reconcile metrics of controller ``name``."""
        return ControllerMetrics(self, name)

    def workqueue_provider(self) -> WorkqueueMetricsProvider:
        """A workqueue metrics provider reporting here."""
        return WorkqueueMetricsProvider(self)

    def track_queue(self, queue: _UnfinishedWork) -> None:
        """Refresh ``queue``'s ``workqueue_unfinished_work_seconds`` and
        ``workqueue_longest_running_processor_seconds`` at each scrape, until
        :meth:`untrack_queue`."""
        with self._refresher.lock:
            self._refresher.queues[id(queue)] = queue

    def untrack_queue(self, queue: _UnfinishedWork) -> None:
        """Stop refreshing ``queue`` (no error if it was not tracked)."""
        with self._refresher.lock:
            self._refresher.queues.pop(id(queue), None)

    def leader_election(self) -> LeaderElectionMetrics:
        """Leader election metrics reporting here."""
        return LeaderElectionMetrics(self)

    def sharding(self, name: str) -> ShardingMetrics:
        """The metrics of this replica of the sharded controller ``name``."""
        return ShardingMetrics(self, name)

    def rest_client(self) -> RestClientMetrics:
        """REST client metrics reporting here."""
        return RestClientMetrics(self)

    def webhooks(self) -> WebhookMetrics:
        """Webhook server metrics reporting here."""
        return WebhookMetrics(self)

    def add_informers(self, source: InformerSource) -> None:
        """Report the informers ``source()`` returns at each scrape (e.g. a
        factory's ``informers``), under the ``kubereflector_informer_`` prefix."""
        if not callable(source):
            raise TypeError("add_informers takes a callable returning informers by name")
        self._informer_sources.append(source)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format (what ``/metrics`` serves)."""
        return generate_latest(self.registry)

    def __repr__(self) -> str:
        return f"<Metrics registry={self.registry!r}>"
