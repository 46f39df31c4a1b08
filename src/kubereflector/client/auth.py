"""Credentials: who the client is to an API server.

The REST client asks a :class:`ClientConfig <kubereflector.client.ClientConfig>`'s
``auth``, an :class:`Auth`, for an :class:`AuthInfo` (headers and a client
certificate) before every request, and tells it after a 401 that they were
refused. The implementations: :class:`StaticAuth` (token, basic, client
certificate), :class:`TokenFileAuth` (a token file re-read as it rotates) and
:class:`ExecAuth` (a client-go credential plugin). Loading a kubeconfig
(:func:`~kubereflector.client.load_config`) picks one of these for its user, a
legacy auth-provider through the optional ``kubernetes`` package, or one of them
plus the user's client certificate.

Secrets (tokens, passwords, keys, a plugin's output) never appear in a repr, a
log line or an exception message: errors name files, users and commands, never
a value.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .._aio.timeout import within
from ..clock import Clock, RealClock
from . import _kubeconfig
from ._errors import ConfigError
from ._exec import (
    API_VERSIONS,
    EXEC_INFO_ENV,
    INTERACTIVE_MODES,
    InvalidCredential,
    exec_info,
    parse_credential,
    stderr_tail,
)
from ._redact import Redactor

__all__ = [
    "EXEC_TIMEOUT",
    "Auth",
    "AuthInfo",
    "ExecAuth",
    "ExecPluginError",
    "StaticAuth",
    "TokenFileAuth",
]

# Every credential implementation logs as the configuration did before the split:
# users configure loggers by these names.
_log = logging.getLogger("kubereflector.client.config")


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
