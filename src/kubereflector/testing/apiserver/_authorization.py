"""The emulator's authorization step: every authenticated request is checked with
:mod:`._rbac` before it is served; a refusal is answered with kube's 403 (or, in
``"report"`` mode, served anyway) and kept as a :class:`Denial`.

Private to :mod:`kubereflector.testing.apiserver`, which re-exports :class:`Denial`.
Event loop only.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ._rbac import Attributes, authorize, forbidden, request_attributes
from ._store import Store
from ._users import UserInfo

__all__ = ["Authorization", "Denial", "RbacMode"]

RbacMode = Literal["enforce", "report"]
_MODES: Final = ("enforce", "report")
_KEPT: Final = 10_000


@dataclass(frozen=True, slots=True)
class Denial:
    """A request RBAC refused (or, in ``"report"`` mode, would have refused): who asked,
    what for, and the message of kube's 403 for it. Immutable.

    ``verb``, ``api_group``, ``resource``, ``subresource``, ``namespace`` and ``name``
    are the request's authorization attributes as kube derives them (``list`` or
    ``watch`` for a collection ``GET``, ``deletecollection`` for a collection
    ``DELETE``); for a non-resource request (``/metrics``, ``/apis``) ``resource`` is
    ``""`` and ``path`` says what was asked.
    """

    user: str
    groups: tuple[str, ...]
    verb: str
    api_group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    path: str
    message: str

    @property
    def resource_request(self) -> bool:
        """Whether it asked for a resource (not a non-resource URL such as ``/metrics``)."""
        return bool(self.resource)

    def __str__(self) -> str:
        return self.message


class Authorization:
    """Checks requests with RBAC over ``store`` and keeps the last 10,000 denials.

    ``mode``: ``"enforce"`` answers a refused request with a 403, as kube-apiserver
    does; ``"report"`` lets it through (keeping the denial), so a single run shows
    every permission a user lacks. Raises ``ValueError`` for another mode.
    """

    def __init__(self, store: Store, mode: RbacMode = "enforce") -> None:
        if mode not in _MODES:
            raise ValueError(f"rbac must be 'enforce' or 'report', not {mode!r}")
        self._store = store
        self.mode: RbacMode = mode
        self.denials: collections.deque[Denial] = collections.deque(maxlen=_KEPT)

    def check(
        self, method: str, path: str, query: Mapping[str, str], user: UserInfo
    ) -> dict[str, Any] | None:
        """``None`` when the request may be served; else the 403 ``Status`` to answer."""
        if user.is_master():  # kube's privileged-group authorizer: no RBAC at all
            return None
        attrs = request_attributes(method, path, query, user)
        decision = authorize(self._store, attrs)
        if decision.allowed:
            return None
        status = forbidden(attrs, decision.reason)
        self.denials.append(_denial(attrs, status["message"]))
        return status if self.mode == "enforce" else None


def _denial(attrs: Attributes, message: str) -> Denial:
    return Denial(
        user=attrs.user.name,
        groups=attrs.user.groups,
        verb=attrs.verb,
        api_group=attrs.api_group,
        resource=attrs.resource if attrs.resource_request else "",
        subresource=attrs.subresource,
        namespace=attrs.namespace,
        name=attrs.name,
        path=attrs.path,
        message=message,
    )
