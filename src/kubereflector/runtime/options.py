"""How a controller reconciles: :class:`ControllerOptions`, one immutable value
taken by :meth:`Manager.reconciler <kubereflector.runtime.Manager.reconciler>` and
by :class:`~kubereflector.runtime.Controller` (controller-runtime's
``controller.Options``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..workqueue import RateLimiter
from .reconcile import Request

__all__ = ["ControllerOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerOptions:
    """How a controller reconciles; derive a variant with ``dataclasses.replace``.

    Raises ``ValueError`` (naming the field) for a value out of range and
    ``TypeError`` for one of the wrong type.
    """

    max_concurrent_reconciles: int = 1
    """Requests reconciled at once, by as many workers (never one request twice
    at once). controller-runtime's default is 1 too: raise it for reconcilers
    that wait on I/O."""

    rate_limiter: RateLimiter[Request] | None = None
    """The queue's rate limiter for failures and ``Result(requeue=True)`` (``None``:
    the workqueue's ``default_controller_rate_limiter()``: per request exponential
    from 5 ms up to 1000 s, and overall at most 10 per second after a burst of 100)."""

    def __post_init__(self) -> None:
        workers = self.max_concurrent_reconciles
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"max_concurrent_reconciles must be an integer >= 1, not {workers!r}")
        limiter = self.rate_limiter
        if limiter is not None and not isinstance(limiter, RateLimiter):
            raise TypeError(f"rate_limiter must be a RateLimiter, not {type(limiter).__name__}")


def _checked_options(options: object) -> ControllerOptions:
    """``options`` (``None``: the defaults); ``TypeError`` for anything else."""
    if options is None:
        return ControllerOptions()
    if not isinstance(options, ControllerOptions):
        raise TypeError(f"options must be ControllerOptions, not {type(options).__name__}")
    return options
