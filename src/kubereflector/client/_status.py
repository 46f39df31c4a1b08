"""``Status`` objects where a server should have sent something else.

A 2xx list answer or a watch line that is a Status, and the Status of a watch
ERROR event: what each stands for, as one of :mod:`kubereflector.errors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ApiError, error_from_status

__all__ = ["is_status", "status_error"]


def is_status(obj: object) -> bool:
    """Whether ``obj`` (decoded JSON) is a Kubernetes ``Status``: an object whose
    ``kind`` is ``Status``, or that has a ``code`` or ``reason``."""
    return type(obj) is dict and (obj.get("kind") == "Status" or "code" in obj or "reason" in obj)


def status_error(status: Mapping[str, Any], url: str) -> ApiError:
    """The error a ``Status`` outside an error answer stands for (see
    :func:`~kubereflector.errors.error_from_status`); one without an error code
    counts as a 500."""
    code = status.get("code")
    if not (isinstance(code, int) and code >= 400):
        status = {**status, "code": 500}
    return error_from_status(status, url=url)
