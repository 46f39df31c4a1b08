"""Legacy kubeconfig ``auth-provider`` users (gcp, oidc), through the optional
``kubernetes`` package's kubeconfig loader (``pip install
'kubereflector[auth-providers]'``). Private: :func:`~kubereflector.client.load_config`
uses it for such a user.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import importlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from ..clock import Clock
from ._errors import ConfigError
from ._kubeconfig import Entry
from .auth import AuthInfo

__all__ = ["AuthProviderAuth", "auth_provider"]

# Every credential implementation logs as the configuration did before the split:
# users configure loggers by these names.
_log = logging.getLogger("kubereflector.client.config")


_AUTH_PROVIDERS = ("gcp", "oidc")  # what the kubernetes package's loader handles
_AUTH_PROVIDER_SKEW = 300.0  # the kubernetes package refreshes 5 minutes early


class AuthProviderAuth:
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


def auth_provider(user: Entry, server: str, clock: Clock) -> AuthProviderAuth:
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
    return AuthProviderAuth(user.name, name, loader, client_module, clock)
