"""Errors (``kubereflector.errors``): Status mapping and connection-refused detection."""

from __future__ import annotations

import errno
from typing import Any

import pytest

from kubereflector import (
    AlreadyExistsError,
    ApiError,
    BadRequestError,
    ConflictError,
    DecodeError,
    ExpiredError,
    ForbiddenError,
    InvalidError,
    MethodNotAllowedError,
    NotFoundError,
    StatusCause,
    TooLargeResourceVersionError,
    TooManyRequestsError,
    UnauthorizedError,
    error_from_status,
    is_connection_refused,
)


def status(code: int | None, reason: str = "", message: str = "", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure"}
    if code is not None:
        body["code"] = code
    if reason:
        body["reason"] = reason
    if message:
        body["message"] = message
    body.update(extra)
    return body


# -- error_from_status ------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        status(410, "Expired", "too old resource version: 1 (5)"),
        status(410, "Gone", "too old resource version: 1 (5)"),
        status(410),
        status(None, "Expired", "The provided continue parameter is too old"),
        status(500, "Gone"),
    ],
)
def test_expired(body: dict[str, Any]) -> None:
    err = error_from_status(body)
    assert type(err) is ExpiredError
    assert err.message == body.get("message", "")


def test_expired_keeps_status_fields_and_url() -> None:
    err = error_from_status(
        status(410, "Expired", "too old resource version: 1 (5)"), url="https://k/api/v1/pods"
    )
    assert (err.status, err.reason, err.url) == (410, "Expired", "https://k/api/v1/pods")
    assert str(err) == "410 Expired: too old resource version: 1 (5) (https://k/api/v1/pods)"


def test_too_large_by_cause() -> None:
    details = {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    err = error_from_status(
        status(
            504, "Timeout", "Timeout: Too large resource version: 9, current: 5", details=details
        )
    )
    assert type(err) is TooLargeResourceVersionError
    assert (err.status, err.reason) == (504, "Timeout")
    assert err.details == details


def test_too_large_by_cause_with_an_unrelated_message() -> None:
    details = {"causes": [{"reason": "Other"}, {"reason": "ResourceVersionTooLarge"}]}
    err = error_from_status(status(504, "Timeout", "request timed out", details=details))
    assert type(err) is TooLargeResourceVersionError


def test_too_large_by_the_old_message_form() -> None:
    err = error_from_status(status(504, "Timeout", "Too large resource version: 9, current: 5"))
    assert type(err) is TooLargeResourceVersionError


def test_a_plain_timeout_is_not_too_large() -> None:
    err = error_from_status(
        status(504, "Timeout", "request timed out", details={"causes": [{"reason": "X"}]})
    )
    assert type(err) is ApiError
    assert err.status == 504


def test_too_many_requests_retry_after_from_details() -> None:
    err = error_from_status(
        status(429, "TooManyRequests", "slow down", details={"retryAfterSeconds": 3})
    )
    assert type(err) is TooManyRequestsError
    assert err.retry_after == 3.0
    assert err.status == 429


def test_too_many_requests_explicit_retry_after_wins() -> None:
    body = status(429, "TooManyRequests", "slow down", details={"retryAfterSeconds": 3})
    err = error_from_status(body, retry_after=7.5)
    assert isinstance(err, TooManyRequestsError)
    assert err.retry_after == 7.5


def test_too_many_requests_without_retry_after() -> None:
    err = error_from_status(status(429, "TooManyRequests"))
    assert isinstance(err, TooManyRequestsError)
    assert err.retry_after is None
    by_reason = error_from_status(status(None, "TooManyRequests"), http_status=429)
    assert isinstance(by_reason, TooManyRequestsError)
    assert by_reason.status == 429


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (401, "Unauthorized", UnauthorizedError),
        (403, "Forbidden", ForbiddenError),
        (404, "NotFound", NotFoundError),
    ],
)
def test_auth_and_not_found(code: int, reason: str, cls: type[ApiError]) -> None:
    err = error_from_status(status(code, reason, "nope"), url="https://k/x")
    assert type(err) is cls
    assert isinstance(err, ApiError)
    assert (err.status, err.reason, err.message, err.url) == (code, reason, "nope", "https://k/x")


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (409, "AlreadyExists", AlreadyExistsError),
        (409, "Conflict", ConflictError),
        (409, "", ConflictError),
        (400, "BadRequest", BadRequestError),
        (405, "MethodNotAllowed", MethodNotAllowedError),
        (422, "Invalid", InvalidError),
    ],
)
def test_write_errors_have_their_classes(code: int, reason: str, cls: type[ApiError]) -> None:
    err = error_from_status(status(code, reason, "no"), url="https://k/api/v1/x")
    assert type(err) is cls
    assert (err.status, err.reason, err.url) == (code, reason, "https://k/api/v1/x")
    assert "https://k/api/v1/x" in str(err)


def test_invalid_names_the_object_and_its_field_causes() -> None:
    details = {
        "name": "Bad_Name",
        "kind": "ConfigMap",
        "causes": [
            {"reason": "FieldValueInvalid", "message": "Invalid value", "field": "metadata.name"},
            {"reason": "FieldValueRequired", "message": "Required value"},
            "not a cause",
        ],
    }
    err = error_from_status(
        status(422, "Invalid", 'ConfigMap "Bad_Name" is invalid', details=details)
    )
    assert isinstance(err, InvalidError)
    assert (err.name, err.kind) == ("Bad_Name", "ConfigMap")
    assert err.causes == (
        StatusCause("FieldValueInvalid", "Invalid value", "metadata.name"),
        StatusCause("FieldValueRequired", "Required value", ""),
    )


def test_errors_without_details_have_empty_names_and_causes() -> None:
    err = error_from_status(status(409, "Conflict", "stale"))
    assert (err.name, err.kind, err.causes) == ("", "", ())
    odd = error_from_status(status(422, "Invalid", "x", details={"causes": "not a list"}))
    assert odd.causes == ()


def test_other_codes_are_plain_api_errors_with_everything_in_str() -> None:
    details = {"name": "p", "kind": "pods"}
    err = error_from_status(
        status(500, "InternalError", "etcdserver: leader changed", details=details),
        url="https://k/api/v1/pods?watch=1",
    )
    assert type(err) is ApiError
    assert (err.status, err.reason) == (500, "InternalError")
    assert err.details == details
    text = str(err)
    for part in ("500", "InternalError", "etcdserver: leader changed", "https://k/api/v1/pods"):
        assert part in text
    assert repr(err) == f"ApiError({text!r})"


def test_http_status_fills_a_missing_code() -> None:
    assert error_from_status({"message": "x"}, http_status=403).status == 403
    assert type(error_from_status({"message": "x"}, http_status=404)) is NotFoundError
    assert error_from_status({"message": "x"}).status == 500
    # The Status' own code wins over the HTTP status.
    assert error_from_status(status(410, "Expired"), http_status=200).status == 410


def test_non_mapping_details_are_ignored() -> None:
    err = error_from_status(status(500, "InternalError", details=["not", "a", "mapping"]))
    assert err.details is None


def test_class_defaults() -> None:
    expired = ExpiredError()
    assert (expired.status, expired.reason, expired.message) == (
        410,
        "Expired",
        "too old resource version",
    )
    too_large = TooLargeResourceVersionError()
    assert (too_large.status, too_large.reason) == (504, "Timeout")
    many = TooManyRequestsError(retry_after=2.0)
    assert (many.status, many.reason, many.retry_after) == (429, "TooManyRequests", 2.0)
    decode = DecodeError("bad line", url="https://k/w")
    assert (decode.status, decode.reason, decode.url) == (0, "DecodeError", "https://k/w")
    assert str(ApiError(418)) == "418"
    for err in (expired, too_large, many, decode):
        assert isinstance(err, ApiError)


# -- is_connection_refused ----------------------------------------------------------------


def test_connection_refused_error() -> None:
    assert is_connection_refused(ConnectionRefusedError("refused"))


def test_os_error_with_econnrefused_errno() -> None:
    err = OSError("connect failed")
    err.errno = errno.ECONNREFUSED
    assert type(err) is OSError
    assert is_connection_refused(err)
    assert is_connection_refused(OSError(errno.ECONNREFUSED, "Connection refused"))


def raised_from(err: BaseException, cause: BaseException) -> BaseException:
    """``err`` after ``raise err from cause``."""
    try:
        raise err from cause
    except BaseException as raised:
        return raised


def wrap_explicitly(cause: BaseException) -> BaseException:
    """Two wrappers deep, each ``raise ... from``, as client libraries do."""
    return raised_from(RuntimeError("cannot connect"), raised_from(ValueError("middle"), cause))


def wrap_implicitly(cause: BaseException) -> BaseException:
    """An error raised while handling ``cause`` (only ``__context__`` links them)."""
    try:
        try:
            raise cause
        except BaseException:
            raise RuntimeError("while handling")  # noqa: B904
    except RuntimeError as outer:
        return outer


def test_refused_through_an_explicit_cause_chain() -> None:
    outer = wrap_explicitly(ConnectionRefusedError("refused"))
    assert outer.__cause__ is not None
    assert isinstance(outer.__cause__.__cause__, ConnectionRefusedError)
    assert is_connection_refused(outer)


def test_refused_through_an_implicit_context() -> None:
    outer = wrap_implicitly(ConnectionRefusedError("refused"))
    assert outer.__cause__ is None
    assert isinstance(outer.__context__, ConnectionRefusedError)
    assert is_connection_refused(outer)


@pytest.mark.parametrize(
    "err",
    [
        ValueError("x"),
        TimeoutError("timed out"),
        ConnectionResetError("reset"),
        OSError(errno.ECONNRESET, "reset"),
        OSError("no errno"),
        ApiError(503, "ServiceUnavailable"),
    ],
)
def test_other_errors_are_not_refused(err: BaseException) -> None:
    assert not is_connection_refused(err)


def test_a_wrapped_other_error_is_not_refused() -> None:
    assert not is_connection_refused(wrap_explicitly(ConnectionResetError("reset")))
    assert not is_connection_refused(wrap_implicitly(OSError(errno.ECONNRESET, "reset")))


def test_a_cyclic_chain_terminates() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__context__ = b
    b.__context__ = a
    assert not is_connection_refused(a)
