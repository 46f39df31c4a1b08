"""The string formats kube-apiserver checks in custom resources: kube-openapi's
``strfmt`` registry, for the formats apiextensions-apiserver supports (it strips the
others from a CRD's schema, so they check nothing).

Private to :mod:`kubereflector.testing.apiserver`. Pure functions. ``date``,
``date-time``, ``duration``, the UUIDs, ``ipv4``, ``ipv6``, ``cidr``, ``byte``, ``mac``,
``hexcolor``, ``rgbcolor``, ``ssn``, ``isbn*``, ``creditcard`` and ``bsonobjectid``
follow kube-openapi's rules; ``email`` (Go's ``net/mail``), ``uri`` (Go's
``url.ParseRequestURI``) and ``hostname`` are close approximations.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable, Mapping
from datetime import date
from typing import Final

__all__ = ["FORMATS", "SUPPORTED_FORMATS"]

SUPPORTED_FORMATS: Final = frozenset(
    {
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
    }
)
"""The formats kube supports, by name without dashes (``date-time`` is ``datetime``)."""


_HOSTNAME: Final = re.compile(
    r"^([a-zA-Z0-9\w]((-?[a-zA-Z0-9\w]{0,62})?)|([a-zA-Z0-9\w](([a-zA-Z0-9\-\w]{0,61}[a-zA-Z0-9\w])?)"
    r"(\.)){1,}([a-zA-Z]){2,63})$"
)
_UUIDS: Final = {
    "uuid": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
    "uuid3": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
    "uuid4": re.compile(
        r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
    ),
    "uuid5": re.compile(
        r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
    ),
}
_DATE_TIME_TAIL: Final = re.compile(
    r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"
)
_DURATION_UNITS: Final = (
    ("ns", "nano"),
    ("us", "µs", "micro"),
    ("ms", "milli"),
    ("s", "sec"),
    ("m", "min"),
    ("h", "hr", "hour"),
    ("d", "day"),
    ("w", "wk", "week"),
)
_GO_DURATION: Final = re.compile(r"[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+\Z")
_EMAIL: Final = re.compile(r"^[^@\s<>()\[\],;:\"]+@[^@\s<>()\[\],;:\"]+$")
_MAC: Final = re.compile(
    r"^([0-9A-Fa-f]{2}[:-]){5,19}[0-9A-Fa-f]{2}$|^([0-9A-Fa-f]{4}\.){2,9}[0-9A-Fa-f]{4}$"
)
_HEXCOLOR: Final = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_RGBCOLOR: Final = re.compile(
    r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,"
    r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$"
)
_SSN: Final = re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$")
_ISBN10: Final = re.compile(r"^(?:[0-9]{9}X|[0-9]{10})$")
_ISBN13: Final = re.compile(r"^(?:[0-9]{13})$")
_CREDIT_CARD: Final = re.compile(
    r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)"
    r"[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|"
    r"(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})$"
)


def _is_date(text: str) -> bool:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_date_time(text: str) -> bool:
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    match = _DATE_TIME_TAIL.search(parts[1])
    if match is None:
        return False
    return match.group(1) <= "23" and match.group(2) <= "59" and match.group(3) <= "59"


def _is_duration(text: str) -> bool:
    if text in ("0", "+0", "-0") or _GO_DURATION.match(text):
        return True
    for match in re.finditer(r"((\d+)\s*([A-Za-zµ]+))", text):
        unit = match.group(3).strip().lower()
        for variants in _DURATION_UNITS:
            last = len(variants) - 1
            for index, variant in enumerate(variants):
                if (index == last and unit.startswith(variant)) or variant.lower() == unit:
                    return True
    return False


def _is_hostname(text: str) -> bool:
    if not _HOSTNAME.match(text) or len(text) > 255:
        return False
    return all(len(part) <= 63 for part in text.split("."))


def _is_ip(text: str, version: int) -> bool:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        if version == 4 and "." in text:  # Go's sloppy parser takes leading zeros
            parts = text.split(".")
            return len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts)
        return False
    return address.version == version if version == 6 else "." in text


def _is_cidr(text: str) -> bool:
    if "/" not in text:
        return False
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return True


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _is_uri(text: str) -> bool:
    # govalidator.IsRequestURI: net/url.ParseRequestURI (an absolute URI or an absolute path)
    if not text or " " in text:
        return False
    if text.startswith("/"):
        return True
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", text) is not None


def _is_isbn(text: str, size: int) -> bool:
    digits = re.sub(r"[\s-]", "", text)
    if size == 10:
        if not _ISBN10.match(digits):
            return False
        total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(digits))
        return total % 11 == 0
    if not _ISBN13.match(digits):
        return False
    total = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(digits))
    return total % 10 == 0


def _is_credit_card(text: str) -> bool:
    digits = re.sub(r"[^0-9]", "", text)
    if not _CREDIT_CARD.match(digits):
        return False
    total = 0
    for index, char in enumerate(reversed(digits)):
        number = int(char)
        if index % 2:
            number *= 2
            number = number - 9 if number > 9 else number
        total += number
    return total % 10 == 0


def _is_uuid(kind: str) -> Callable[[str], bool]:
    pattern = _UUIDS[kind]
    return lambda text: pattern.match(text) is not None


FORMATS: Final[Mapping[str, Callable[[str], bool]]] = {
    "bsonobjectid": lambda t: re.fullmatch(r"[0-9a-fA-F]{24}", t) is not None,
    "uri": _is_uri,
    "email": lambda t: _EMAIL.match(t.strip()) is not None,
    "hostname": _is_hostname,
    "ipv4": lambda t: _is_ip(t, 4),
    "ipv6": lambda t: _is_ip(t, 6),
    "cidr": _is_cidr,
    "mac": lambda t: _MAC.match(t) is not None,
    "uuid": _is_uuid("uuid"),
    "uuid3": _is_uuid("uuid3"),
    "uuid4": _is_uuid("uuid4"),
    "uuid5": _is_uuid("uuid5"),
    "isbn": lambda t: _is_isbn(t, 10) or _is_isbn(t, 13),
    "isbn10": lambda t: _is_isbn(t, 10),
    "isbn13": lambda t: _is_isbn(t, 13),
    "creditcard": _is_credit_card,
    "ssn": lambda t: _SSN.match(t) is not None,
    "hexcolor": lambda t: _HEXCOLOR.match(t) is not None,
    "rgbcolor": lambda t: _RGBCOLOR.match(t) is not None,
    "byte": _is_base64,
    "password": lambda t: True,
    "date": _is_date,
    "duration": _is_duration,
    "datetime": _is_date_time,
}
