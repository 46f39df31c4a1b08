"""Wall-clock time as objects carry it (``creationTimestamp``, ``deletionTimestamp``,
conditions' ``lastTransitionTime``).

Private to :mod:`kubereflector.testing.apiserver`. Timestamps inside objects are
wall-clock, as in kube; every timed behaviour of the emulator (bookmarks,
timeouts, history retention) runs on its injectable clock instead.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

__all__ = ["timestamp", "wall_now"]


def wall_now() -> float:
    """Seconds since the epoch (timestamps in objects are wall-clock, as in kube)."""
    return time.time()


def timestamp(now: float | None = None) -> str:
    """RFC 3339 in UTC with second precision, as ``metav1.Time`` serialises."""
    moment = datetime.fromtimestamp(wall_now() if now is None else now, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
