"""An HTTP server for ``/metrics`` and the health probes ``/healthz`` and ``/readyz``.

What a manager exposes to Prometheus and to the kubelet, on aiohttp (already a
dependency). ``/metrics`` serves a :class:`~kubereflector.metrics.Metrics`
registry in Prometheus' text format; ``/healthz`` and ``/readyz`` run named
checks (plain functions returning ``True`` when healthy; one that returns
``False`` or raises fails) and answer ``200 ok``, or ``500`` with one line per
failed check (``[-]informers failed``), as Kubernetes components do; with
``?verbose`` every check gets a line. A path that is not served is 404.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Final

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from .prometheus import Metrics

__all__ = ["Check", "MetricsServer"]

logger = logging.getLogger("kubereflector.metrics")

Check = Callable[[], bool]
"""A health or readiness check: quick, non-blocking, ``True`` when passing."""

_HEALTH_PATHS: Final = ("/healthz", "/readyz")


class MetricsServer:
    """Serves ``metrics`` at ``/metrics`` and ``healthz``/``readyz`` checks at
    ``/healthz``/``/readyz`` on ``host:port`` (``port=0``: any free port; read
    :attr:`port` after :meth:`start`). Leave out what you do not want served
    (``metrics=None``, ``healthz=None``, ...).

    Start and stop it on one event loop; checks run on that loop.
    """

    def __init__(
        self,
        *,
        host: str = "0.0.0.0",
        port: int = 0,
        metrics: Metrics | None = None,
        healthz: Mapping[str, Check] | None = None,
        readyz: Mapping[str, Check] | None = None,
    ) -> None:
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer in 0..65535, not {port!r}")
        self._host = host
        self._port = port
        self._metrics = metrics
        self._checks: dict[str, Mapping[str, Check] | None] = {
            "/healthz": healthz,
            "/readyz": readyz,
        }
        self._runner: web.AppRunner | None = None
        self._bound_port: int | None = None

    @property
    def port(self) -> int:
        """The port listened on (``RuntimeError`` before :meth:`start`)."""
        if self._bound_port is None:
            raise RuntimeError("the server has not started")
        return self._bound_port

    @property
    def url(self) -> str:
        """``http://host:port`` of the server (``127.0.0.1`` when bound to every address), once
        started."""
        host = "127.0.0.1" if self._host in ("0.0.0.0", "") else self._host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Listen. Raises ``OSError`` if the port cannot be bound."""
        if self._runner is not None:
            raise RuntimeError("the server has already started")
        app = web.Application()
        if self._metrics is not None:
            app.router.add_get("/metrics", self._serve_metrics)
        for path in _HEALTH_PATHS:
            if self._checks[path] is not None:
                app.router.add_get(path, self._serve_checks)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._bound_port = int(runner.addresses[0][1])
        logger.info("serving %s on %s", ", ".join(self.paths()), self.url)

    def paths(self) -> list[str]:
        """The paths served."""
        served = ["/metrics"] if self._metrics is not None else []
        return served + [p for p in _HEALTH_PATHS if self._checks[p] is not None]

    async def stop(self) -> None:
        """Stop listening (idempotent)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _serve_metrics(self, _request: web.Request) -> web.Response:
        assert self._metrics is not None
        return web.Response(
            body=self._metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def _serve_checks(self, request: web.Request) -> web.Response:
        checks = self._checks[request.path] or {}
        lines: list[str] = []
        failed = False
        for name, check in checks.items():
            try:
                ok = bool(check())
            except Exception as err:
                logger.warning("%s check %s raised: %s", request.path, name, err)
                ok = False
            failed |= not ok
            lines.append(f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}")
        verbose = "verbose" in request.query
        if failed:
            text = "\n".join(line for line in lines if verbose or line.startswith("[-]"))
            return web.Response(status=500, text=f"{text}\n{request.path[1:]} check failed\n")
        text = "\n".join([*lines, f"{request.path[1:]} check passed"]) if verbose else "ok"
        return web.Response(text=text + "\n" if verbose else text)
