"""What a reconciler takes and returns: :class:`Request`, :class:`Result`, :class:`TerminalError`.

controller-runtime's ``pkg/reconcile``. A reconciler is called with a
:class:`Request` naming one object (never the object itself: it reads the
current state from the cache, which may have moved on since the event that
queued the request) and makes the world match that state. It returns ``None``
or a :class:`Result`, or raises:

* returns ``None`` or ``Result()``: done; the request's failure count is reset;
* returns ``Result(requeue_after=s)``: reconcile again after ``s`` seconds
  (failure count reset), unless a change queues it sooner; ``Result(requeue_after=0)``:
  again soon, through the rate limiter;
* raises :class:`TerminalError`: logged, counted as an error, not retried
  (until a change queues the request again);
* raises anything else: logged, counted as an error, and retried after the
  rate limiter's backoff for that request (by default 5 ms doubling per
  failure up to 1000 s, and 10 requests/s overall with bursts of 100).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

from ..cache.keys import get_name, get_namespace

__all__ = ["ReconcileFunc", "Request", "Result", "TerminalError"]


class Request(NamedTuple):
    """One object to reconcile: its namespace (``""`` for a cluster-scoped
    object, as controller-runtime's ``NamespacedName``) and name. Immutable,
    hashable, cheap (a tuple)."""

    namespace: str
    name: str

    @classmethod
    def for_object(cls, obj: Any) -> Request:
        """The request of ``obj`` (a dict or an object with ``metadata``).
        Raises ``ValueError`` if it has no name."""
        name = get_name(obj)
        if not name:
            raise ValueError("cannot make a Request for an object without metadata.name")
        return cls(get_namespace(obj) or "", name)

    @property
    def key(self) -> str:
        """The cache key: ``"namespace/name"``, or ``"name"`` (what listers and
        ``indexer.get_by_key`` take)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks for next. ``requeue_after``: seconds after which to
    reconcile the request again (``None``: only when something changes; ``0``: soon,
    through the rate limiter). ``priority``: the priority the request is queued at
    again (for a requeue; higher first; ``None``: the priority it was queued at, as
    controller-runtime's ``Result.Priority``)."""

    requeue_after: float | None = None
    priority: int | None = None

    def __post_init__(self) -> None:
        priority = self.priority
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise ValueError(f"Result.priority must be an integer or None, not {priority!r}")
        after = self.requeue_after
        if after is not None and (
            isinstance(after, bool)
            or not isinstance(after, int | float)
            or not math.isfinite(after)
            or after < 0
        ):
            raise ValueError(
                f"Result.requeue_after must be a finite number of seconds >= 0 or None, "
                f"not {after!r}"
            )


class TerminalError(Exception):
    """Raised by a reconciler for a failure that retrying cannot fix (an invalid
    spec, say): it is logged and counted, and the request is not requeued until a
    change queues it again (controller-runtime's ``reconcile.TerminalError``).

    ``TerminalError("why")``, or ``raise TerminalError("why") from err``.
    """


ReconcileFunc: TypeAlias = (
    Callable[[Request], Awaitable["Result | None"]] | Callable[[Request], "Result | None"]
)
"""A reconciler: a coroutine function (run on the event loop) or a plain function
(run on a worker thread) taking a :class:`Request` and returning a
:class:`Result` or ``None``."""
