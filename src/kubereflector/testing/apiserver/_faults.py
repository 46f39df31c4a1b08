"""The emulator's injected failures (:class:`Faults`): failed requests, slowed watch
streams and corrupted resourceVersions, set through the Python API
(``ApiServerEmulator.fail_next``, ...) or the admin endpoint
(``POST /_emulator/faults``) and acted on by the handler and the watch streams.

Private to :mod:`kubereflector.testing.apiserver`. Dropped and stalled watches are
not state here: they act on the open watches at once (:mod:`._watch`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from ...errors import failure_status
from ._records import ENCODER, decode

__all__ = ["Faults"]

_FAULT_REASONS: Final = {
    400: ("BadRequest", "injected fault: bad request"),
    401: ("Unauthorized", "Unauthorized"),
    403: ("Forbidden", "injected fault: forbidden"),
    404: ("NotFound", "injected fault: the server could not find the requested resource"),
    409: ("Conflict", "injected fault: conflict"),
    410: ("Expired", "injected fault: too old resource version"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: injected fault"),
    503: (
        "ServiceUnavailable",
        "injected fault: the server is currently unable to handle the request",
    ),
    504: ("Timeout", "injected fault: the server was unable to respond in time"),
}


@dataclass(slots=True)
class Faults:
    """The injected failures in force: the next requests to fail, the delay before each
    watch event, the watch events whose resourceVersion to corrupt. Event loop only."""

    fail_count: int = 0
    fail_status: int = 500
    fail_retry_after: float | None = None
    fail_reason: str | None = None
    slow_delay: float | None = None
    corrupt_count: int = 0
    corrupt_value: Any = None

    def slow_streams(self, delay_per_event: float | None) -> None:
        """Wait ``delay_per_event`` seconds before each watch event (``None`` or 0: no
        delay); ``ValueError`` if negative."""
        if delay_per_event is not None and delay_per_event < 0:
            raise ValueError(f"delay_per_event must be >= 0 (got {delay_per_event})")
        self.slow_delay = delay_per_event or None

    def reset(self) -> None:
        """Cancel :meth:`fail_next`, :meth:`slow_streams` and
        :meth:`corrupt_resource_versions`."""
        self.fail_count = 0
        self.slow_delay = None
        self.corrupt_count = 0

    def corrupt_resource_versions(self, count: int, value: Any) -> None:
        if count < 0:
            raise ValueError(f"count must be >= 0 (got {count})")
        ENCODER.encode(value)  # raises for what JSON cannot carry
        self.corrupt_count = count
        self.corrupt_value = value

    def corrupt(self, lines: list[bytes]) -> list[bytes]:
        """``lines`` (watch events), the first ``corrupt_count`` of them with
        ``corrupt_value`` as their ``metadata.resourceVersion``."""
        out = []
        for line in lines:
            if self.corrupt_count <= 0:
                out.append(line)
                continue
            self.corrupt_count -= 1
            event = decode(line)
            event["object"].setdefault("metadata", {})["resourceVersion"] = self.corrupt_value
            out.append(ENCODER.encode(event) + b"\n")
        return out

    def fail_next(
        self, count: int, status: int, retry_after: float | None, reason: str | None
    ) -> None:
        if count < 0:
            raise ValueError(f"count must be >= 0 (got {count})")
        if not 400 <= status <= 599:
            raise ValueError(f"status must be an HTTP error code (got {status})")
        if retry_after is not None and retry_after < 0:
            raise ValueError(f"retry_after must be >= 0 (got {retry_after})")
        self.fail_count = count
        self.fail_status = status
        self.fail_retry_after = retry_after
        self.fail_reason = reason

    def take_failure(self) -> dict[str, Any] | None:
        """The Status the next request fails with (one fewer to fail), or ``None``."""
        if self.fail_count <= 0:
            return None
        self.fail_count -= 1
        code = self.fail_status
        default_reason, message = _FAULT_REASONS.get(code, ("InternalError", "injected fault"))
        details: dict[str, Any] | None = None
        retry_after = self.fail_retry_after
        if retry_after is None and code == 429:
            retry_after = 1
        if retry_after is not None:
            details = {"retryAfterSeconds": math.ceil(retry_after)}
        return failure_status(code, self.fail_reason or default_reason, message, details)
