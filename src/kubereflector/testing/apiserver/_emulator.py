"""The emulator itself (:class:`ApiServerEmulator`): its lifecycle (listen, restart,
stop; TLS; the kubeconfig), its Python data API and its faults, over the store,
the faults and the watches that the handler serves.

Private module: the public names are re-exported by
:mod:`kubereflector.testing.apiserver`, whose documentation describes them.
"""

from __future__ import annotations

import asyncio
import base64
import enum
import os
import secrets
import shutil
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Literal

import yaml
from aiohttp import web

from ...clock import Clock, RealClock
from ...errors import ApiError, error_from_status
from .._listening import stop_accepting
from . import _conversion, _webhook_configs
from ._admission import Admission
from ._authorization import Authorization, Denial, RbacMode
from ._conversion import Conversions
from ._crd import install as install_crds
from ._faults import Faults
from ._handler import ApiHandler
from ._rbac import install as install_rbac
from ._records import ENCODER, Record, copy_out, decode
from ._resources import DEFAULT_VERBS, ServedResource
from ._reviews import install as install_reviews
from ._statuses import StatusError, not_found
from ._store import Store
from ._tls import make_server_tls
from ._users import Users
from ._watch import Watches
from ._webhook_client import WebhookCaller
from ._writes import Writes

__all__ = ["RANDOM_TOKEN", "ApiServerEmulator"]

_CONTEXT: Final = "emulator"
_LOCAL_NAMES: Final = ("127.0.0.1", "localhost", "::1")


async def _stop_accepting(runner: web.BaseRunner) -> None:
    """Stop ``runner``'s sites taking connections, and let those accepted already
    become connections (closed with the others) before the sites close: see
    :mod:`kubereflector.testing._listening`. aiohttp keeps a site's asyncio server
    in its private ``_server``; without one nothing is done."""
    servers = [getattr(site, "_server", None) for site in runner.sites]
    await stop_accepting(*(s for s in servers if isinstance(s, asyncio.AbstractServer)))


class _Token(enum.Enum):
    RANDOM = "random"


RANDOM_TOKEN: Final = _Token.RANDOM
"""The default ``token``: a fresh random bearer token per emulator."""


class ApiServerEmulator:
    """A kube-apiserver stand-in over real HTTP (see :mod:`kubereflector.testing.apiserver`).

    ``host``/``port``: where to listen (``port=0``: an ephemeral port, kept
    across :meth:`restart`). ``tls``: serve HTTPS with a certificate from a CA
    generated at first start (``ca_pem``; needs the ``emulator`` extra:
    ``pip install 'kubereflector[emulator]'``). ``token``: the
    bearer token every request must carry (``None``: no authentication; by
    default a random one). ``history_limit``: events retained per resource for
    watches and continue tokens from older resourceVersions; ``history_seconds``:
    also drop events older than that (on ``clock``). ``bookmark_interval``:
    seconds between BOOKMARKs on watches that allow them. ``rbac``: what happens to
    a request RBAC refuses (``"enforce"``: a 403, as kube-apiserver; ``"report"``:
    served anyway); either way it is kept in :meth:`denials`. The emulator's own
    token is user ``admin`` in ``system:masters``, which RBAC never refuses (and
    without a token every request is that user).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        token: str | Literal[_Token.RANDOM] | None = RANDOM_TOKEN,
        history_limit: int = 10_000,
        history_seconds: float | None = None,
        bookmark_interval: float = 60.0,
        clock: Clock | None = None,
        rbac: RbacMode = "enforce",
    ) -> None:
        if history_limit < 0:
            raise ValueError(f"history_limit must be >= 0 (got {history_limit})")
        if history_seconds is not None and history_seconds < 0:
            raise ValueError(f"history_seconds must be >= 0 or None (got {history_seconds})")
        if not bookmark_interval > 0:
            raise ValueError(f"bookmark_interval must be > 0 (got {bookmark_interval})")
        self._host = host
        self._port = port
        self._tls = tls
        self._token: str | None = secrets.token_urlsafe(24) if token is RANDOM_TOKEN else token
        self.clock: Final[Clock] = clock if clock is not None else RealClock()
        self._store = Store(
            clock=self.clock, history_limit=history_limit, history_seconds=history_seconds
        )
        install_crds(self._store)
        _webhook_configs.install(self._store)
        self._caller = WebhookCaller(self.clock)
        self._conversions = Conversions(self._caller)
        _conversion.install(self._store, self._conversions)
        self._admission = Admission(self._store, self._caller, self._conversions)
        writes = Writes(self._store, self._admission, self._conversions)
        install_rbac(self._store)
        install_reviews(self._store)
        self._authorization = Authorization(self._store, rbac)
        self._users = Users(
            self._token, clock=self.clock, service_account_uid=self._service_account_uid
        )
        self._faults = Faults()
        self._watches = Watches(
            store=self._store,
            clock=self.clock,
            faults=self._faults,
            bookmark_interval=bookmark_interval,
        )
        self._watches.convert = self._conversions.convert
        self._watches.converts = writes.converts
        self._handler = ApiHandler(
            store=self._store,
            faults=self._faults,
            watches=self._watches,
            users=self._users,
            authorization=self._authorization,
            server_address=lambda: f"{self._url_host()}:{self._port}",
            restart=self._bounce,
            writes=writes,
        )
        self._ssl: ssl.SSLContext | None = None
        self._ca_pem: bytes | None = None
        self._web_server: web.Server | None = None
        self._runner: web.ServerRunner | None = None
        self._tmpdir: str | None = None
        self._owner: int | None = None  # the thread of the serving event loop

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> ApiServerEmulator:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Listen, and write the kubeconfig (:attr:`kubeconfig_path`)."""
        if self._runner is not None:
            raise RuntimeError("the emulator is already running")
        if self._tls and self._ssl is None:
            self._make_tls()
        self._web_server = web.Server(self._handler, handler_cancellation=True, access_log=None)
        self._runner = web.ServerRunner(self._web_server, shutdown_timeout=5.0)
        await self._runner.setup()
        try:
            await self._listen()
        except BaseException:
            await self._runner.cleanup()
            self._runner = None
            raise
        self._owner = threading.get_ident()
        self._tmpdir = tempfile.mkdtemp(prefix="kubereflector-emulator-")
        self.write_kubeconfig(os.path.join(self._tmpdir, "kubeconfig"))

    async def stop(self) -> None:
        """End every watch, close every connection, stop listening; remove the kubeconfig.

        The data stays: :meth:`start` serves it again, on the same port.
        """
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._watches.drop(abrupt=False)
        await _stop_accepting(runner)
        await runner.cleanup()
        await self._caller.close()
        self._web_server = None
        self._owner = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    async def restart(self) -> None:
        """Stop and start again on the same port, as a restarted kube-apiserver: every
        connection and stream is cut (watches end without the closing chunk), the
        data and the history stay."""
        await self._bounce(None)

    async def _bounce(self, keep: Any) -> None:
        runner, server = self._runner, self._web_server
        if runner is None or server is None:
            raise RuntimeError("the emulator is not running")
        self._watches.drop(abrupt=True)
        await _stop_accepting(runner)
        for site in list(runner.sites):
            await site.stop()
        for connection in server.connections:
            if connection is not keep:
                connection.force_close()
        await asyncio.sleep(0)
        await self._listen()

    async def _listen(self) -> None:
        assert self._runner is not None
        site = web.TCPSite(self._runner, self._host, self._port, ssl_context=self._ssl)
        await site.start()
        self._port = int(self._runner.addresses[-1][1])

    def _make_tls(self) -> None:
        names = list(_LOCAL_NAMES)
        if self._host not in names and self._host not in ("", "0.0.0.0", "::"):
            names.append(self._host)
        tls = make_server_tls(names)
        self._ssl = tls.context
        self._ca_pem = tls.ca_pem

    # -- where and how to connect ------------------------------------------------------------

    def _url_host(self) -> str:
        host = self._host if self._host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        return f"[{host}]" if ":" in host else host

    @property
    def running(self) -> bool:
        """Whether the server is serving (between :meth:`start` and :meth:`stop`)."""
        return self._runner is not None

    @property
    def port(self) -> int:
        """The port (the bound one once started)."""
        return self._port

    @property
    def url(self) -> str:
        """``http(s)://host:port`` (valid once started)."""
        scheme = "https" if self._tls else "http"
        return f"{scheme}://{self._url_host()}:{self._port}"

    @property
    def token(self) -> str | None:
        """The bearer token requests must carry (``None``: no authentication)."""
        return self._token

    @property
    def ca_pem(self) -> bytes | None:
        """The PEM of the CA that signed the server certificate (``None`` without TLS)."""
        return self._ca_pem

    @property
    def kubeconfig_path(self) -> str:
        """A kubeconfig for this server (context ``emulator``, namespace ``default``),
        written at start into a private temporary directory and removed at stop."""
        if self._tmpdir is None:
            raise RuntimeError("the emulator is not running: start it first")
        return os.path.join(self._tmpdir, "kubeconfig")

    def kubeconfig(self, *, token: str | None = None) -> dict[str, Any]:
        """The kubeconfig as a dict (server, CA data when TLS, token): with the
        emulator's own token, or ``token`` (one of :meth:`add_user` or
        :meth:`service_account_token`)."""
        cluster: dict[str, Any] = {"server": self.url}
        if self._ca_pem is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self._ca_pem).decode()
        token = token or self._token
        user: dict[str, Any] = {"token": token} if token else {}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": _CONTEXT, "cluster": cluster}],
            "users": [{"name": _CONTEXT, "user": user}],
            "contexts": [
                {
                    "name": _CONTEXT,
                    "context": {"cluster": _CONTEXT, "user": _CONTEXT, "namespace": "default"},
                }
            ],
            "current-context": _CONTEXT,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | os.PathLike[str], *, token: str | None = None) -> None:
        """Write :meth:`kubeconfig` (with ``token``, if given) to ``path`` (mode 0600:
        it holds the token)."""
        text = yaml.safe_dump(self.kubeconfig(token=token), sort_keys=False)
        fd = os.open(os.fspath(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)

    def __repr__(self) -> str:
        state = self.url if self.running else "stopped"
        return f"ApiServerEmulator({state}, resource_version={self._store.rv})"

    # -- data ---------------------------------------------------------------------------------

    def _check_thread(self) -> None:
        if self._owner is not None and self._owner != threading.get_ident():
            raise RuntimeError(
                "use a running ApiServerEmulator from the thread of the event loop it serves on "
                "(from other threads: loop.call_soon_threadsafe)"
            )

    @property
    def resource_version(self) -> str:
        """The current global resourceVersion."""
        return str(self._store.rv)

    @property
    def sharded_list_watch(self) -> bool:
        """Whether lists and watches honour KEP-5866's ``shardSelector`` and lists echo
        it in ``metadata.shardInfo`` (the ``ShardedListAndWatch`` feature gate, alpha
        in Kubernetes 1.36; on here by default). Set it to ``False`` to serve like an
        older kube-apiserver, which ignores the parameter and sends every object; a
        change applies to requests that come after it."""
        return self._store.sharded_list_watch

    @sharded_list_watch.setter
    def sharded_list_watch(self, enabled: bool) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(f"sharded_list_watch is a bool, not {type(enabled).__name__}")
        self._store.sharded_list_watch = enabled

    def register_resource(
        self,
        group: str,
        version: str,
        plural: str,
        kind: str,
        *,
        namespaced: bool = True,
        short_names: Sequence[str] = (),
        singular: str | None = None,
        verbs: Sequence[str] = DEFAULT_VERBS,
        categories: Sequence[str] = (),
        status_subresource: bool = False,
    ) -> str:
        """Serve a new resource (a CRD stand-in) at ``/apis/{group}/{version}/...``, in
        discovery too. Returns its name for the data API (``"plural.group"``). Its
        list items carry ``kind``/``apiVersion``, as custom resources' do."""
        self._check_thread()
        info = ServedResource(
            group,
            version,
            plural,
            kind,
            namespaced=namespaced,
            singular=singular or kind.lower(),
            short_names=tuple(short_names),
            verbs=tuple(verbs),
            categories=tuple(categories),
            subresources=("status",) if status_subresource else (),
        )
        return self._store.register(info).info.group_resource

    def create(
        self, resource: str, obj: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        """Create ``obj`` (in ``namespace``, else its own, else ``"default"``), as a POST
        would; server-set fields in ``obj`` are ignored. Raises
        :class:`~kubereflector.ApiError` (409 AlreadyExists, 404 for a missing
        namespace, 422 Invalid). Returns the stored object (a copy)."""
        self._check_thread()
        bucket = self._store.resolve(resource)
        body = _copy_in(obj)
        if bucket.info.namespaced and namespace is None:
            namespace = (body.get("metadata") or {}).get("namespace") or "default"
        return self._out(lambda: self._store.create(bucket, body, namespace))

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The object (a copy); :class:`~kubereflector.NotFoundError` if absent.
        ``namespace`` defaults to ``"default"`` for namespaced resources."""
        self._check_thread()
        bucket = self._store.resolve(resource)
        ns = (namespace or "default") if bucket.info.namespaced else None
        return self._out(lambda: self._store.get(bucket, ns, name))

    def update(self, resource: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the object named by ``obj``'s metadata, ``status`` included (the
        Python API writes like a controller with both the main and the status
        subresource). A ``metadata.resourceVersion`` in ``obj`` that is not the
        current one raises a 409 Conflict :class:`~kubereflector.ApiError`. A
        no-op update writes nothing."""
        self._check_thread()
        bucket = self._store.resolve(resource)
        body = _copy_in(obj)
        meta = body.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise ValueError("update needs metadata.name")
        ns = (meta.get("namespace") or "default") if bucket.info.namespaced else None
        return self._out(lambda: self._store.update(bucket, ns, name, body))

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: Literal["merge", "json", "strategic"] = "merge",
    ) -> dict[str, Any]:
        """Apply a JSON merge patch (a mapping), a JSON patch (a list of operations) or
        a strategic merge patch to the object, status included."""
        self._check_thread()
        bucket = self._store.resolve(resource)
        ns = (namespace or "default") if bucket.info.namespaced else None
        body = decode(ENCODER.encode(patch))
        return self._out(lambda: self._store.patch(bucket, ns, name, patch_type, body))

    def delete(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """Delete the object (a namespace: with everything in it). Returns its final
        state (with the deletion's resourceVersion), or, if it has finalizers, the
        object now carrying a ``deletionTimestamp``."""
        self._check_thread()
        bucket = self._store.resolve(resource)
        ns = (namespace or "default") if bucket.info.namespaced else None
        return self._out(lambda: self._store.delete(bucket, ns, name)[0])

    def objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Copies of the current objects (of ``namespace``, or all), sorted by namespace/name."""
        self._check_thread()
        bucket = self._store.resolve(resource)
        return [copy_out(r) for r in bucket.iter_namespace(namespace)]

    def compact(self) -> None:
        """Forget all history: watches and continue tokens from before now get 410 Expired."""
        self._check_thread()
        self._store.compact()

    @staticmethod
    def _out(operation: Callable[[], Record]) -> dict[str, Any]:
        try:
            record = operation()
        except StatusError as exc:
            raise _api_error(exc) from None
        return copy_out(record)

    # -- webhooks -----------------------------------------------------------------------------

    def route_webhook_service(
        self, namespace: str, name: str, url: str, *, port: int = 443
    ) -> None:
        """Call the webhooks whose ``clientConfig`` names the Service ``namespace/name``
        (on ``port``) at ``url`` (``https://host:port``, the ``clientConfig``'s path
        appended): the emulator has no cluster network, so a Service-backed webhook is
        unreachable (its failure policy applies) until routed."""
        self._check_thread()
        if not url.startswith("https://"):
            raise ValueError(f"webhooks are called over https, not at {url!r}")
        self._caller.route_service(namespace, name, port, url)

    # -- users and RBAC ---------------------------------------------------------------------

    def add_user(self, name: str, *, groups: Sequence[str] = (), token: str | None = None) -> str:
        """Accept a bearer token for user ``name`` in ``groups`` (and
        ``system:authenticated``), as kube's static token file; returns the token (a
        random one unless ``token``). What the user may do is up to RBAC: bind it with
        RoleBindings and ClusterRoleBindings. Raises ``ValueError`` for an empty name
        or a token in use."""
        self._check_thread()
        token = token if token is not None else secrets.token_urlsafe(24)
        self._users.add(token, name, groups)
        return token

    def service_account_token(
        self, name: str, namespace: str = "default", *, expiration_seconds: int = 3600
    ) -> str:
        """A token of the ServiceAccount ``namespace/name`` (user
        ``system:serviceaccount:{namespace}:{name}``), as the TokenRequest API makes
        (``POST .../serviceaccounts/{name}/token`` serves the same over HTTP). It
        expires after ``expiration_seconds`` on the emulator's clock, and stops working
        when the ServiceAccount is deleted. Raises
        :class:`~kubereflector.NotFoundError` when it does not exist."""
        self._check_thread()
        if expiration_seconds <= 0:
            raise ValueError(f"expiration_seconds must be > 0 (got {expiration_seconds})")
        uid = self._service_account_uid(namespace, name)
        if uid is None:
            raise _api_error(not_found(self._store.resolve("serviceaccounts").info, name))
        return self._users.mint(namespace, name, uid, expiration_seconds)

    def _service_account_uid(self, namespace: str, name: str) -> str | None:
        record = self._store.resolve("serviceaccounts").objects.get(f"{namespace}/{name}")
        return None if record is None else str(record.obj["metadata"].get("uid", ""))

    @property
    def rbac(self) -> RbacMode:
        """``"enforce"`` (refused requests get a 403) or ``"report"`` (they are served)."""
        return self._authorization.mode

    def denials(self) -> list[Denial]:
        """The requests RBAC refused (or, with ``rbac="report"``, would have refused),
        oldest first (the last 10,000)."""
        return list(self._authorization.denials)

    def clear_denials(self) -> None:
        """Forget the denials so far."""
        self._authorization.denials.clear()

    # -- faults -------------------------------------------------------------------------------

    def drop_watches(self, *, abrupt: bool = False) -> None:
        """End every open watch now (events not yet written are lost). ``abrupt``: cut
        the connection instead of finishing the stream (the client sees a broken
        chunked response)."""
        self._check_thread()
        self._watches.drop(abrupt=abrupt)

    def fail_next(
        self,
        count: int,
        status: int,
        *,
        retry_after: float | None = None,
        reason: str | None = None,
    ) -> None:
        """Answer the next ``count`` requests (any but the admin endpoint) with a
        ``Status`` of HTTP ``status`` (500, 429, 410, 401, ...; kube's reason for it
        unless ``reason``). ``retry_after`` (seconds; 429 defaults to 1) sets the
        ``Retry-After`` header and ``details.retryAfterSeconds``. Replaces an earlier
        ``fail_next``; ``count=0`` cancels it."""
        self._check_thread()
        self._faults.fail_next(count, status, retry_after, reason)

    def stall_watches(self) -> None:
        """Make every open watch deliver nothing more (no events, bookmarks or timeout)
        while its connection stays open, as a dead connection would. Watches opened
        later are unaffected."""
        self._check_thread()
        self._watches.stall()

    def slow_streams(self, delay_per_event: float | None) -> None:
        """Wait ``delay_per_event`` seconds (on the clock) before writing each watch
        event; ``None`` or 0 restores full speed."""
        self._check_thread()
        self._faults.slow_streams(delay_per_event)

    def corrupt_resource_versions(self, count: int, value: Any) -> None:
        """Send ``value`` as the ``metadata.resourceVersion`` of the next ``count``
        watch events, bookmarks included, over all watches (as a broken server or
        proxy might): any JSON value, such as an object, a number, or a string
        the emulator then refuses as a resourceVersion. Replaces an earlier call;
        ``count=0`` cancels it."""
        self._check_thread()
        self._faults.corrupt_resource_versions(count, value)

    def reset_faults(self) -> None:
        """Cancel ``fail_next``, ``slow_streams`` and ``corrupt_resource_versions``
        (stalled streams stay stalled)."""
        self._check_thread()
        self._faults.reset()

    # -- introspection ------------------------------------------------------------------------

    def open_watches(self, resource: str | None = None) -> int:
        """How many watch streams are open (of ``resource``, or all), stalled ones included."""
        return self._watches.count(resource)

    async def wait_for_watches(self, count: int = 1, resource: str | None = None) -> None:
        """Return once at least ``count`` watches (of ``resource``) are open and
        registered: events written after this reach them."""
        await self._watches.wait_for(count, resource)

    @property
    def requests(self) -> list[tuple[str, str]]:
        """``(method, path with query)`` of the requests served (the last 10,000; the
        admin endpoint excluded), oldest first."""
        return list(self._handler.requests)


def _copy_in(obj: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(obj, Mapping):
        raise TypeError(f"expected a Kubernetes object as a mapping, got {type(obj).__name__}")
    copied: dict[str, Any] = decode(ENCODER.encode(obj))
    return copied


def _api_error(exc: StatusError) -> ApiError:
    status = exc.status
    retry = (status.get("details") or {}).get("retryAfterSeconds")
    return error_from_status(status, retry_after=float(retry) if retry else None)
