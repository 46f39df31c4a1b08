"""Errors shared by every ListerWatcher (the in-memory fake, the HTTP client, yours).

A ListerWatcher reports API failures by raising these classes, so the Reflector
can tell a 410 from a 429 from a dead connection whatever the transport. The
classes mirror the Kubernetes ``Status`` object: ``status`` (HTTP code),
``reason`` (``StatusReason``), ``message`` and ``details``. ``url``, when set,
names the request (never with credentials).
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AlreadyExistsError",
    "ApiError",
    "BadRequestError",
    "ConflictError",
    "DecodeError",
    "ExpiredError",
    "ForbiddenError",
    "InvalidError",
    "MethodNotAllowedError",
    "NotFoundError",
    "StatusCause",
    "TooLargeResourceVersionError",
    "TooManyRequestsError",
    "TruncatedStreamError",
    "UnauthorizedError",
    "error_from_status",
    "failure_status",
    "is_connection_refused",
]


@dataclass(frozen=True, slots=True)
class StatusCause:
    """One entry of a Status' ``details.causes`` (``metav1.StatusCause``).

    ``field`` is the JSON path the server names (``metadata.name``,
    ``spec.replicas``, ``.data.x`` for an apply conflict), ``""`` if none;
    ``reason`` its machine-readable kind (``FieldValueRequired``,
    ``FieldValueInvalid``, ``FieldManagerConflict``, ...).
    """

    reason: str
    message: str
    field: str


class ApiError(Exception):
    """An error answered by (or on behalf of) the API server.

    ``details`` is the Status ``details`` mapping (may hold ``causes``), or ``None``.
    :attr:`name`, :attr:`kind` and :attr:`causes` read it: the object the server
    names, and the field causes of an invalid object or an apply conflict.
    """

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        details: Mapping[str, Any] | None = None,
        *,
        url: str | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details
        self.url = url
        super().__init__(self._text())

    def _text(self) -> str:
        text = f"{self.status}"
        if self.reason:
            text += f" {self.reason}"
        if self.message:
            text += f": {self.message}"
        if self.url:
            text += f" ({self.url})"
        return text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._text()!r})"

    @property
    def name(self) -> str:
        """The object's name from ``details`` (``""`` if the server named none)."""
        return str((self.details or {}).get("name") or "")

    @property
    def kind(self) -> str:
        """The object's kind or resource from ``details`` (``pods``, ``Pod``; ``""`` if none)."""
        return str((self.details or {}).get("kind") or "")

    @property
    def causes(self) -> tuple[StatusCause, ...]:
        """The ``details.causes`` (entries that are not mappings are skipped)."""
        raw = (self.details or {}).get("causes") or ()
        if not isinstance(raw, (list, tuple)):
            return ()
        return tuple(
            StatusCause(
                str(c.get("reason") or ""), str(c.get("message") or ""), str(c.get("field") or "")
            )
            for c in raw
            if isinstance(c, Mapping)
        )


class ExpiredError(ApiError):
    """410 Gone / reason ``Expired``: the resourceVersion or continue token is too old."""

    def __init__(
        self,
        message: str = "too old resource version",
        details: Mapping[str, Any] | None = None,
        *,
        status: int = 410,
        reason: str = "Expired",
        url: str | None = None,
    ) -> None:
        super().__init__(status, reason, message, details, url=url)


class TooLargeResourceVersionError(ApiError):
    """The requested resourceVersion is newer than the server has seen.

    kube-apiserver answers 504 ``Timeout`` with a cause of type
    ``ResourceVersionTooLarge`` ("Too large resource version").
    """

    def __init__(
        self,
        message: str = "Too large resource version",
        details: Mapping[str, Any] | None = None,
        *,
        status: int = 504,
        reason: str = "Timeout",
        url: str | None = None,
    ) -> None:
        super().__init__(status, reason, message, details, url=url)


class TooManyRequestsError(ApiError):
    """429: the server asks the client to slow down. ``retry_after`` is in seconds, if given."""

    def __init__(
        self,
        message: str = "too many requests",
        details: Mapping[str, Any] | None = None,
        *,
        retry_after: float | None = None,
        status: int = 429,
        reason: str = "TooManyRequests",
        url: str | None = None,
    ) -> None:
        self.retry_after = retry_after
        super().__init__(status, reason, message, details, url=url)


class UnauthorizedError(ApiError):
    """401: the credentials were missing, wrong or expired."""


class ForbiddenError(ApiError):
    """403: the credentials are not allowed to do this."""


class NotFoundError(ApiError):
    """404: no such resource or object."""


class BadRequestError(ApiError):
    """400: the request was malformed (a body of the wrong kind, a name or namespace
    that does not match the URL, a bad query parameter)."""


class MethodNotAllowedError(ApiError):
    """405: the resource does not support this verb."""


class ConflictError(ApiError):
    """409 ``Conflict``: the write lost a race. An update or patch with a stale
    ``metadata.resourceVersion``, a failed delete precondition, or a server-side
    apply that would change fields another field manager owns (then :attr:`causes`
    names each field and its manager). Re-read and try again:
    :func:`~kubereflector.client.retry_on_conflict`."""


class AlreadyExistsError(ApiError):
    """409 ``AlreadyExists``: a create of an object whose name is taken."""


class InvalidError(ApiError):
    """422 ``Invalid``: the object (or the request's options) failed validation;
    :attr:`causes` names each field and what is wrong with it."""


class DecodeError(ApiError):
    """A response or watch line could not be decoded; the stream cannot be trusted."""

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(0, "DecodeError", message, None, url=url)


class TruncatedStreamError(DecodeError):
    """A watch stream was cut off (the connection closed or broke inside an event).

    Nothing of the partial event is delivered. The Reflector re-watches from the
    last resourceVersion at once, without a relist, as client-go does for an
    unexpected EOF (its watch ends as if closed); a watch cut within a second
    without an event is a very short watch, which ends the cycle.
    """


_TOO_LARGE_CAUSE = "ResourceVersionTooLarge"


def _has_cause(details: Mapping[str, Any] | None, cause_reason: str) -> bool:
    if not details:
        return False
    causes = details.get("causes") or ()
    return any(isinstance(c, Mapping) and c.get("reason") == cause_reason for c in causes)


def _retry_after(details: Mapping[str, Any] | None) -> float | None:
    if details and isinstance(details.get("retryAfterSeconds"), (int, float)):
        return float(details["retryAfterSeconds"])
    return None


def failure_status(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A Kubernetes ``Status`` object for a failure, as a server sends it (in an
    error body or an ERROR watch event); the inverse of :func:`error_from_status`."""
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        status["details"] = dict(details)
    return status


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    422: InvalidError,
}
"""The class of each HTTP code that maps to one (409 splits by reason)."""


def error_from_status(
    status: Mapping[str, Any],
    *,
    http_status: int | None = None,
    url: str | None = None,
    retry_after: float | None = None,
) -> ApiError:
    """The error class for a Kubernetes ``Status`` object (as in a body or an ERROR event).

    410 (or reason ``Expired``/``Gone``): :class:`ExpiredError`; a too-large
    resourceVersion: :class:`TooLargeResourceVersionError`; 429:
    :class:`TooManyRequestsError`; 409: :class:`AlreadyExistsError` for reason
    ``AlreadyExists``, else :class:`ConflictError`; 400, 401, 403, 404, 405 and 422
    their own classes; anything else :class:`ApiError`.

    ``http_status`` overrides the Status' ``code`` when the Status has none;
    ``retry_after`` (seconds, from a ``Retry-After`` header) wins over
    ``details.retryAfterSeconds``.
    """
    code = status.get("code")
    if not isinstance(code, int):
        code = http_status if http_status is not None else 500
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or "")
    raw_details = status.get("details")
    details: Mapping[str, Any] | None = raw_details if isinstance(raw_details, Mapping) else None
    kwargs: dict[str, Any] = {"url": url, "status": code, "reason": reason}
    if code == 410 or reason in ("Expired", "Gone"):
        return ExpiredError(message, details, **kwargs)
    if _has_cause(details, _TOO_LARGE_CAUSE) or "too large resource version" in message.lower():
        return TooLargeResourceVersionError(message, details, **kwargs)
    if code == 429 or reason == "TooManyRequests":
        after = retry_after if retry_after is not None else _retry_after(details)
        return TooManyRequestsError(message, details, retry_after=after, **kwargs)
    if code == 409:
        cls: type[ApiError] = AlreadyExistsError if reason == "AlreadyExists" else ConflictError
    else:
        cls = _BY_CODE.get(code, ApiError)
    return cls(code, reason, message, details, url=url)


def is_connection_refused(err: BaseException) -> bool:
    """True if ``err`` (or anything in its cause/context chain) is a refused connection."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        if isinstance(current, OSError) and current.errno == errno.ECONNREFUSED:
            return True
        current = current.__cause__ or current.__context__
    return False
