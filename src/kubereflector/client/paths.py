"""Validation of the names that go into API paths.

Every place that builds an API path from a namespace, a name or a subresource
(user input, or data a server sent) passes them through these functions first:
a namespace or name such as ``"kube-system/secrets?x="`` or ``".."`` would
otherwise rewrite the path and read another resource. The rules are
client-go's: a name is a valid path segment (``IsValidPathSegmentName``:
not ``.`` or ``..``, no ``/`` or ``%``), a namespace is a DNS-1123 label
(``ValidateNamespaceName``). Callers also percent-quote what they validated,
as a second line of defence (:func:`quote_segment`).

The REST client checks every whole path once more before it becomes a URL
(:func:`validate_api_path`), the last line of defence.

All functions are pure and thread-safe; they raise :class:`ValueError` naming
the bad value.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import quote, unquote

__all__ = [
    "quote_segment",
    "validate_api_path",
    "validate_name",
    "validate_namespace",
    "validate_path_segment",
]

_DNS1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL_MAX: Final = 63
_PCHAR_SAFE: Final = "-._~!$&'()*+,;=:@"
_FORBIDDEN_IN_SEGMENT: Final = ("/", "%")
# Control characters and whitespace never occur in a Kubernetes name; refusing
# them keeps header- and log-injection out of paths too.
_CONTROL: Final = re.compile(r"[\x00-\x20\x7f]")


def validate_path_segment(value: object, what: str = "name") -> str:
    """Return ``value`` if it can stand as one path segment; else raise ``ValueError``.

    ``what`` names the value in the message (``"name"``, ``"subresource"``).
    """
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, not {type(value).__name__}: {value!r}")
    if not value:
        raise ValueError(f"{what} must not be empty")
    if value in (".", ".."):
        raise ValueError(f"{what} may not be {value!r}")
    for bad in _FORBIDDEN_IN_SEGMENT:
        if bad in value:
            raise ValueError(f"{what} may not contain {bad!r}: {value!r}")
    if _CONTROL.search(value):
        raise ValueError(f"{what} may not contain whitespace or control characters: {value!r}")
    return value


def validate_name(value: object) -> str:
    """An object's ``metadata.name`` as a path segment (see :func:`validate_path_segment`)."""
    return validate_path_segment(value, "name")


def validate_namespace(value: object) -> str:
    """Return ``value`` if it is a valid namespace (a DNS-1123 label); else raise ``ValueError``."""
    if not isinstance(value, str):
        raise ValueError(f"namespace must be a string, not {type(value).__name__}: {value!r}")
    if not value:
        raise ValueError("namespace must not be empty")
    if len(value) > _DNS1123_LABEL_MAX or not _DNS1123_LABEL.fullmatch(value):
        raise ValueError(
            f"invalid namespace {value!r}: a namespace is a DNS-1123 label (at most 63 "
            "lowercase letters, digits and '-', starting and ending with a letter or digit)"
        )
    return value


def quote_segment(value: str) -> str:
    """Percent-quote ``value`` so that nothing in it can act as ``/``, ``?`` or ``#``.

    RFC 3986's sub-delimiters, ``:`` and ``@`` stay as they are (``system:nodes``).
    """
    return quote(value, safe=_PCHAR_SAFE)


def validate_api_path(path: str) -> str:
    """Return ``path`` if it is an absolute API path and nothing else; else raise ``ValueError``.

    Refused: a path that does not start with ``/``; one that carries a query
    or a fragment (``?``, ``#``); an empty, ``.`` or ``..`` segment, also
    percent-encoded (URL libraries resolve ``%2e%2e`` too); a segment holding
    a percent-encoded ``/`` (the API server decodes it); whitespace and control
    characters. ``"/"`` alone is allowed.
    """
    if not path.startswith("/"):
        raise ValueError(f"path must start with '/': {path!r}")
    if "?" in path or "#" in path:
        raise ValueError(f"path must not carry a query or fragment (pass params): {path!r}")
    if path == "/":
        return path
    for segment in path[1:].split("/"):
        decoded = unquote(segment)
        if not segment or decoded in (".", "..") or "/" in decoded or _CONTROL.search(decoded):
            raise ValueError(
                f"invalid path {path!r}: its segment {segment!r} is empty, '.' or '..', "
                "or holds '/', whitespace or control characters"
            )
    return path
