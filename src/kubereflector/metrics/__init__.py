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

# The package's API is its modules' __all__, each listed once, in its own module.
from . import prometheus, server
from .prometheus import *  # noqa: F403
from .server import *  # noqa: F403

__all__ = prometheus.__all__ + server.__all__
