"""Who a request is (authentication): bearer tokens mapped to users, as kube-apiserver's
static token file and its ServiceAccount token authenticator do.

Private to :mod:`kubereflector.testing.apiserver`. Event loop only (the emulator's
data API and its handler share one thread). Tokens are secrets: they appear in no
repr, log line or error message.

* The emulator's own token (``ApiServerEmulator(token=...)``) is user ``admin`` in
  group ``system:masters``, as the admin token of a kubeadm or test cluster: RBAC
  allows it everything. Without a token (``token=None``) every request is that user.
* :meth:`Users.add` adds a static token for any user and groups (kube's
  ``--token-auth-file``).
* :meth:`Users.mint` makes a ServiceAccount token (the TokenRequest API,
  ``POST .../serviceaccounts/{name}/token``): user
  ``system:serviceaccount:{namespace}:{name}`` in groups ``system:serviceaccounts``
  and ``system:serviceaccounts:{namespace}``. It is refused (401) once it expires (on
  the emulator's clock) or once its ServiceAccount is deleted or replaced (another
  uid), as kube refuses bound tokens.

Every authenticated user is also in ``system:authenticated`` (kube's
``AuthenticatedGroupAdder``).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from ...clock import Clock

__all__ = [
    "ADMIN",
    "AUTHENTICATED",
    "MASTERS",
    "SERVICE_ACCOUNT_PREFIX",
    "UserInfo",
    "Users",
    "service_account_user",
]

AUTHENTICATED: Final = "system:authenticated"
MASTERS: Final = "system:masters"
SERVICE_ACCOUNT_PREFIX: Final = "system:serviceaccount:"
_SERVICE_ACCOUNTS_GROUP: Final = "system:serviceaccounts"


@dataclass(frozen=True, slots=True)
class UserInfo:
    """An authenticated user (kube's ``user.Info``): name, uid and groups. Immutable."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""

    def is_master(self) -> bool:
        """Whether the user is in ``system:masters`` (allowed everything, before RBAC)."""
        return MASTERS in self.groups


ADMIN: Final = UserInfo("admin", (MASTERS, AUTHENTICATED))
"""The user of the emulator's own token (and of every request when it has none)."""


def _with_authenticated(groups: Iterable[str]) -> tuple[str, ...]:
    groups = tuple(groups)
    return groups if AUTHENTICATED in groups else (*groups, AUTHENTICATED)


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    """The user a ServiceAccount's token authenticates as."""
    return UserInfo(
        f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
        (_SERVICE_ACCOUNTS_GROUP, f"{_SERVICE_ACCOUNTS_GROUP}:{namespace}", AUTHENTICATED),
        uid,
    )


@dataclass(frozen=True, slots=True)
class _ServiceAccountToken:
    namespace: str
    name: str
    uid: str
    expires: float  # on the emulator's clock


class Users:
    """The tokens the emulator accepts and who each one is.

    ``admin_token``: the emulator's own token (``None``: no authentication, every
    request is :data:`ADMIN`). ``clock``: when minted tokens expire.
    ``service_account_uid(namespace, name)``: the uid of that ServiceAccount now
    (``None`` if it does not exist), checked on every use of its tokens.
    """

    def __init__(
        self,
        admin_token: str | None,
        *,
        clock: Clock,
        service_account_uid: Callable[[str, str], str | None],
    ) -> None:
        self._admin_token = admin_token
        self._clock = clock
        self._service_account_uid = service_account_uid
        self._static: dict[str, UserInfo] = {}
        self._minted: dict[str, _ServiceAccountToken] = {}

    @property
    def required(self) -> bool:
        """Whether requests must carry a token (the emulator has one)."""
        return self._admin_token is not None

    def add(self, token: str, name: str, groups: Iterable[str] = (), uid: str = "") -> UserInfo:
        """Accept ``token`` as user ``name`` in ``groups`` (and ``system:authenticated``).
        Raises ``ValueError`` for an empty token or name, or a token already in use."""
        if not isinstance(token, str) or not token.strip():
            raise ValueError("a token must be a non-empty string")
        if not isinstance(name, str) or not name:
            raise ValueError("a user needs a name")
        if isinstance(groups, str):
            raise TypeError("groups is a list of group names, not a string")
        if token in self._static or token in self._minted or token == self._admin_token:
            raise ValueError("that token is in use already")
        user = UserInfo(name, _with_authenticated(groups), uid)
        self._static[token] = user
        return user

    def mint(self, namespace: str, name: str, uid: str, expiration_seconds: int) -> str:
        """A new token of the ServiceAccount ``namespace/name`` (whose uid is ``uid``),
        valid for ``expiration_seconds`` on the clock."""
        token = secrets.token_urlsafe(32)
        expires = self._clock.now() + expiration_seconds
        self._minted[token] = _ServiceAccountToken(namespace, name, uid, expires)
        return token

    def authenticate(self, token: str) -> UserInfo | None:
        """Who ``token`` is, or ``None`` (unknown, expired, or its ServiceAccount gone)."""
        admin = self._admin_token
        if admin is not None and hmac.compare_digest(token.encode(), admin.encode()):
            return ADMIN
        user = self._static.get(token)
        if user is not None:
            return user
        minted = self._minted.get(token)
        if minted is None:
            return None
        if self._clock.now() >= minted.expires:
            del self._minted[token]
            return None
        if self._service_account_uid(minted.namespace, minted.name) != minted.uid:
            return None
        return service_account_user(minted.namespace, minted.name, minted.uid)

    def __repr__(self) -> str:
        return f"<Users static={len(self._static)} minted={len(self._minted)}>"
