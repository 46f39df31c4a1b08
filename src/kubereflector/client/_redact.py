"""Cutting the client's own credentials out of what a server sends back.

A server (or a proxy in front of it) may echo a request's ``Authorization``
header in an error page, a ``Status`` message or an HTTP reason phrase, and
those texts end up in exception messages and log lines. The REST client
teaches a :class:`Redactor` every set of credentials it sends (the bearer
token, basic-auth header and password, a token from an exec plugin or a token
file, the client key) and passes everything a server said through it before
it can reach a message.
"""

from __future__ import annotations

import base64
import binascii
import collections
import re
from collections.abc import Mapping
from typing import Any, Final, Protocol

from yarl import URL

__all__ = ["REDACTED", "Credentials", "Redactor", "safe_url", "secrets_of"]

REDACTED: Final = "<redacted>"
"""What a credential is replaced with."""

MIN_SECRET_CHARS: Final = 4
"""Shorter strings are not redacted: they would garble every message and hide nothing."""

_MAX_DEPTH: Final = 32
_REMEMBERED: Final = 8
"""Credential sets a Redactor keeps (rotated tokens stay redacted for a while)."""


class Credentials(Protocol):
    """What a Redactor learns from: the shape of an
    :class:`~kubereflector.client.AuthInfo` (declared here, so that this module
    depends on nothing of the client's)."""

    @property
    def headers(self) -> Mapping[str, str]:
        """The headers a request carries (``Authorization``)."""

    @property
    def client_cert(self) -> tuple[bytes, bytes] | None:
        """The client certificate and key (PEM), if any."""


def secrets_of(info: Credentials) -> frozenset[str]:
    """The strings of ``info`` that must never be shown: each header value, the
    credential after its scheme (``Bearer x``), a basic-auth ``user:password``
    and password, and the client key (whole, and each line of its body)."""
    found: set[str] = set()
    for value in info.headers.values():
        found.add(value)
        scheme, _, credential = value.partition(" ")
        credential = credential.strip()
        found.add(credential)
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(credential, validate=True).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                pair = ""
            found.update((pair, pair.partition(":")[2]))
    if info.client_cert is not None:
        key = info.client_cert[1].decode("ascii", "replace")
        found.add(key.strip())
        found.update(line.strip() for line in key.splitlines() if not line.startswith("-----"))
    return frozenset(s for s in found if len(s) >= MIN_SECRET_CHARS)


class Redactor:
    """Replaces every credential it has learned with :data:`REDACTED`.

    :meth:`learn` is cheap when given the same ``AuthInfo`` again (an identity
    check), so it can be called on every request; the credentials of the last
    few distinct ``AuthInfo`` s are kept. Use from one event loop.
    """

    __slots__ = ("_last", "_learned", "_pattern")

    def __init__(self) -> None:
        self._last: Credentials | None = None
        self._learned: collections.deque[frozenset[str]] = collections.deque(maxlen=_REMEMBERED)
        self._pattern: re.Pattern[str] | None = None

    def learn(self, info: Credentials) -> None:
        """Redact ``info``'s credentials from now on."""
        if info is self._last:
            return
        self._last = info
        found = secrets_of(info)
        if not found or found in self._learned:
            return
        self._learned.append(found)
        secrets = sorted(set().union(*self._learned), key=len, reverse=True)  # longest first
        self._pattern = re.compile("|".join(map(re.escape, secrets)))

    def text(self, text: str) -> str:
        """``text`` with every learned credential replaced."""
        pattern = self._pattern
        return text if pattern is None else pattern.sub(REDACTED, text)

    def value(self, value: Any) -> Any:
        """``value`` (decoded JSON: a str, or a dict or list holding strings) with
        every learned credential replaced, as a new object; the input is unchanged.
        Anything nested deeper than a Status ever is (32 levels) becomes
        :data:`REDACTED` whole."""
        return value if self._pattern is None else self._value(value, 0)

    def _value(self, value: Any, depth: int) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if depth > _MAX_DEPTH and isinstance(value, dict | list):
            return REDACTED
        if isinstance(value, dict):
            return {self.text(str(k)): self._value(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self._value(v, depth + 1) for v in value]
        return value


def safe_url(url: URL) -> str:
    """``url`` without user info, for messages."""
    return str(url.with_user(None)) if url.user or url.password else str(url)
