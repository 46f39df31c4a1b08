"""Prometheus metrics for informers, workqueues, controllers, leader election and the
REST client, under the names client-go and controller-runtime use, and the HTTP
server for ``/metrics``, ``/healthz`` and ``/readyz``.

Built on ``prometheus-client``. The :class:`~kubereflector.runtime.Manager` makes
and serves one :class:`Metrics`; use it directly to export the metrics of your
own informers and queues::

    metrics = Metrics()
    metrics.add_informers(factory.informers)
    client.request_metrics = metrics.rest_client()
    server = MetricsServer(port=8080, metrics=metrics)
    await server.start()
"""

from __future__ import annotations

from .prometheus import (
    ACTIVE_WORKERS,
    INFORMER_PREFIX,
    LEADER_ELECTION_MASTER_STATUS,
    LEADER_ELECTION_SLOWPATH_TOTAL,
    MAX_CONCURRENT_RECONCILES,
    RECONCILE_ERRORS_TOTAL,
    RECONCILE_TIME_SECONDS,
    RECONCILE_TOTAL,
    REST_CLIENT_REQUEST_DURATION_SECONDS,
    REST_CLIENT_REQUESTS_TOTAL,
    TERMINAL_RECONCILE_ERRORS_TOTAL,
    WORKQUEUE_ADDS_TOTAL,
    WORKQUEUE_DEPTH,
    WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS,
    WORKQUEUE_QUEUE_DURATION_SECONDS,
    WORKQUEUE_RETRIES_TOTAL,
    WORKQUEUE_UNFINISHED_WORK_SECONDS,
    WORKQUEUE_WORK_DURATION_SECONDS,
    ControllerMetrics,
    InformerSource,
    LeaderElectionMetrics,
    Metrics,
    RestClientMetrics,
    WorkqueueMetricsProvider,
)
from .server import Check, MetricsServer

__all__ = [
    "ACTIVE_WORKERS",
    "INFORMER_PREFIX",
    "LEADER_ELECTION_MASTER_STATUS",
    "LEADER_ELECTION_SLOWPATH_TOTAL",
    "MAX_CONCURRENT_RECONCILES",
    "RECONCILE_ERRORS_TOTAL",
    "RECONCILE_TIME_SECONDS",
    "RECONCILE_TOTAL",
    "REST_CLIENT_REQUESTS_TOTAL",
    "REST_CLIENT_REQUEST_DURATION_SECONDS",
    "TERMINAL_RECONCILE_ERRORS_TOTAL",
    "WORKQUEUE_ADDS_TOTAL",
    "WORKQUEUE_DEPTH",
    "WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS",
    "WORKQUEUE_QUEUE_DURATION_SECONDS",
    "WORKQUEUE_RETRIES_TOTAL",
    "WORKQUEUE_UNFINISHED_WORK_SECONDS",
    "WORKQUEUE_WORK_DURATION_SECONDS",
    "Check",
    "ControllerMetrics",
    "InformerSource",
    "LeaderElectionMetrics",
    "Metrics",
    "MetricsServer",
    "RestClientMetrics",
    "WorkqueueMetricsProvider",
]
