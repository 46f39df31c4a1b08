"""The emulator's TLS: a CA generated at first start and a server certificate it signs.

Private to :mod:`kubereflector.testing.apiserver`. Needs the ``trustme`` package,
which ``pip install 'kubereflector[emulator]'`` brings; without it,
:func:`make_server_tls` raises :class:`EmulatorExtraMissing` with that advice.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["INSTALL_HINT", "EmulatorExtraMissing", "ServerTLS", "make_server_tls"]

INSTALL_HINT: Final = (
    "the emulator serves HTTPS with a generated CA, which needs the 'trustme' package: "
    "pip install 'kubereflector[emulator]' (or serve plain HTTP with --no-tls)"
)


class EmulatorExtraMissing(RuntimeError):
    """A package of the ``emulator`` extra is not installed (the message says what to do)."""


@dataclass(frozen=True, slots=True)
class ServerTLS:
    """An SSL context serving a certificate for ``names``, and its CA's PEM (for clients)."""

    context: ssl.SSLContext
    ca_pem: bytes


def make_server_tls(names: Sequence[str]) -> ServerTLS:
    """A fresh CA (organization "kubereflector emulator") and a server certificate for
    ``names`` (host names and IP addresses). Raises :class:`EmulatorExtraMissing`
    without ``trustme``."""
    try:
        import trustme
    except ImportError:
        raise EmulatorExtraMissing(INSTALL_HINT) from None
    ca = trustme.CA(organization_name="kubereflector emulator")
    cert = ca.issue_cert(*names)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    return ServerTLS(context, ca.cert_pem.bytes())
