"""The ExecCredential protocol of client-go credential plugins, without I/O.

What goes into the plugin's ``KUBERNETES_EXEC_INFO`` and what comes out on its
standard output (``client.authentication.k8s.io/v1`` and ``v1beta1``). Running
the plugin, caching and errors with the command's name are :class:`ExecAuth`'s
job (``auth.py``); this module raises :class:`InvalidCredential` whose message
never contains any part of the plugin's output beyond short identifiers.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
EXEC_INFO_ENV = "KUBERNETES_EXEC_INFO"
EXEC_CLUSTER_EXTENSION = "client.authentication.k8s.io/exec"
_KNOWN_API_VERSIONS = (*API_VERSIONS, "client.authentication.k8s.io/v1alpha1")

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})"
)


_NOT_JSON = object()


class InvalidCredential(Exception):
    """The plugin's output is not a usable ExecCredential (safe message)."""


@dataclass(frozen=True, slots=True, repr=False)
class Credential:
    """One plugin result. ``expires_at`` is a Unix timestamp (wall clock)."""

    token: str | None
    client_cert: tuple[bytes, bytes] | None
    expires_at: float | None

    def __repr__(self) -> str:
        kinds = [k for k, v in (("token", self.token), ("client-cert", self.client_cert)) if v]
        return f"Credential({', '.join(kinds)}, expires_at={self.expires_at})"


def cluster_info(
    *,
    server: str,
    ca_data: bytes | None,
    insecure_skip_tls_verify: bool,
    tls_server_name: str | None,
    proxy_url: str | None,
    disable_compression: bool,
    extensions: Any,
) -> dict[str, Any]:
    """The ExecCredential ``spec.cluster`` object (fields as client-go encodes them,
    empty ones left out); ``config`` is the cluster's
    ``client.authentication.k8s.io/exec`` extension, if it has one."""
    cluster: dict[str, Any] = {"server": server}
    if tls_server_name:
        cluster["tls-server-name"] = tls_server_name
    if insecure_skip_tls_verify:
        cluster["insecure-skip-tls-verify"] = True
    if ca_data:
        cluster["certificate-authority-data"] = base64.b64encode(ca_data).decode("ascii")
    if proxy_url:
        cluster["proxy-url"] = proxy_url
    if disable_compression:
        cluster["disable-compression"] = True
    if isinstance(extensions, list):
        for item in extensions:
            if isinstance(item, Mapping) and item.get("name") == EXEC_CLUSTER_EXTENSION:
                cluster["config"] = item.get("extension")
                break
    return cluster


def exec_info(api_version: str, cluster: Mapping[str, Any] | None) -> str:
    """The JSON for ``KUBERNETES_EXEC_INFO``: always sent (as client-go does), with
    ``spec.cluster`` only when the kubeconfig sets ``provideClusterInfo``.
    kubereflector never gives a plugin a terminal, so ``interactive`` is false."""
    spec: dict[str, Any] = {"interactive": False}
    if cluster is not None:
        spec["cluster"] = dict(cluster)
    info = {"kind": "ExecCredential", "apiVersion": api_version, "spec": spec}
    return msgspec.json.encode(info).decode("utf-8")


def parse_rfc3339(text: str) -> float | None:
    """A Kubernetes timestamp (``2024-05-01T10:00:00Z``, fractions and offsets
    allowed) as a Unix timestamp; ``None`` when it is not one."""
    match = _RFC3339.fullmatch(text.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7), match.group(8)
    if zone in ("Z", "z"):
        tz = datetime.timezone.utc
    else:
        sign = -1 if zone[0] == "-" else 1
        tz = datetime.timezone(
            sign * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
        )
    try:
        when = datetime.datetime(year, month, day, hour, minute, second, tzinfo=tz)
    except ValueError:  # month 13, February 30th, ...
        return None
    return when.timestamp() + (float(fraction) if fraction else 0.0)


def parse_credential(stdout: bytes, api_version: str) -> Credential:
    """Decode and check a plugin's standard output, as client-go does: the
    apiVersion must be the one asked for, and the status must hold a token
    and/or a certificate with its key."""
    if not stdout.strip():
        raise InvalidCredential("printed nothing on standard output")
    # Errors are raised outside ``except`` blocks throughout, so that no exception
    # holding the plugin's output is chained to them as ``__context__``.
    doc: Any = _NOT_JSON
    with contextlib.suppress(msgspec.DecodeError, RecursionError):  # deep nesting: RecursionError
        doc = msgspec.json.decode(stdout)
    if doc is _NOT_JSON:
        raise InvalidCredential("printed output that is not JSON")
    if not isinstance(doc, dict):
        raise InvalidCredential("printed JSON that is not an ExecCredential object")
    # The values of kind and apiVersion are only quoted when they are ones we
    # know: anything else could be a credential printed in the wrong place.
    kind = doc.get("kind")
    if kind != "ExecCredential":
        what = "no kind" if kind is None else "another kind"
        raise InvalidCredential(f"returned {what} instead of an ExecCredential")
    got = doc.get("apiVersion")
    if got != api_version:
        shown = repr(got) if got in _KNOWN_API_VERSIONS else "another apiVersion"
        if got is None:
            shown = "no apiVersion"
        raise InvalidCredential(f"returned {shown}, but the kubeconfig asks for {api_version!r}")
    status = doc.get("status")
    if not isinstance(status, dict):
        raise InvalidCredential("returned no status")

    def text_field(name: str) -> str | None:
        value = status.get(name)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise InvalidCredential(f"returned a status.{name} that is not a string")
        return value

    token = text_field("token")
    cert = text_field("clientCertificateData")
    key = text_field("clientKeyData")
    if token is None and cert is None and key is None:
        raise InvalidCredential("returned neither a token nor a client certificate and key")
    if (cert is None) != (key is None):
        raise InvalidCredential("returned only a client certificate or key, not both")
    expires_at: float | None = None
    stamp = text_field("expirationTimestamp")
    if stamp is not None:
        expires_at = parse_rfc3339(stamp)
        if expires_at is None:
            raise InvalidCredential("returned an expirationTimestamp that is not RFC 3339")
    client_cert = (cert.encode(), key.encode()) if cert is not None and key is not None else None
    return Credential(token, client_cert, expires_at)


def stderr_tail(
    stderr: bytes, limit: int = 200, redact: Callable[[str], str] = lambda text: text
) -> str:
    """The last non-blank line a plugin wrote to standard error, printable and
    at most ``limit`` characters long (``""`` when it wrote nothing), passed
    through ``redact`` before it is cut short."""
    for line in reversed(redact(stderr.decode("utf-8", errors="replace")).splitlines()):
        clean = "".join(ch if ch.isprintable() else " " for ch in line).strip()
        if clean:
            return clean if len(clean) <= limit else clean[: limit - 3] + "..."
    return ""
