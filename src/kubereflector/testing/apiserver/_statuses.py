"""The ``Status`` objects the emulator answers failures with, as kube-apiserver words
them (code, reason, message, details), and :class:`StatusError`, which carries one
from where a request fails to where it is answered.

Private to :mod:`kubereflector.testing.apiserver` (and to
:class:`~kubereflector.testing.FakeControllerSource`, which answers resourceVersions
it cannot serve with the same Statuses). Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ...errors import failure_status
from ._gofmt import GoSyntax, go_quote, go_sharp_v, go_v
from ._resources import ServedResource

__all__ = [
    "FieldError",
    "StatusError",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "invalid",
    "invalid_resource_version",
    "method_not_allowed",
    "not_found",
    "path_not_found",
    "too_large",
    "too_old",
]


class StatusError(Exception):
    """A request failed with the Kubernetes ``Status`` object ``status``."""

    def __init__(self, status: dict[str, Any]) -> None:
        self.status = status
        super().__init__(f"{status.get('code')} {status.get('reason')}: {status.get('message')}")


def bad_request(message: str) -> StatusError:
    return StatusError(failure_status(400, "BadRequest", message))


_REASONS: Final = {
    "Forbidden": "FieldValueForbidden",
    "Required": "FieldValueRequired",
    "NotSupported": "FieldValueNotSupported",
    "TooLong": "FieldValueTooLong",
    "TooMany": "FieldValueTooMany",
    "TypeInvalid": "FieldValueTypeInvalid",
    "Duplicate": "FieldValueDuplicate",
    "Internal": "InternalError",
}
_TITLES: Final = {
    "Forbidden": "Forbidden",
    "Required": "Required value",
    "NotSupported": "Unsupported value",
    "TooLong": "Too long",
    "TooMany": "Too many",
    "TypeInvalid": "Invalid value",
    "Duplicate": "Duplicate value",
    "Internal": "Internal error",
    "Invalid": "Invalid value",
}
_VALUELESS: Final = frozenset({"Required", "Forbidden", "TooLong", "Internal"})


@dataclass(frozen=True, slots=True)
class FieldError:
    """One entry of a 422 Invalid (apimachinery's ``field.Error``): ``type`` is one of
    ``"Invalid"``, ``"TypeInvalid"``, ``"Required"``, ``"Forbidden"``,
    ``"NotSupported"`` (``detail``: the supported values, already quoted),
    ``"TooLong"``, ``"TooMany"``, ``"Duplicate"``, ``"Internal"``. The bad ``value``
    is printed as Go prints it (``"abc"``, ``3``, ``map[string]interface {}{...}``)."""

    field: str
    type: str
    detail: str
    value: Any = None

    def text(self) -> str:
        """kube's ``ErrorBody``: ``Invalid value: 3: must be less than 2``."""
        title = _TITLES.get(self.type, "Invalid value")
        text = title if self.type in _VALUELESS else f"{title}: {_value_text(self.value)}"
        if self.type == "NotSupported" and self.detail:
            return f"{text}: supported values: {self.detail}"
        return f"{text}: {self.detail}" if self.detail else text

    def cause(self) -> dict[str, Any]:
        reason = _REASONS.get(self.type, "FieldValueInvalid")
        return {"reason": reason, "message": self.text(), "field": self.field}


def _value_text(value: Any) -> str:
    if value is None:
        return go_quote("null")  # Go prints a nil bad value as the string "null"
    if isinstance(value, str):
        return value if isinstance(value, GoSyntax) else go_quote(value)
    if isinstance(value, (bool, int, float)):
        return go_v(value)
    return go_sharp_v(value)


def invalid(kind: str, name: str, errors: Sequence[FieldError], group: str = "") -> StatusError:
    """422 Invalid for ``kind`` ``name`` (``errors.NewInvalid``): a cause per error,
    the message listing each distinct one once."""
    texts = list(dict.fromkeys(f"{e.field}: {e.text()}" for e in errors))
    joined = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
    subject = f"{kind}.{group}" if group else kind
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [e.cause() for e in errors]
    return StatusError(
        failure_status(422, "Invalid", f'{subject} "{name}" is invalid: {joined}', details)
    )


def path_not_found() -> StatusError:
    """404 for a path the server does not serve."""
    return StatusError(
        failure_status(404, "NotFound", "the server could not find the requested resource", {})
    )


def method_not_allowed(method: str, what: str) -> StatusError:
    """405 for ``method`` on ``what`` (a path, or a resource that lacks the verb)."""
    return StatusError(
        failure_status(
            405,
            "MethodNotAllowed",
            f"the server does not allow this method on the requested resource ({method} {what})",
            {},
        )
    )


# -- objects ----------------------------------------------------------------------------------


def _details(info: ServedResource, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if info.group:
        details["group"] = info.group
    details["kind"] = info.plural
    return details


def not_found(info: ServedResource, name: str) -> StatusError:
    return StatusError(
        failure_status(
            404, "NotFound", f'{info.group_resource} "{name}" not found', _details(info, name)
        )
    )


def conflict(info: ServedResource, name: str, why: str) -> StatusError:
    return StatusError(
        failure_status(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {info.group_resource} "{name}": {why}',
            _details(info, name),
        )
    )


def already_exists(info: ServedResource, name: str) -> StatusError:
    return StatusError(
        failure_status(
            409,
            "AlreadyExists",
            f'{info.group_resource} "{name}" already exists',
            _details(info, name),
        )
    )


# -- resourceVersions and continue tokens -----------------------------------------------------


def expired(message: str, continue_: str | None = None) -> StatusError:
    status = failure_status(410, "Expired", message)
    if continue_:
        status["metadata"] = {"continue": continue_}
    return StatusError(status)


def too_old(requested: int, oldest: int) -> dict[str, Any]:
    """kube-apiserver's answer to a watch from a resourceVersion older than the
    ``oldest`` its history still holds: a 410 Expired (the watcher relists)."""
    return failure_status(410, "Expired", f"too old resource version: {requested} ({oldest})")


def too_large(requested: int, current: int) -> dict[str, Any]:
    """kube-apiserver's answer (v1.28) to a list or watch from a resourceVersion newer
    than the ``current`` one: a 504 Timeout with a ResourceVersionTooLarge cause
    (client-go's ``IsTooLargeResourceVersion``)."""
    return failure_status(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {requested}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


def invalid_resource_version(text: str, *, from_etcd: bool) -> dict[str, Any]:
    """kube-apiserver's answer (v1.28) to a resourceVersion that is not a number: a
    400 BadRequest for a list it sends to etcd (``from_etcd``: one with a
    ``limit`` or ``resourceVersionMatch=Exact``), else (watches, lists from the
    watch cache) a 500 with no reason."""
    quoted = msgspec.json.encode(text).decode()
    invalid = (
        f"resourceVersion: Invalid value: {quoted}: "
        f"strconv.ParseUint: parsing {quoted}: invalid syntax"
    )
    if from_etcd:
        return failure_status(400, "BadRequest", f"invalid resource version: {invalid}")
    status = failure_status(500, "", invalid)
    del status["reason"]  # kube sends none
    return status
