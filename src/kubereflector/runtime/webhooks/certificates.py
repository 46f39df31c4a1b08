"""The webhook server's TLS certificates: a self-signed CA and serving certificate for
development and tests (:class:`SelfSignedCertificate`), and a certificate and key in
files that the server loads and reloads when they change (:class:`CertificateFiles`,
what cert-manager mounts from a Secret).

Generating a certificate needs the ``cryptography`` package (``pip install
'kubereflector[webhooks]'``); serving files does not (without ``cryptography`` the
server only cannot tell when a certificate expires). Private keys never appear in a
repr, a log line or an error message.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = [
    "CertificateFiles",
    "CertificateProblem",
    "SelfSignedCertificate",
    "WebhookExtraMissing",
    "certificate_not_after",
]

_INSTALL_HINT: Final = (
    "a self-signed webhook certificate needs the 'cryptography' package: "
    "pip install 'kubereflector[webhooks]' (or serve a certificate from files: "
    "WebhookOptions(cert_dir=...))"
)


class WebhookExtraMissing(RuntimeError):
    """A package of the ``webhooks`` extra is not installed (the message says what to do)."""


class CertificateProblem(ValueError):
    """A certificate or key file cannot be read or used (the message names the file; it
    never quotes a key)."""


@dataclass(frozen=True, slots=True, repr=False)
class SelfSignedCertificate:
    """A CA and a serving certificate it signed, as PEM: ``ca_pem`` is what the API server
    trusts (a configuration's ``caBundle``), ``cert_pem`` and ``key_pem`` what the webhook
    server serves. Immutable; its repr shows no key."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    hosts: tuple[str, ...]
    not_after: datetime.datetime

    @classmethod
    def generate(
        cls,
        hosts: Sequence[str],
        *,
        valid_days: int = 365,
        organization: str = "kubereflector webhooks",
    ) -> SelfSignedCertificate:
        """A fresh CA (ECDSA P-256) and a serving certificate for ``hosts`` (DNS names and
        IP addresses, each a subject alternative name), valid from an hour ago for
        ``valid_days``. Raises :class:`WebhookExtraMissing` without ``cryptography``,
        ``ValueError`` without hosts or with ``valid_days < 1``."""
        try:
            from cryptography import x509
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
        except ImportError:
            raise WebhookExtraMissing(_INSTALL_HINT) from None
        names = [h for h in hosts if h]
        if not names:
            raise ValueError("a serving certificate needs at least one host name or address")
        if valid_days < 1:
            raise ValueError(f"valid_days must be >= 1 (got {valid_days})")
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=valid_days)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
                x509.NameAttribute(NameOID.COMMON_NAME, f"{organization} CA"),
            ]
        )
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        alt_names = [_alt_name(x509, name) for name in names]
        cert = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name(
                    [
                        x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
                        x509.NameAttribute(NameOID.COMMON_NAME, names[0]),
                    ]
                )
            )
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        pem = serialization.Encoding.PEM
        return cls(
            ca_pem=ca_cert.public_bytes(pem),
            cert_pem=cert.public_bytes(pem),
            key_pem=key.private_bytes(
                pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
            hosts=tuple(names),
            not_after=end,
        )

    def write(
        self,
        directory: str | os.PathLike[str],
        *,
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
    ) -> tuple[Path, Path]:
        """Write the certificate and key into ``directory`` (created if need be), each
        file replaced atomically, the key readable by its owner only. Returns both paths.
        Writing the key first means a watcher that sees the new certificate finds its key
        (a half-rotated pair fails to load and is tried again)."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        key_path, cert_path = folder / key_name, folder / cert_name
        _write_atomically(key_path, self.key_pem, 0o600)
        _write_atomically(cert_path, self.cert_pem, 0o644)
        return cert_path, key_path

    def __repr__(self) -> str:
        return (
            f"SelfSignedCertificate(hosts={list(self.hosts)}, "
            f"not_after={self.not_after.isoformat()})"
        )


def _alt_name(x509: Any, name: str) -> Any:
    """An ``x509.IPAddress`` for an address, an ``x509.DNSName`` otherwise."""
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _write_atomically(path: Path, data: bytes, mode: int) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def certificate_not_after(cert_pem: bytes) -> datetime.datetime | None:
    """When the first certificate of ``cert_pem`` expires (UTC), or ``None`` when that
    cannot be told (no ``cryptography``, or not a PEM certificate)."""
    try:
        from cryptography import x509
    except ImportError:
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return None
    return cert.not_valid_after_utc


class CertificateFiles:
    """A serving certificate and its key in two PEM files, loaded into an
    ``ssl.SSLContext`` and loaded again when their content changes (cert-manager
    replaces a mounted Secret's files in one atomic step; a certificate written before
    its key fails to load and is tried again at the next check).

    Connections made after a reload get the new certificate; open ones keep theirs.
    Not thread-safe: use it from the server's event loop.
    """

    def __init__(self, cert_path: str | os.PathLike[str], key_path: str | os.PathLike[str]):
        self.cert_path = Path(cert_path)
        self.key_path = Path(key_path)
        self._loaded: tuple[bytes, bytes] | None = None
        self.not_after: datetime.datetime | None = None
        """When the loaded certificate expires (``None``: unknown, see
        :func:`certificate_not_after`)."""

    @property
    def loaded(self) -> bool:
        """Whether a certificate has been loaded."""
        return self._loaded is not None

    def load(self, context: ssl.SSLContext) -> bool:
        """Load the files into ``context`` if they changed since the last load; returns
        whether it loaded them. Raises :class:`CertificateProblem` naming the file when
        they cannot be read or do not form a certificate and its key (the context keeps
        what it had)."""
        try:
            current = (self.cert_path.read_bytes(), self.key_path.read_bytes())
        except OSError as exc:
            raise CertificateProblem(
                f"cannot read the webhook certificate {exc.filename}: {exc.strerror}"
            ) from None
        if current == self._loaded:
            return False
        try:
            context.load_cert_chain(self.cert_path, self.key_path)
        except (ssl.SSLError, OSError) as exc:
            raise CertificateProblem(
                f"{self.cert_path} and {self.key_path} are not a PEM certificate and its "
                f"private key ({type(exc).__name__}: {getattr(exc, 'reason', None) or exc.args[0]})"
            ) from None
        self._loaded = current
        self.not_after = certificate_not_after(current[0])
        return True

    def __repr__(self) -> str:
        return f"CertificateFiles({str(self.cert_path)!r}, {str(self.key_path)!r})"
