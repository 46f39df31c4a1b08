"""The webhook server (:class:`WebhookServer`): one HTTPS server, on aiohttp, for every
admission webhook (each at its path) and every conversion (at ``/convert``) of a
:class:`~kubereflector.runtime.webhooks.Webhooks` registry; a
:class:`~kubereflector.runtime.Runnable` a Manager runs on every replica.

* **TLS** from a certificate and key in files it checks every few seconds and loads
  again when they change (what cert-manager mounts; connections opened afterwards get
  the new certificate, without a restart), or, without files, from a self-signed CA it
  generates (:attr:`WebhookServer.ca_bundle` is then the ``caBundle`` to give the API
  server; with ``WebhookOptions(install=...)`` the server writes its configurations and
  the CRDs' conversion stanzas with it).
* **Bounded**: a body larger than ``max_request_bytes`` is refused (413) unread, one
  that takes longer than ``read_timeout`` to arrive is dropped (408), and a handler that
  takes longer than ``handler_timeout`` (or than the ``?timeout=`` kube-apiserver sends)
  is answered with a denial saying so.
* **Clear answers**: a body that is not a v1 review gets a 400 with a ``Status`` naming
  the problem, another content type a 415, another method a 405, another path a 404;
  a handler that raises gets a denial, never a 500 or a stack trace (see
  :mod:`kubereflector.runtime.webhooks.admission`).
* **Metrics** under controller-runtime's names (see
  :class:`~kubereflector.metrics.WebhookMetrics`), and :meth:`WebhookServer.ready` for
  ``/readyz``: true once the server listens with a certificate that has not expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import re
import shutil
import ssl
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import msgspec

from ..._aio.timeout import within
from ...clock import Clock, RealClock
from .admission import ReviewError
from .certificates import CertificateFiles, CertificateProblem, SelfSignedCertificate
from .configuration import CONVERSION_PATH, WebhookEndpoint, install_webhooks
from .conversion import review_conversion
from .registry import Webhooks

if TYPE_CHECKING:
    from aiohttp import web

    from ...client.rest import Client
    from ...metrics import WebhookMetrics

__all__ = ["WebhookOptions", "WebhookServer"]

logger = logging.getLogger("kubereflector.runtime.webhooks")

_T = TypeVar("_T")

_ENCODER: Final = msgspec.json.Encoder()
_JSON: Final = "application/json"
_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNITS: Final = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True, slots=True)
class WebhookOptions:
    """How a :class:`WebhookServer` serves (every field has a default).

    * ``cert_dir``: a directory holding ``cert_name`` and ``key_name`` (PEM; and
      ``ca.crt``, taken as the CA bundle when present), watched every
      ``cert_check_interval`` seconds and loaded again when they change; ``None``: a
      self-signed CA and certificate for ``hosts``, made at the start (needs the
      ``webhooks`` extra);
    * ``hosts``: the names and addresses the self-signed certificate is for (add the
      Service's ``<name>.<namespace>.svc`` in a cluster);
    * ``max_request_bytes``: the largest body accepted (default 7 MiB, as
      controller-runtime: an object and its old version);
    * ``read_timeout``: seconds for a request's body to arrive;
    * ``handler_timeout``: seconds a handler may take (keep it under the configuration's
      ``timeoutSeconds``, 10 by default: the API server gives up then);
    * ``endpoint``: how the API server reaches this server, for the configurations
      (default ``https://127.0.0.1:<port>``);
    * ``install``: the name of the webhook configurations to write to the cluster once
      the server listens (server-side apply), the CRDs' conversion stanzas too, with
      :attr:`WebhookServer.ca_bundle`; ``None`` (default): leave the cluster alone.

    Raises ``ValueError`` for a limit or interval that is not positive.
    """

    cert_dir: str | None = None
    cert_name: str = "tls.crt"
    key_name: str = "tls.key"
    hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
    max_request_bytes: int = 7 * 1024 * 1024
    read_timeout: float = 10.0
    handler_timeout: float = 9.0
    cert_check_interval: float = 10.0
    endpoint: WebhookEndpoint | None = None
    install: str | None = None

    def __post_init__(self) -> None:
        for name in ("max_request_bytes", "read_timeout", "handler_timeout", "cert_check_interval"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number, not {value!r}")
        if isinstance(self.hosts, str):
            raise TypeError("hosts is a tuple of names and addresses, not one string")


def _status(code: int, reason: str, message: str) -> bytes:
    return _ENCODER.encode(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    )


def _go_duration(text: str) -> float | None:
    """Seconds of a Go duration (``10s``, ``1m30s``, ``500ms``), or ``None``."""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNITS[u] for n, u in parts)


async def _bounded(clock: Clock, seconds: float, work: Awaitable[_T]) -> _T:
    """``await work``, raising ``TimeoutError`` after ``seconds`` (``work`` cancelled and
    finished by then). On the real clock without a task or a future of its own (a timer
    that cancels the current task: what ``asyncio.timeout`` does, which Python 3.10
    lacks): a request pays for no more than one timer. Other clocks (tests): ``within``."""
    if type(clock) is not RealClock:
        return await within(clock, seconds, work)
    task = asyncio.current_task()
    assert task is not None
    fired = False

    def expire() -> None:
        nonlocal fired
        fired = True
        task.cancel()

    timer = asyncio.get_running_loop().call_later(seconds, expire)
    try:
        return await work
    except asyncio.CancelledError:
        if not fired:
            raise
        uncancel = getattr(task, "uncancel", None)  # Python 3.11+: the cancel is spent
        if uncancel is not None:
            uncancel()
        raise TimeoutError from None
    finally:
        timer.cancel()


async def _read(request: web.BaseRequest, limit: int) -> bytes:
    """The body, up to ``limit`` bytes (413 beyond, without reading the rest)."""
    stream = request.content
    length = request.content_length
    if length is not None:  # checked against the limit already
        return await stream.readexactly(length) if length else b""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await stream.readany()
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise _Refused(
                413, "RequestEntityTooLarge", f"the body is larger than the limit of {limit} bytes"
            )
        chunks.append(chunk)


class _Refused(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message


class WebhookServer:
    """Serves ``webhooks`` over HTTPS on ``host:port`` (``port=0``: a free port; see
    :attr:`port` and :attr:`url` once started). ``options``: :class:`WebhookOptions`.
    ``metrics``: where to count requests (see :meth:`Metrics.webhooks
    <kubereflector.metrics.Metrics.webhooks>`); ``clock``: times the certificate checks
    and the read and handler timeouts (tests drive it with a FakeClock); ``client``: what
    ``options.install`` writes with.

    A :class:`~kubereflector.runtime.Runnable`: ``await server.run(stopping)`` serves
    until ``stopping`` is set; or :meth:`start` and :meth:`stop`. Use it from one event
    loop. Raises from :meth:`start`: ``OSError`` when the port cannot be bound,
    :class:`~kubereflector.runtime.webhooks.CertificateProblem` when the certificate
    files cannot be loaded, :class:`~kubereflector.runtime.webhooks.WebhookExtraMissing`
    for a self-signed certificate without the ``webhooks`` extra.
    """

    def __init__(
        self,
        webhooks: Webhooks,
        *,
        port: int = 9443,
        host: str = "0.0.0.0",
        options: WebhookOptions | None = None,
        metrics: WebhookMetrics | None = None,
        clock: Clock | None = None,
        client: Client | None = None,
    ) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be a port number (0..65535), not {port!r}")
        if options is not None and not isinstance(options, WebhookOptions):
            raise TypeError("options must be a WebhookOptions")
        self.webhooks = webhooks
        self.options = options if options is not None else WebhookOptions()
        if self.options.install is not None and client is None:
            raise ValueError("WebhookOptions(install=...) needs the client= to install with")
        self._host = host
        self._port = port
        self._metrics = metrics
        self._clock: Clock = clock if clock is not None else RealClock()
        self._client = client
        self._context: ssl.SSLContext | None = None
        self._files: CertificateFiles | None = None
        self._self_signed: SelfSignedCertificate | None = None
        self._tmpdir: str | None = None
        self._runner: web.ServerRunner | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._listening = False
        self._serving = asyncio.Event()  # listening, and installed when it installs

    # -- where and what ------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port (the bound one once started)."""
        return self._port

    @property
    def url(self) -> str:
        """``https://host:port`` (``127.0.0.1`` when bound to every address); valid once
        started (``port=0`` is chosen then)."""
        host = "127.0.0.1" if self._host in ("", "0.0.0.0", "::") else self._host
        if ":" in host:
            host = f"[{host}]"
        return f"https://{host}:{self._port}"

    @property
    def endpoint(self) -> WebhookEndpoint:
        """How the API server reaches this server: ``options.endpoint``, else :attr:`url`."""
        return self.options.endpoint or WebhookEndpoint.at_url(self.url)

    @property
    def ca_bundle(self) -> bytes | None:
        """The PEM of the CA the API server must trust: the self-signed one (made now if
        need be), or ``ca.crt`` in ``cert_dir`` if there is one; ``None`` otherwise
        (cert-manager's CA injector, or a CA the cluster trusts, then fills it in)."""
        if self.options.cert_dir is None:
            return self._certificate().ca_pem
        ca = Path(self.options.cert_dir) / "ca.crt"
        try:
            return ca.read_bytes()
        except OSError:
            return None

    def ready(self) -> bool:
        """Whether the server listens with a certificate that has not expired (a
        readiness check: quick, any thread)."""
        files = self._files
        if not self._listening or files is None or not files.loaded:
            return False
        return files.not_after is None or files.not_after > datetime.datetime.now(
            datetime.timezone.utc
        )

    def configurations(self, name: str) -> list[Any]:
        """The webhook configurations named ``name`` for what is registered, calling
        :attr:`endpoint` and trusting :attr:`ca_bundle` (see :meth:`Webhooks.configurations
        <kubereflector.runtime.webhooks.Webhooks.configurations>`)."""
        return list(self.webhooks.configurations(name, self.endpoint, self.ca_bundle))

    # -- lifecycle ----------------------------------------------------------------------

    async def run(self, stopping: asyncio.Event) -> None:
        """Serve until ``stopping`` is set (installing the configurations first when
        ``options.install`` says so), then stop."""
        await self.start()
        try:
            if self.options.install is not None:
                assert self._client is not None
                await install_webhooks(
                    self._client,
                    self.options.install,
                    self.webhooks.admission,
                    self.webhooks.conversions,
                    self.endpoint,
                    self.ca_bundle,
                )
                logger.info("installed the webhook configurations %s", self.options.install)
            self._serving.set()
            await stopping.wait()
        finally:
            await self.stop()

    async def wait_serving(self) -> None:
        """Return once the server listens (under :meth:`run` with ``options.install``:
        once the configurations are written too). Await it on the server's event loop."""
        await self._serving.wait()

    async def start(self) -> None:
        """Load the certificate, listen, and start checking the certificate files."""
        from aiohttp import web

        if self._runner is not None:
            raise RuntimeError("the webhook server is already running")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        files = self._certificate_files()
        files.load(context)
        self._context, self._files = context, files
        server = web.Server(self._serve, access_log=None, handler_cancellation=True)
        runner = web.ServerRunner(server, shutdown_timeout=5.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._host, self._port, ssl_context=context)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])
        self._listening = True
        self._watcher = asyncio.create_task(self._watch_certificates(), name="webhook certificates")
        if self.options.install is None:
            self._serving.set()
        logger.info(
            "serving webhooks on %s: %s", self.url, [w.path for w in self.webhooks.admission]
        )

    async def stop(self) -> None:
        """Stop listening and checking the certificate (idempotent)."""
        self._listening = False
        self._serving.clear()
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    # -- certificates -------------------------------------------------------------------

    def _certificate(self) -> SelfSignedCertificate:
        if self._self_signed is None:
            self._self_signed = SelfSignedCertificate.generate(self.options.hosts)
        return self._self_signed

    def _certificate_files(self) -> CertificateFiles:
        options = self.options
        if options.cert_dir is not None:
            folder = Path(options.cert_dir)
            return CertificateFiles(folder / options.cert_name, folder / options.key_name)
        self._tmpdir = tempfile.mkdtemp(prefix="kubereflector-webhook-certs-")
        cert, key = self._certificate().write(self._tmpdir)
        return CertificateFiles(cert, key)

    def reload_certificates(self) -> bool:
        """Check the certificate files now and load them if they changed; returns whether
        they were loaded. Raises
        :class:`~kubereflector.runtime.webhooks.CertificateProblem` when they changed but
        cannot be used (the server keeps the certificate it has), ``RuntimeError`` before
        :meth:`start`."""
        if self._files is None or self._context is None:
            raise RuntimeError("the webhook server has not started")
        loaded = self._files.load(self._context)
        if loaded:
            logger.info("loaded the webhook certificate %s again", self._files.cert_path)
        return loaded

    async def _watch_certificates(self) -> None:
        while True:
            await self._clock.sleep(self.options.cert_check_interval)
            try:
                self.reload_certificates()
            except CertificateProblem as exc:
                logger.warning("keeping the webhook certificate: %s", exc)

    # -- requests -----------------------------------------------------------------------

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        from aiohttp import web

        path = request.path
        webhook = self.webhooks.at(path)
        if webhook is None and (path != CONVERSION_PATH or not self.webhooks.conversions):
            return web.Response(
                status=404,
                body=_status(404, "NotFound", f"no webhook is served at {path}"),
                content_type=_JSON,
            )
        metrics = self._metrics
        if metrics is not None:
            metrics.started(path)
        started = time.perf_counter()
        code = 200
        try:
            try:
                body = await self._body(request)
                if webhook is not None:
                    answer = await webhook.review(body, timeout=self._limit(request))
                else:
                    conversions = self.webhooks.conversion_map()
                    loop = asyncio.get_running_loop()
                    answer = await loop.run_in_executor(None, review_conversion, conversions, body)
            except _Refused as refused:
                code = refused.code
                response = web.Response(
                    status=code,
                    body=_status(code, refused.reason, refused.message),
                    content_type=_JSON,
                )
                if code in (408, 413):
                    response.force_close()  # the rest of the body is not read
                return response
            except ReviewError as exc:
                code = exc.status
                reason = "BadRequest" if code == 400 else "UnsupportedMediaType"
                return web.Response(
                    status=code, body=_status(code, reason, str(exc)), content_type=_JSON
                )
            return web.Response(body=answer, content_type=_JSON)
        finally:
            if metrics is not None:
                metrics.finished(path, code, time.perf_counter() - started)

    async def _body(self, request: web.BaseRequest) -> bytes:
        if request.method != "POST":
            raise _Refused(
                405, "MethodNotAllowed", f"{request.method} is not allowed: POST a review"
            )
        content_type = request.content_type
        if content_type != _JSON:
            raise _Refused(
                415,
                "UnsupportedMediaType",
                f"the body must be application/json, not {content_type or 'unspecified'}",
            )
        limit = self.options.max_request_bytes
        length = request.content_length
        if length is not None and length > limit:
            raise _Refused(
                413,
                "RequestEntityTooLarge",
                f"the body of {length} bytes is larger than the limit of {limit} bytes",
            )
        try:
            return await _bounded(self._clock, self.options.read_timeout, _read(request, limit))
        except asyncio.IncompleteReadError:
            raise _Refused(400, "BadRequest", "the request body ended early") from None
        except TimeoutError:
            raise _Refused(408, "Timeout", "the request body did not arrive in time") from None

    def _limit(self, request: web.BaseRequest) -> Any:
        seconds = self.options.handler_timeout
        asked = _go_duration(request.query.get("timeout", ""))
        if asked is not None:
            seconds = min(seconds, asked * 0.9)  # answer before the API server gives up
        clock = self._clock

        def timeout(work: Any) -> Any:
            return _bounded(clock, seconds, work)

        return timeout

    def __repr__(self) -> str:
        state = self.url if self._listening else "stopped"
        return f"<WebhookServer {state} {self.webhooks!r}>"
