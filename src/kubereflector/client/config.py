"""Client configuration: where the API server is, how to trust it, who we are.

:func:`load_config` finds kubeconfig files (or the in-cluster service account,
:func:`in_cluster_config`) and returns a :class:`ClientConfig`. Its ``auth`` is
an :class:`Auth` the REST client asks for credentials before every request:
:class:`StaticAuth` (token, basic, client certificate), :class:`TokenFileAuth`
(a token file re-read as it rotates), :class:`ExecAuth` (a client-go credential
plugin), a legacy auth-provider through the optional ``kubernetes`` package, or
one of these plus a client certificate from the kubeconfig.

ClientConfig, AuthInfo, Auth and StaticAuth are the contract the REST client
builds on.

Secrets (tokens, passwords, keys, a plugin's output) never appear in a repr, a
log line or an exception message: errors name files, contexts, users, fields
and commands, never a value.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import importlib
import logging
import os
import re
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from yarl import URL

from .._aio.timeout import within
from ..clock import Clock, RealClock
from . import _kubeconfig
from ._exec import (
    API_VERSIONS,
    EXEC_INFO_ENV,
    INTERACTIVE_MODES,
    InvalidCredential,
    cluster_info,
    exec_info,
    parse_credential,
    stderr_tail,
)
from ._kubeconfig import Entry, KubeconfigError
from ._redact import Redactor
from .paths import validate_namespace

__all__ = [
    "EXEC_TIMEOUT",
    "Auth",
    "AuthInfo",
    "ClientConfig",
    "ConfigError",
    "ExecAuth",
    "ExecPluginError",
    "StaticAuth",
    "TokenFileAuth",
    "in_cluster_config",
    "load_config",
    "server_problem",
]

_log = logging.getLogger("kubereflector.client.config")

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class ConfigError(Exception):
    """The configuration cannot be loaded, or credentials cannot be obtained.

    Raised by :func:`load_config` and :func:`in_cluster_config` (missing or
    malformed files, unknown contexts, unsupported settings), by
    ``Auth.authorize`` (an unreadable token file, a failing exec plugin or
    auth-provider) and by the Client's first request when TLS cannot load the
    certificate-authority data or the client certificate and key. The message
    says what is wrong and where; it never contains a credential, and the
    exception never chains one that could.
    """


class ExecPluginError(ConfigError):
    """An exec credential plugin could not be run or gave no usable credential.

    ``command`` is the plugin's command (never its arguments or environment,
    which may hold secrets); ``problem`` what went wrong; ``exit_code`` its exit
    status when it ran and failed, else ``None``.
    """

    def __init__(self, command: str, problem: str, exit_code: int | None = None) -> None:
        self.command = command
        self.problem = problem
        self.exit_code = exit_code
        super().__init__(f"exec plugin {command!r} {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.command, self.problem, self.exit_code))


@dataclass(frozen=True, slots=True, repr=False)
class AuthInfo:
    """What to present on a request: extra headers (``Authorization``) and an
    optional client certificate ``(cert_pem, key_pem)`` for mutual TLS."""

    headers: Mapping[str, str] = field(default_factory=dict)
    client_cert: tuple[bytes, bytes] | None = None

    def __repr__(self) -> str:
        return (
            f"AuthInfo(headers={sorted(self.headers)!r}, "
            f"client_cert={'<set>' if self.client_cert else None})"
        )


@runtime_checkable
class Auth(Protocol):
    """Supplies credentials; may refresh them (token files, exec plugins).

    ``authorize`` is called before every request and must be cheap when nothing
    changed (cache). ``invalidate`` is called after a 401: the next
    ``authorize`` must fetch fresh credentials. Both are called on the event loop.
    """

    async def authorize(self) -> AuthInfo:
        """The headers and client certificate for the next request; cheap when nothing changed.
        Raises :class:`~kubereflector.client.ConfigError` (or the plugin's error) when no
        credentials can be had."""

    def invalidate(self) -> None:
        """The server answered 401: forget cached credentials, so the next :meth:`authorize`
        fetches fresh ones."""


class StaticAuth:
    """Fixed credentials: a bearer token, basic auth, and/or a client certificate."""

    __slots__ = ("_info",)

    def __init__(
        self,
        *,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        client_cert: tuple[bytes, bytes] | None = None,
    ) -> None:
        headers: dict[str, str] = {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif username is not None:
            import base64

            raw = f"{username}:{password or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode("ascii")
        self._info = AuthInfo(headers, client_cert)

    async def authorize(self) -> AuthInfo:
        """The fixed credentials given at construction."""
        return self._info

    def invalidate(self) -> None:
        """Static credentials cannot be refreshed."""

    def __repr__(self) -> str:
        kinds = []
        if "Authorization" in self._info.headers:
            kinds.append(self._info.headers["Authorization"].split(" ", 1)[0].lower())
        if self._info.client_cert:
            kinds.append("client-cert")
        return f"StaticAuth({', '.join(kinds) or 'anonymous'})"


_HOST_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def server_problem(server: object) -> str | None:
    """Why ``server`` cannot be an API server's base URL (a sentence that starts
    with "server"), or ``None`` if it can.

    It must be an ``http`` or ``https`` URL with a host name or IP address, and
    no query or fragment. User info (``https://user:password@host``) is refused:
    credentials belong in the kubeconfig user (aiohttp would also refuse to
    send them beside another Authorization header). The answer quotes the URL
    only when it holds no ``@``, so it never shows a credential. Pure and
    thread-safe.
    """
    if not isinstance(server, str):
        kind = type(server).__name__
        return f"server must be a string with a URL such as https://host:6443, not {kind}"
    after_scheme = server.partition("://")[2] if "://" in server else server
    if "@" in after_scheme.partition("/")[0]:
        return (
            "server must not hold credentials (https://user:password@host): put them in "
            "the kubeconfig user (a token, or a username and password)"
        )
    problem: str | None = None
    try:
        url = URL(server)
    except (ValueError, TypeError) as err:
        return f"server {server!r} is not a URL ({err})"
    host = url.host or ""
    if url.scheme not in ("http", "https"):
        problem = "is not an http or https URL"
    elif not host:
        problem = "has no host"
    elif ":" not in host and not _HOST_NAME.fullmatch(host):
        problem = f"is not a URL: its host {host!r} is no host name or IP address"
    elif host.isdigit():
        problem = "has a number for its host: write it as https://HOST:PORT"
    elif url.query_string or url.fragment or "?" in server or "#" in server:
        problem = "must not have a query or fragment"
    return None if problem is None else f"server {server!r} {problem}"


@dataclass(frozen=True, slots=True, repr=False)
class ClientConfig:
    """How to reach one API server.

    ``server`` is the base URL (``https://host:port``, maybe with a path prefix,
    no trailing slash). ``ca_data`` is PEM; ``None`` means the system trust
    store. ``tls_server_name`` overrides the name checked in the server's
    certificate (and sent as SNI). ``namespace`` is the default namespace of the
    context (``"default"`` when unset).

    Raises ``ValueError`` when ``server`` is not an http(s) URL with a host
    (or carries credentials, a query or a fragment: see :func:`server_problem`)
    or ``namespace`` is not a DNS-1123 label.
    """

    server: str
    auth: Auth = field(default_factory=StaticAuth)
    ca_data: bytes | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None
    namespace: str = "default"
    context: str | None = None

    def __post_init__(self) -> None:
        problem = server_problem(self.server)
        if problem is not None:
            raise ValueError(problem)
        validate_namespace(self.namespace)

    def __repr__(self) -> str:
        return (
            f"ClientConfig(server={self.server!r}, context={self.context!r}, "
            f"namespace={self.namespace!r}, auth={self.auth!r}, "
            f"ca={'<set>' if self.ca_data else None}, "
            f"insecure_skip_tls_verify={self.insecure_skip_tls_verify}, "
            f"tls_server_name={self.tls_server_name!r})"
        )


# -- token files ---------------------------------------------------------------


def _read_token_file(path: Path) -> str:
    # Errors are raised outside ``except`` blocks: a decoding error holds the bytes.
    raw, problem = _kubeconfig.read_file(path)
    if raw is None:
        raise ConfigError(f"token file {str(path)!r} cannot be read ({problem})")
    token: str | None = None
    with contextlib.suppress(UnicodeDecodeError):
        token = raw.decode("utf-8").strip()
    if token is None:
        raise ConfigError(f"token file {str(path)!r} is not UTF-8 text")
    if not token:
        raise ConfigError(f"token file {str(path)!r} is empty")
    return token


def _bearer(token: str) -> AuthInfo:
    return AuthInfo({"Authorization": f"Bearer {token}"})


class TokenFileAuth:
    """A bearer token read from a file, re-read as it rotates.

    The file is read on the first :meth:`authorize`, then again once
    ``reread_after`` seconds have passed on ``clock`` (default
    :class:`~kubereflector.RealClock`), and on the next :meth:`authorize` after
    :meth:`invalidate` (called after a 401): bound service-account tokens and
    other projected tokens are replaced in place. Whitespace around the token
    is stripped.

    Raises :class:`ConfigError` naming the path (never the content) when the
    file is missing, unreadable or empty and no earlier token is at hand. When a
    re-read fails after a successful read, the previous token stays in use and
    a warning is logged, as client-go does; ``fallback_token`` (a kubeconfig
    user with both ``token`` and ``tokenFile``) likewise stands in while the
    file cannot be read.

    Use it from one event loop: ``authorize`` does a small synchronous read of
    the file at most once per ``reread_after``, and never awaits.
    """

    __slots__ = ("_clock", "_fallback", "_info", "_path", "_read_at", "_reread_after", "_stale")

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        reread_after: float = 60.0,
        clock: Clock | None = None,
        fallback_token: str | None = None,
    ) -> None:
        if reread_after < 0:
            raise ValueError(f"reread_after must be >= 0 (got {reread_after})")
        self._path = Path(path)
        self._reread_after = reread_after
        self._clock: Clock = clock if clock is not None else RealClock()
        self._fallback = fallback_token or None
        self._info: AuthInfo | None = None
        self._read_at = 0.0
        self._stale = True

    @property
    def path(self) -> Path:
        """The token file."""
        return self._path

    async def authorize(self) -> AuthInfo:
        """The bearer token, read from the file when due (see the class documentation);
        :class:`ConfigError` naming the path when there is none to be had."""
        return self._current()

    def invalidate(self) -> None:
        """Re-read the file on the next :meth:`authorize`."""
        self._stale = True

    def _current(self) -> AuthInfo:
        now = self._clock.now()
        info = self._info
        if info is not None and not self._stale and now - self._read_at < self._reread_after:
            return info
        try:
            token = _read_token_file(self._path)
        except ConfigError as exc:
            if info is None and self._fallback is None:
                raise
            if info is None:
                assert self._fallback is not None
                info = self._info = _bearer(self._fallback)
                _log.warning("%s; using the user's token instead", exc)
            else:
                _log.warning("%s; keeping the token in use", exc)
        else:
            if info is None or info.headers["Authorization"] != f"Bearer {token}":
                _log.debug("read a new token from %s", self._path)
                info = self._info = _bearer(token)
        self._read_at = now
        self._stale = False
        return info

    def __repr__(self) -> str:
        return f"TokenFileAuth({str(self._path)!r}, reread_after={self._reread_after})"


# -- exec credential plugins ---------------------------------------------------

EXEC_TIMEOUT = 60.0
"""Default limit of one exec plugin run, in seconds: ample for plugins that ask
an identity provider over the network (kubelogin, gke-gcloud-auth-plugin, aws),
short enough that a hung plugin is noticed and retried."""


class ExecAuth:
    """Credentials from a client-go exec credential plugin (``kubectl``'s
    ``users[].user.exec``: ``client.authentication.k8s.io/v1`` or ``v1beta1``).

    The plugin runs lazily, inside :meth:`authorize`, with
    :func:`asyncio.create_subprocess_exec`: ``command`` and ``args`` (no shell),
    ``env`` merged over :data:`os.environ`, ``KUBERNETES_EXEC_INFO`` holding the
    ExecCredential request (``spec.cluster`` is ``cluster`` when given, that is
    with ``provideClusterInfo``; ``spec.interactive`` is false), no standard
    input. Its standard output must be an ExecCredential of ``api_version``
    whose status holds a ``token`` (sent as a bearer token) and/or
    ``clientCertificateData`` with ``clientKeyData`` (PEM, presented as the
    client certificate).

    Caching: the result is reused until ``refresh_before`` seconds before its
    ``expirationTimestamp`` (measured on ``clock`` from when it arrived);
    without an expiry, until :meth:`invalidate`. Concurrent ``authorize`` calls
    share one run of the plugin and its outcome; when every caller waiting for a
    run is cancelled, the plugin is killed.

    ``timeout`` (seconds, default :data:`EXEC_TIMEOUT`; ``None``: no limit,
    measured on ``clock``) bounds one run: a plugin still running then is
    killed with its whole process group (it runs in a session of its own, so
    the helpers it started go too) and :class:`ExecPluginError` says so.

    ``interactive_mode`` ``"Never"`` and ``"IfAvailable"`` run the plugin
    without a terminal; ``"Always"`` cannot be satisfied (kubereflector never
    hands a plugin a terminal) and raises :class:`ExecPluginError` here.

    Raises :class:`ExecPluginError` (a :class:`ConfigError`) naming the command
    when it cannot be started, exits non-zero (with its exit code and the last
    line of its standard error, truncated, any token it issued before
    redacted), runs past ``timeout``, or prints anything but a usable
    ExecCredential. Neither its arguments, its environment nor its output appear
    in errors, logs or the repr. Use one ExecAuth from one event loop.
    """

    __slots__ = (
        "_api_version",
        "_args",
        "_clock",
        "_cluster",
        "_command",
        "_deadline",
        "_env",
        "_inflight",
        "_info",
        "_install_hint",
        "_issued",
        "_refresh_before",
        "_timeout",
        "_waiters",
    )

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        api_version: str = "client.authentication.k8s.io/v1",
        interactive_mode: str = "Never",
        cluster: Mapping[str, Any] | None = None,
        install_hint: str | None = None,
        refresh_before: float = 10.0,
        timeout: float | None = EXEC_TIMEOUT,
        clock: Clock | None = None,
    ) -> None:
        if not command:
            raise ExecPluginError(command, "is empty: an exec plugin needs a command")
        if api_version not in API_VERSIONS:
            raise ExecPluginError(
                command,
                f"uses apiVersion {api_version!r}, which is not one of {', '.join(API_VERSIONS)}",
            )
        if interactive_mode not in INTERACTIVE_MODES:
            raise ExecPluginError(
                command,
                f"has interactiveMode {interactive_mode!r}, not one of "
                f"{', '.join(INTERACTIVE_MODES)}",
            )
        if interactive_mode == "Always":
            raise ExecPluginError(
                command,
                "requires interactiveMode Always, which needs a terminal on standard input; "
                "kubereflector runs plugins without one (use a plugin mode that works with "
                "interactiveMode Never, or log in with the tool first)",
            )
        if refresh_before < 0:
            raise ValueError(f"refresh_before must be >= 0 (got {refresh_before})")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be > 0 or None (got {timeout})")
        self._command = command
        self._timeout = timeout
        self._args = tuple(args)
        self._env = dict(env or {})
        self._api_version = api_version
        self._cluster = dict(cluster) if cluster is not None else None
        self._install_hint = install_hint
        self._refresh_before = refresh_before
        self._clock: Clock = clock if clock is not None else RealClock()
        self._info: AuthInfo | None = None
        self._issued = Redactor()  # the credentials it issued, hidden in its error messages
        self._deadline: float | None = None
        self._inflight: asyncio.Task[AuthInfo] | None = None
        self._waiters = 0

    @property
    def command(self) -> str:
        """The plugin's command (resolved against the kubeconfig's directory when
        it contains a path separator)."""
        return self._command

    async def authorize(self) -> AuthInfo:
        """The plugin's credentials, running it when none are cached or they are about to
        expire (one run shared by concurrent callers); :class:`ExecPluginError` when the
        plugin fails, times out or answers something unusable."""
        info = self._cached()
        if info is not None:
            return info
        task = self._inflight
        if task is None:
            task = asyncio.get_running_loop().create_task(self._run())
            task.add_done_callback(self._ran)
            self._inflight = task
        self._waiters += 1
        try:
            return await asyncio.shield(task)
        finally:
            self._waiters -= 1
            if self._waiters == 0 and not task.done():
                # Nobody waits for this run any more: stop the plugin.
                self._inflight = None
                task.cancel()

    def invalidate(self) -> None:
        """Run the plugin again on the next :meth:`authorize` (ignored while a
        run is under way: its result is fresh)."""
        if self._inflight is None:
            self._info = None
            self._deadline = None

    def _cached(self) -> AuthInfo | None:
        info = self._info
        if info is None or (self._deadline is not None and self._clock.now() >= self._deadline):
            return None
        return info

    def _ran(self, task: asyncio.Task[AuthInfo]) -> None:
        if self._inflight is task:
            self._inflight = None
        if not task.cancelled():
            task.exception()  # retrieved here; the waiters re-raise it

    async def _run(self) -> AuthInfo:
        command = self._command
        env = {**os.environ, **self._env}
        env[EXEC_INFO_ENV] = exec_info(self._api_version, self._cluster)
        _log.debug("running exec plugin %r", command)
        try:
            proc = await asyncio.create_subprocess_exec(
                command,
                *self._args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=_POSIX,  # its own process group, killed as one
            )
        except FileNotFoundError:
            hint = f": {self._install_hint.strip()}" if self._install_hint else ""
            raise ExecPluginError(command, f"was not found{hint}") from None
        except PermissionError:
            raise ExecPluginError(command, "cannot be executed (permission denied)") from None
        except OSError as exc:
            raise ExecPluginError(
                command, f"cannot be started ({exc.strerror or type(exc).__name__})"
            ) from None
        try:
            stdout, stderr = await within(self._clock, self._timeout, proc.communicate())
        except TimeoutError:
            await _kill_process_group(proc)
            raise ExecPluginError(
                command, f"did not finish within {self._timeout:g} s and was killed"
            ) from None
        except BaseException:  # cancelled: nobody waits for it any more
            await _kill_process_group(proc)
            raise
        code = proc.returncode
        if code != 0:
            tail = stderr_tail(stderr, redact=self._issued.text)
            if code is not None and code < 0:
                problem = f"was killed by signal {-code}"
            else:
                problem = f"failed with exit code {code}"
            raise ExecPluginError(command, problem + (f": {tail}" if tail else ""), code)
        try:
            credential = parse_credential(stdout, self._api_version)
        except InvalidCredential as exc:
            raise ExecPluginError(command, str(exc)) from None
        headers = {"Authorization": f"Bearer {credential.token}"} if credential.token else {}
        info = AuthInfo(headers, credential.client_cert)
        if credential.expires_at is None:
            self._deadline = None
            lifetime = "no expiry"
        else:
            remaining = credential.expires_at - time.time()
            self._deadline = self._clock.now() + remaining - self._refresh_before
            lifetime = f"expires in {remaining:.0f}s"
        self._info = info
        self._issued.learn(info)
        _log.debug("exec plugin %r gave %s (%s)", command, _kinds(info), lifetime)
        return info

    def __repr__(self) -> str:
        state = "cached" if self._info is not None else "none"
        return (
            f"ExecAuth(command={self._command!r}, api_version={self._api_version!r}, "
            f"credential={state})"
        )


_POSIX = os.name == "posix"


async def _kill_process_group(proc: asyncio.subprocess.Process) -> None:
    """Kill a plugin and every process of its group, close our ends of its
    pipes, and wait for the plugin to end.

    The pipes are closed, not read to their end, and closed before waiting: a
    descendant that left the group may hold them open forever, and from Python
    3.11 ``Process.wait()`` returns only once the pipes are closed (on 3.10 it
    returned earlier and left the transport open past the loop's life).
    """
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if _POSIX:
                os.killpg(proc.pid, signal.SIGKILL)
            else:  # pragma: no cover - no process groups
                proc.kill()
    # asyncio.subprocess.Process has no public close(); its transport's close()
    # (public on asyncio.SubprocessTransport) closes the pipes.
    transport: asyncio.SubprocessTransport | None = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()
    with contextlib.suppress(asyncio.CancelledError):
        await proc.wait()


def _kinds(info: AuthInfo) -> str:
    kinds = []
    if "Authorization" in info.headers:
        kinds.append("a " + info.headers["Authorization"].split(" ", 1)[0].lower() + " token")
    if info.client_cert:
        kinds.append("a client certificate")
    return " and ".join(kinds) or "nothing"


# -- combinations and legacy auth-providers ------------------------------------


class _ClientCertAuth:
    """Another Auth's headers plus the kubeconfig user's client certificate (a
    certificate the inner Auth returns itself takes precedence)."""

    __slots__ = ("_cert", "_inner", "_last")

    def __init__(self, inner: Auth, client_cert: tuple[bytes, bytes]) -> None:
        self._inner = inner
        self._cert = client_cert
        self._last: tuple[AuthInfo, AuthInfo] | None = None

    async def authorize(self) -> AuthInfo:
        info = await self._inner.authorize()
        if info.client_cert is not None:
            return info
        last = self._last
        if last is not None and last[0] is info:
            return last[1]
        merged = AuthInfo(info.headers, self._cert)
        self._last = (info, merged)
        return merged

    def invalidate(self) -> None:
        self._inner.invalidate()

    def __repr__(self) -> str:
        return f"{self._inner!r} + client-cert"


_AUTH_PROVIDERS = ("gcp", "oidc")  # what the kubernetes package's loader handles
_AUTH_PROVIDER_SKEW = 300.0  # the kubernetes package refreshes 5 minutes early


class _AuthProviderAuth:
    """A legacy ``auth-provider`` (gcp, oidc) through the ``kubernetes`` package's
    kubeconfig loader, which runs in a worker thread (it may refresh over the
    network or run a helper). The token is kept until the expiry the loader
    reports or until :meth:`invalidate`, which makes the next ``authorize``
    load it again (the loader refreshes it when it has expired)."""

    __slots__ = (
        "_client",
        "_clock",
        "_deadline",
        "_info",
        "_loader",
        "_lock",
        "_provider",
        "_user",
    )

    def __init__(
        self,
        user: str,
        provider: str,
        loader: Any,
        client_module: Any,
        clock: Clock,
    ) -> None:
        self._user = user
        self._provider = provider
        self._loader = loader
        self._client = client_module
        self._clock = clock
        self._info: AuthInfo | None = None
        self._deadline: float | None = None
        self._lock: asyncio.Lock | None = None

    async def authorize(self) -> AuthInfo:
        info = self._cached()
        if info is not None:
            return info
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            info = self._cached()
            if info is not None:
                return info
            loaded, lifetime = await asyncio.to_thread(self._load)
            self._deadline = (
                None
                if lifetime is None
                else self._clock.now() + max(lifetime - _AUTH_PROVIDER_SKEW, 0.0)
            )
            self._info = loaded
            return loaded

    def invalidate(self) -> None:
        self._info = None

    def _cached(self) -> AuthInfo | None:
        info = self._info
        if info is None or (self._deadline is not None and self._clock.now() >= self._deadline):
            return None
        return info

    def _load(self) -> tuple[AuthInfo, float | None]:
        """In a worker thread: the token and the seconds it has left, if known."""
        what = f"user {self._user!r}: the auth-provider {self._provider!r}"
        configuration = self._client.Configuration()
        failure: str | None = None
        try:
            self._loader.load_and_set(configuration)
        except Exception as exc:
            # The kubernetes package's messages may quote a helper's output or
            # arguments: name the type only, and chain nothing.
            failure = type(exc).__name__
        if failure is not None:
            raise ConfigError(f"{what} failed ({failure})")
        header = configuration.api_key.get("BearerToken")
        if not isinstance(header, str) or not header.startswith("Bearer ") or len(header) < 8:
            hint = " (is id-token a JWT?)" if self._provider == "oidc" else ""
            raise ConfigError(f"{what} gave no token{hint}")
        lifetime: float | None = None
        expiry = getattr(self._loader, "expiry", None)
        if isinstance(expiry, datetime.datetime):
            if expiry.tzinfo is None:
                expiry = expiry.replace(tzinfo=datetime.timezone.utc)
            lifetime = expiry.timestamp() - time.time()
        _log.debug("%s gave a token", what)
        return AuthInfo({"Authorization": header}), lifetime

    def __repr__(self) -> str:
        return f"AuthProviderAuth({self._provider!r}, user={self._user!r})"


def _auth_provider(user: Entry, server: str, clock: Clock) -> Auth:
    provider = user.body.get("auth-provider")
    if not isinstance(provider, Mapping) or not isinstance(provider.get("name"), str):
        raise ConfigError(f"user {user.name!r} in {user.source}: auth-provider needs a name")
    name = provider["name"]
    if name not in _AUTH_PROVIDERS:
        raise ConfigError(
            f"user {user.name!r} uses the auth-provider {name!r}, which is not supported "
            f"(the optional kubernetes package handles {' and '.join(_AUTH_PROVIDERS)}); "
            "use an exec credential plugin instead (for Azure: kubelogin)"
        )
    try:
        kube_config = importlib.import_module("kubernetes.config.kube_config")
        client_module = importlib.import_module("kubernetes.client")
    except ImportError:
        raise ConfigError(
            f"user {user.name!r} uses the auth-provider {name!r}, which needs the optional "
            "extra: pip install 'kubereflector[auth-providers]'"
        ) from None
    only = "kubereflector"
    config_dict = {
        "current-context": only,
        "contexts": [{"name": only, "context": {"cluster": only, "user": only}}],
        "clusters": [{"name": only, "cluster": {"server": server}}],
        "users": [{"name": only, "user": {"auth-provider": copy.deepcopy(dict(provider))}}],
    }
    loader: Any = None
    failure = ""
    try:
        loader = kube_config.KubeConfigLoader(
            config_dict, active_context=only, config_base_path=str(user.base_dir)
        )
    except Exception as exc:
        failure = type(exc).__name__
    if loader is None:
        raise ConfigError(
            f"user {user.name!r}: the auth-provider {name!r} cannot be set up ({failure})"
        )
    return _AuthProviderAuth(user.name, name, loader, client_module, clock)


def _auth_for_user(
    user: Entry,
    *,
    server: str,
    cluster: Callable[[], dict[str, Any]],
    clock: Clock,
    exec_timeout: float | None,
) -> Auth:
    """The Auth for a kubeconfig user, combining its parts as kubectl does:
    a token, token file, username/password or client certificate in the user
    entry wins over its exec plugin (which is then not run); a token or
    username/password wins over an auth-provider; a client certificate is
    presented alongside a token file's or auth-provider's token."""
    where = f"user {user.name!r} in {user.source}"
    token = user.string("token")
    token_file = user.path("tokenFile")
    username, password = user.string("username"), user.string("password")
    basic = username is not None or password is not None
    cert = user.data_or_file("client-certificate")
    key = user.data_or_file("client-key")
    if cert is not None and key is None:
        raise KubeconfigError(f"{where}: has a client-certificate but no client-key")
    if key is not None and cert is None:
        raise KubeconfigError(f"{where}: has a client-key but no client-certificate")
    client_cert = (cert, key) if cert is not None and key is not None else None
    if client_cert is not None:
        _check_pem(user, client_cert)
    has_exec = user.body.get("exec") is not None
    has_provider = user.body.get("auth-provider") is not None
    if has_exec and has_provider:
        raise KubeconfigError(f"{where}: exec and auth-provider cannot be used together")
    if (token is not None or token_file is not None) and basic:
        raise KubeconfigError(
            f"{where}: has both a token and a username/password; only one is allowed"
        )
    header_auth: Auth | None = None
    if token_file is not None:
        if token is None:
            _read_token_file(token_file)  # fail now, as kubectl does, naming the path
        header_auth = TokenFileAuth(token_file, clock=clock, fallback_token=token)
    elif token is None and not basic:
        if has_exec and client_cert is None:
            settings = _kubeconfig.exec_settings(user)
            return ExecAuth(
                settings.command,
                settings.args,
                env=settings.env,
                api_version=settings.api_version,
                interactive_mode=settings.interactive_mode,
                cluster=cluster() if settings.provide_cluster_info else None,
                install_hint=settings.install_hint,
                timeout=exec_timeout,
                clock=clock,
            )
        if has_provider:
            header_auth = _auth_provider(user, server, clock)
    ignored = None
    if has_exec:  # had it been used, ExecAuth was returned above
        ignored = "exec plugin"
    elif has_provider and not isinstance(header_auth, _AuthProviderAuth):
        ignored = "auth-provider"
    if ignored is not None:
        _log.debug(
            "user %r has credentials of its own: its %s is not used (as in kubectl)",
            user.name,
            ignored,
        )
    if header_auth is None:
        return StaticAuth(
            token=token, username=username, password=password, client_cert=client_cert
        )
    return header_auth if client_cert is None else _ClientCertAuth(header_auth, client_cert)


def _check_pem(user: Entry, client_cert: tuple[bytes, bytes]) -> None:
    """Refuse a client certificate or key that is not PEM, naming the field (TLS
    itself checks the rest when the first connection is made)."""
    cert, key = client_cert
    for name, data, marker, what in (
        ("client-certificate", cert, b"-----BEGIN CERTIFICATE-----", "certificate"),
        ("client-key", key, b"PRIVATE KEY-----", "private key"),
    ):
        if marker not in data:
            field = f"{name}-data" if user.string(f"{name}-data") else name
            raise KubeconfigError(
                f"user {user.name!r} in {user.source}: {field} is not a PEM {what}"
            )


# -- loading -------------------------------------------------------------------


def _normalize_server(server: str) -> str:
    server = server.strip().rstrip("/")
    return server if "://" in server else f"https://{server}"


def _in_cluster(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("KUBERNETES_SERVICE_HOST") and environ.get("KUBERNETES_SERVICE_PORT"))


def load_config(
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    *,
    clock: Clock | None = None,
    exec_timeout: float | None = EXEC_TIMEOUT,
) -> ClientConfig:
    """Load the configuration for one API server, as kubectl finds it.

    Where, in order: the explicit ``kubeconfig`` path (it must exist); else the
    files listed in ``KUBECONFIG`` (joined with ``os.pathsep``; missing ones are
    skipped; merged as kubectl merges them: per cluster, context and user name
    the first file that defines it wins, ``current-context`` comes from the
    first file that sets it); else ``~/.kube/config``; and when none of these
    has anything (and no ``context`` was asked for), the in-cluster service
    account (:func:`in_cluster_config`).

    ``context`` selects a context instead of the ``current-context``. Relative
    paths in an entry (certificate-authority, client-certificate, client-key,
    tokenFile, an exec command with a path separator) are relative to the
    directory of the file that defined the entry; ``*-data`` fields are base64.

    Synchronous and free of side effects beyond reading files, so it may be
    called from any thread, before an event loop exists. Exec plugins and
    auth-providers do not run here but in ``config.auth.authorize()``. ``clock``
    is what token-file re-reads, credential expiry and ``exec_timeout`` (the
    limit of one exec plugin run, see :class:`ExecAuth`) are measured on.

    Raises :class:`ConfigError` (its message names files, contexts, users and
    fields, never a credential) when nothing is found (saying where it looked),
    a file cannot be read or parsed, the context does not exist (listing the
    known ones), the context names a cluster or user that does not exist, or a
    setting is unsupported or contradictory.
    """
    clock = clock if clock is not None else RealClock()
    try:
        if kubeconfig is not None:
            path = Path(kubeconfig).expanduser()
            merged = _kubeconfig.read([path], must_exist=True)
        else:
            env = os.environ.get("KUBECONFIG", "")
            paths = [Path(p).expanduser() for p in env.split(os.pathsep) if p]
            looked = f"KUBECONFIG={env}" if paths else str(Path.home() / ".kube" / "config")
            if not paths:
                paths = [Path.home() / ".kube" / "config"]
            merged = _kubeconfig.read(paths, must_exist=False)
            if merged.is_empty():
                if context is None and _in_cluster(os.environ):
                    _log.debug("nothing in %s; using the in-cluster service account", looked)
                    return in_cluster_config(clock=clock)
                if not merged.files:
                    raise ConfigError(
                        f"no kubeconfig found (looked in {looked}) and not running in a "
                        "cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are "
                        "not set)"
                    )
        if merged.is_empty():
            raise ConfigError(f"kubeconfig {merged.where()} defines no contexts")
        return _from_kubeconfig(merged, context, clock, exec_timeout)
    except KubeconfigError as exc:
        raise ConfigError(str(exc)) from None


def _from_kubeconfig(
    merged: _kubeconfig.Kubeconfig, context: str | None, clock: Clock, exec_timeout: float | None
) -> ClientConfig:
    known = ", ".join(repr(name) for name in sorted(merged.contexts)) or "none"
    name = context or merged.current_context
    if not name:
        raise ConfigError(
            f"no context selected: {merged.where()} sets no current-context; "
            f"pass context= (known contexts: {known})"
        )
    ctx = merged.contexts.get(name)
    if ctx is None:
        raise ConfigError(
            f"context {name!r} not found in {merged.where()} (known contexts: {known})"
        )
    cluster_name = ctx.string("cluster")
    if cluster_name is None:
        raise ConfigError(f"context {name!r} in {ctx.source} names no cluster")
    cluster = merged.clusters.get(cluster_name)
    if cluster is None:
        raise ConfigError(
            f"context {name!r} refers to cluster {cluster_name!r}, which is not defined "
            f"in {merged.where()}"
        )
    user_name = ctx.string("user")
    user: Entry | None = None
    if user_name is not None:
        user = merged.users.get(user_name)
        if user is None:
            raise ConfigError(
                f"context {name!r} refers to user {user_name!r}, which is not defined "
                f"in {merged.where()}"
            )
    raw_server = cluster.string("server")
    if raw_server is None:
        raise ConfigError(f"cluster {cluster_name!r} in {cluster.source} has no server")
    server = _normalize_server(raw_server)
    problem = server_problem(server)
    if problem is not None:
        raise ConfigError(f"cluster {cluster_name!r} in {cluster.source}: {problem}")
    namespace = ctx.string("namespace") or "default"
    try:
        validate_namespace(namespace)
    except ValueError as err:
        raise ConfigError(f"context {name!r} in {ctx.source}: {err}") from None
    ca_data = cluster.data_or_file("certificate-authority")
    insecure = cluster.flag("insecure-skip-tls-verify")
    if insecure and ca_data is not None:
        raise ConfigError(
            f"cluster {cluster_name!r} in {cluster.source}: insecure-skip-tls-verify cannot "
            "be combined with a certificate-authority (kubectl refuses it too); remove one"
        )
    tls_server_name = cluster.string("tls-server-name")
    proxy_url = cluster.string("proxy-url")

    def exec_cluster() -> dict[str, Any]:
        return cluster_info(
            server=raw_server,  # as written, as kubectl passes it
            ca_data=ca_data,
            insecure_skip_tls_verify=insecure,
            tls_server_name=tls_server_name,
            proxy_url=proxy_url,
            disable_compression=cluster.flag("disable-compression"),
            extensions=cluster.body.get("extensions"),
        )

    auth: Auth = (
        StaticAuth()
        if user is None
        else _auth_for_user(
            user, server=server, cluster=exec_cluster, clock=clock, exec_timeout=exec_timeout
        )
    )
    _log.debug(
        "using context %r (cluster %r, user %r) from %s",
        name,
        cluster_name,
        user_name,
        merged.where(),
    )
    return ClientConfig(
        server=server,
        auth=auth,
        ca_data=ca_data,
        insecure_skip_tls_verify=insecure,
        tls_server_name=tls_server_name,
        proxy_url=proxy_url,
        namespace=namespace,
        context=name,
    )


def in_cluster_config(
    *,
    service_account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
    environ: Mapping[str, str] | None = None,
    clock: Clock | None = None,
) -> ClientConfig:
    """The configuration of a pod talking to its own cluster.

    Server ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`` (an
    IPv6 host in brackets; ``environ`` defaults to :data:`os.environ`); the CA
    from ``ca.crt`` in ``service_account_dir`` (when missing, the system trust
    store, with a warning); the namespace from its ``namespace`` file
    (``"default"`` when missing); the token from its ``token`` file through a
    :class:`TokenFileAuth`, so a rotated bound token is picked up.

    Synchronous (file reads only). Raises :class:`ConfigError` when the two
    variables are not set, or the token file is missing or empty (naming it).
    """
    env = os.environ if environ is None else environ
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    port = env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
            "must both be set"
        )
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    server = f"https://{host}:{port}"
    problem = server_problem(server)
    if problem is not None or not port.isdigit():
        raise ConfigError(
            "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT do not make a URL: "
            f"{problem or f'port {port!r} is not a number'}"
        )
    directory = Path(service_account_dir)
    token_path = directory / "token"
    _read_token_file(token_path)  # fail now, naming the path
    ca_data: bytes | None = None
    try:
        ca_data = (directory / "ca.crt").read_bytes()
    except OSError as exc:
        _log.warning(
            "cannot read the in-cluster CA %s (%s); using the system trust store",
            directory / "ca.crt",
            exc.strerror or type(exc).__name__,
        )
    namespace = "default"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        namespace = (directory / "namespace").read_text(encoding="utf-8").strip() or "default"
    try:
        validate_namespace(namespace)
    except ValueError as err:
        raise ConfigError(
            f"in-cluster namespace file {str(directory / 'namespace')!r}: {err}"
        ) from None
    return ClientConfig(
        server=server,
        auth=TokenFileAuth(token_path, clock=clock),
        ca_data=ca_data or None,
        namespace=namespace,
    )
