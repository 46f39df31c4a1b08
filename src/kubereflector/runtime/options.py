"""How a controller reconciles: :class:`ControllerOptions`, one immutable value
taken by :meth:`Manager.reconciler <kubereflector.runtime.Manager.reconciler>` and
by :class:`~kubereflector.runtime.Controller` (controller-runtime's
``controller.Options``); and how a Manager's informers list and watch:
:class:`InformerOptions`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..workqueue import RateLimiter
from .reconcile import Request

if TYPE_CHECKING:
    from ..cache.compact import ObjectMode
    from ..cache.delta_fifo import TransformFunc
    from ..cache.reflector import ReflectorOptions
    from ..factory import TweakListOptionsFunc

__all__ = ["ControllerOptions", "InformerOptions"]


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

    reconcile_timeout: float | None = None
    """Seconds a reconcile may run (``None``: no limit, controller-runtime's default).
    A coroutine reconcile running longer is cancelled; a plain function, which a thread
    cannot interrupt, is waited for and its result dropped. Either way the timeout is
    logged, counted in ``controller_runtime_reconcile_timeouts_total`` and the request
    retried after the rate limiter's backoff (controller-runtime's
    ``ReconciliationTimeout``)."""

    requeue_on_own_writes: bool = False
    """Whether the watch events of the controller's own writes (through a Manager's
    client) queue the request whose reconcile made them again. ``False``: they do not,
    since that reconcile knew the state it wrote (a reconcile that wants another pass
    returns ``Result(requeue_after=0)``); this is what keeps the initial backlog at one
    reconcile per object. ``True``: they do, as in controller-runtime. Other requests an
    event maps to are queued either way (see :mod:`kubereflector.runtime.read_your_writes`)."""

    def __post_init__(self) -> None:
        workers = self.max_concurrent_reconciles
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"max_concurrent_reconciles must be an integer >= 1, not {workers!r}")
        limiter = self.rate_limiter
        if limiter is not None and not isinstance(limiter, RateLimiter):
            raise TypeError(f"rate_limiter must be a RateLimiter, not {type(limiter).__name__}")
        timeout = self.reconcile_timeout
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise ValueError(
                f"reconcile_timeout must be a finite number of seconds > 0 or None, not {timeout!r}"
            )
        if not isinstance(self.requeue_on_own_writes, bool):
            raise TypeError(
                "requeue_on_own_writes must be a bool, not "
                f"{type(self.requeue_on_own_writes).__name__}"
            )


def _checked_options(options: object) -> ControllerOptions:
    """``options`` (``None``: the defaults); ``TypeError`` for anything else."""
    if options is None:
        return ControllerOptions()
    if not isinstance(options, ControllerOptions):
        raise TypeError(f"options must be ControllerOptions, not {type(options).__name__}")
    return options


@dataclass(frozen=True, slots=True, kw_only=True)
class InformerOptions:
    """How a :class:`~kubereflector.runtime.Manager`'s informers list and watch: the
    arguments of :class:`~kubereflector.SharedInformerFactory`, with its defaults and
    meanings (the manager's ``namespace`` is its own argument). The factory checks
    them when the manager is made (``TypeError``/``ValueError`` naming the field)."""

    default_resync: float = 0
    """Seconds between resyncs of every informer (``0``: none)."""
    custom_resync: Mapping[str, float] | None = None
    """Resync periods per resource name."""
    reflector_options: ReflectorOptions | None = None
    """How every informer lists, watches and recovers. ``None``: the Manager's default,
    ``ReflectorOptions(use_watch_list=False)``: the first sync is a paginated list at
    resourceVersion ``"0"`` (from the API server's watch cache), not a watch-list
    stream, which the factory prefers. A controller waits for its informers' sync
    before its first reconcile, and a watch-list ends only with the server's
    ``initial-events-end`` bookmark, which kube-apiserver 1.28 sends on a timer: 0.6
    to 5 s from ``Manager(...)`` to the first reconcile over 200 objects, against
    0.04 s with a list (``benchmarks/controller_loop.py``). Pass
    ``ReflectorOptions()`` for the watch-list: it spares a large cluster's API server
    the memory of whole lists when many clients start at once."""
    custom_reflector_options: Mapping[str, ReflectorOptions] | None = None
    """:class:`~kubereflector.ReflectorOptions` per resource name."""
    object_mode: ObjectMode = "dict"
    """``"dict"``, ``"compact"`` (read-only objects, decoded lazily: less memory) or
    ``"compact-protobuf"`` (compact, built-in kinds listed and kept in protobuf)."""
    transform: TransformFunc | None = None
    """Rewrites each object before it is cached (e.g. drops ``managedFields``)."""
    tweak_list_options: TweakListOptionsFunc | None = None
    """Rewrites every list's and watch's options (e.g. a label selector)."""

    def as_kwargs(self) -> dict[str, Any]:
        """The factory's keyword arguments (``reflector_options`` resolved)."""
        from ..cache.reflector import ReflectorOptions

        kwargs = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.reflector_options is None:
            kwargs["reflector_options"] = ReflectorOptions(use_watch_list=False)
        return kwargs


def _checked_informers(options: object) -> InformerOptions:
    """``options`` (``None``: the defaults); ``TypeError`` for anything else."""
    if options is None:
        return InformerOptions()
    if not isinstance(options, InformerOptions):
        raise TypeError(f"informers must be InformerOptions, not {type(options).__name__}")
    return options
