"""The :class:`~kubereflector.client.Auth` of a kubeconfig user, its settings
combined as kubectl combines them. Private: :func:`~kubereflector.client.load_config`
calls :func:`auth_for_user` for the user of the chosen context.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..clock import Clock
from . import _kubeconfig
from ._auth_provider import AuthProviderAuth, auth_provider
from ._kubeconfig import Entry, KubeconfigError
from .auth import Auth, AuthInfo, ExecAuth, StaticAuth, TokenFileAuth, _read_token_file

__all__ = ["auth_for_user"]

# Every credential implementation logs as the configuration did before the split:
# users configure loggers by these names.
_log = logging.getLogger("kubereflector.client.config")


def auth_for_user(
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
            header_auth = auth_provider(user, server, clock)
    ignored = None
    if has_exec:  # had it been used, ExecAuth was returned above
        ignored = "exec plugin"
    elif has_provider and not isinstance(header_auth, AuthProviderAuth):
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
