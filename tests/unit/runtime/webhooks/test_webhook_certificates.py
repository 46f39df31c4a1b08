"""The webhook server's certificates (kubereflector.runtime.webhooks.certificates): a
self-signed CA and serving certificate, written atomically, loaded into an SSL context and
loaded again only when the files change; keys never shown."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import stat
import sys
from pathlib import Path

import pytest
from cryptography import x509

from kubereflector.runtime.webhooks import (
    CertificateFiles,
    CertificateProblem,
    SelfSignedCertificate,
    WebhookExtraMissing,
)
from kubereflector.runtime.webhooks.certificates import certificate_not_after


def test_a_self_signed_certificate_names_its_hosts_and_chains_to_its_ca() -> None:
    made = SelfSignedCertificate.generate(["127.0.0.1", "localhost", "hooks.ops.svc"], valid_days=2)
    cert = x509.load_pem_x509_certificate(made.cert_pem)
    ca = x509.load_pem_x509_certificate(made.ca_pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert names.get_values_for_type(x509.DNSName) == ["localhost", "hooks.ops.svc"]
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    now = datetime.datetime.now(datetime.timezone.utc)
    assert now < cert.not_valid_after_utc <= now + datetime.timedelta(days=2)
    assert made.not_after == cert.not_valid_after_utc
    assert certificate_not_after(made.cert_pem) == made.not_after
    assert certificate_not_after(b"not a certificate") is None


def test_the_repr_shows_no_key() -> None:
    made = SelfSignedCertificate.generate(["localhost"])
    assert "PRIVATE" not in repr(made)
    assert "localhost" in repr(made)
    assert b"PRIVATE KEY" in made.key_pem


def test_generating_needs_hosts_and_days() -> None:
    with pytest.raises(ValueError, match="at least one host"):
        SelfSignedCertificate.generate([])
    with pytest.raises(ValueError, match="valid_days must be >= 1"):
        SelfSignedCertificate.generate(["localhost"], valid_days=0)


def test_without_cryptography_the_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cryptography", None)
    with pytest.raises(WebhookExtraMissing, match=r"kubereflector\[webhooks\]"):
        SelfSignedCertificate.generate(["localhost"])
    assert certificate_not_after(b"") is None


def test_writing_keeps_the_key_private(tmp_path: Path) -> None:
    made = SelfSignedCertificate.generate(["localhost"])
    cert, key = made.write(tmp_path / "certs")
    assert (cert.name, key.name) == ("tls.crt", "tls.key")
    assert cert.read_bytes() == made.cert_pem
    assert key.read_bytes() == made.key_pem
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert sorted(p.name for p in (tmp_path / "certs").iterdir()) == ["tls.crt", "tls.key"]


def test_files_load_once_and_again_when_they_change(tmp_path: Path) -> None:
    first = SelfSignedCertificate.generate(["localhost"])
    first.write(tmp_path)
    files = CertificateFiles(tmp_path / "tls.crt", tmp_path / "tls.key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    assert not files.loaded
    assert files.load(context)
    assert files.loaded
    assert files.not_after == first.not_after
    assert not files.load(context)  # unchanged: nothing to do
    second = SelfSignedCertificate.generate(["localhost"], valid_days=3)
    second.write(tmp_path)
    assert files.load(context)
    assert files.not_after == second.not_after


def test_a_half_rotated_pair_keeps_the_old_certificate(tmp_path: Path) -> None:
    first = SelfSignedCertificate.generate(["localhost"])
    first.write(tmp_path)
    files = CertificateFiles(tmp_path / "tls.crt", tmp_path / "tls.key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    files.load(context)
    second = SelfSignedCertificate.generate(["localhost"])
    (tmp_path / "tls.crt").write_bytes(second.cert_pem)  # its key not yet written
    with pytest.raises(CertificateProblem) as problem:
        files.load(context)
    assert "tls.crt" in str(problem.value)
    assert "PRIVATE" not in str(problem.value)
    assert files.not_after == first.not_after
    (tmp_path / "tls.key").write_bytes(second.key_pem)
    assert files.load(context)


def test_missing_files_are_named(tmp_path: Path) -> None:
    files = CertificateFiles(tmp_path / "tls.crt", tmp_path / "tls.key")
    with pytest.raises(CertificateProblem, match=r"cannot read the webhook certificate .*tls.crt"):
        files.load(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    assert "tls.crt" in repr(files)
