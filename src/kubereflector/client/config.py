"""Client configuration: where the API server is, how to trust it, who we are.

:func:`load_config` finds kubeconfig files (or the in-cluster service account,
:func:`in_cluster_config`) and returns a :class:`ClientConfig`. Its ``auth`` is
the :class:`~kubereflector.client.Auth` (see :mod:`kubereflector.client.auth`)
the REST client asks for credentials before every request, chosen for the
kubeconfig user as kubectl chooses.

Secrets (tokens, passwords, keys) never appear in a repr, a log line or an
exception message: errors name files, contexts, users and fields, never a value.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yarl import URL

from ..clock import Clock, RealClock
from . import _kubeconfig
from ._errors import ConfigError
from ._exec import cluster_info
from ._kubeconfig import Entry, KubeconfigError
from ._user_auth import auth_for_user
from .auth import EXEC_TIMEOUT, Auth, StaticAuth, TokenFileAuth, _read_token_file
from .paths import validate_namespace

__all__ = [
    "ClientConfig",
    "ConfigError",
    "in_cluster_config",
    "load_config",
    "server_problem",
]

_log = logging.getLogger("kubereflector.client.config")

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


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
        else auth_for_user(
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
