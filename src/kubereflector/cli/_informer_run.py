"""One SharedIndexInformer run for ``watch`` and ``get``: :class:`InformerRun` starts
it, waits for the first sync (or a fatal error, or the stop event) and stops it."""

from __future__ import annotations

import asyncio
from typing import Any

from .._aio.tasks import cancel_and_wait
from ..cache.keys import deletion_handling_meta_namespace_key_func
from ..cache.reflector import Reflector, default_watch_error_handler
from ..cache.shared_informer import SharedIndexInformer, wait_for_cache_sync
from ..cache.transforms import strip_managed_fields
from ..client import ConfigError, UnknownResourceError
from ..errors import ApiError
from ._context import CommandContext
from ._errors import CliError
from ._observer import ListWatchObserver, ObservedListWatch
from ._target import Target

__all__ = ["InformerRun"]


def _is_fatal(err: BaseException) -> bool:
    """Errors that retrying will not cure (before the first sync they end the command)."""
    if isinstance(err, UnknownResourceError | ConfigError):
        return True
    return isinstance(err, ApiError) and err.status in (400, 401, 403, 404, 405, 406, 415, 422)


class InformerRun:
    """One SharedIndexInformer run for a command (an async context manager: entering
    starts the informer, leaving stops it and waits until it has). Used on the
    event loop only.

    Before the first sync, an error that retrying will not cure (401, 403, 404, an
    unknown resource, ...) ends :meth:`wait_synced`; after it, every error is
    retried as the informer always does. ``first_sync``: seconds from start to the
    first sync, once synced."""

    def __init__(
        self,
        target: Target,
        ctx: CommandContext,
        *,
        observer: ListWatchObserver,
        strip: bool,
    ) -> None:
        self._ctx = ctx
        info = target.info
        kind = None if target.lister_watcher.metadata_only else info.kind or None
        self.informer = SharedIndexInformer(
            ObservedListWatch(target.lister_watcher, observer), expected_kind=kind, clock=ctx.clock
        )
        if strip:
            self.informer.set_transform(strip_managed_fields)
        self.informer.set_watch_error_handler(self._on_watch_error)
        self._fatal: asyncio.Future[BaseException] | None = None
        self._task: asyncio.Task[None] | None = None
        self._started_at = 0.0
        self.first_sync: float | None = None

    def _on_watch_error(self, reflector: Reflector, err: BaseException) -> None:
        fatal = self._fatal
        synced = self.informer.has_synced()
        if fatal is not None and not fatal.done() and not synced and _is_fatal(err):
            fatal.set_result(err)
            return
        default_watch_error_handler(reflector, err)

    async def __aenter__(self) -> InformerRun:
        self._fatal = asyncio.get_running_loop().create_future()
        self._started_at = self._ctx.clock.now()
        self._task = asyncio.create_task(self.informer.run(), name="kubereflector informer")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
        if self._fatal is not None:
            self._fatal.cancel()

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """True once synced; False when stopped or ``timeout`` passed first. Raises a
        fatal error the informer met first, or the informer's own failure."""
        assert self._task is not None
        assert self._fatal is not None
        sync = asyncio.ensure_future(
            wait_for_cache_sync(self.informer, timeout=timeout, clock=self._ctx.clock)
        )
        stop = asyncio.ensure_future(self._ctx.stop.wait())
        try:
            waiters: set[asyncio.Future[Any]] = {sync, stop, self._fatal, self._task}
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(sync)
            await cancel_and_wait(stop)
        if sync.done() and not sync.cancelled() and sync.result():
            self.first_sync = self._ctx.clock.now() - self._started_at
            return True
        if self._fatal.done():
            raise self._fatal.result()
        if self._task.done():
            self._task.result()  # raises what ended it
            raise CliError("the informer stopped before its cache synced")
        return False

    async def wait_stopped(self) -> None:
        """Until the stop event (or the informer ends, raising why)."""
        assert self._task is not None
        stop = asyncio.ensure_future(self._ctx.stop.wait())
        try:
            await asyncio.wait({stop, self._task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(stop)
        if self._task.done() and not self._ctx.stop.is_set():
            self._task.result()
            raise CliError("the informer stopped unexpectedly")

    def sorted_objects(self) -> list[Any]:
        """The cache's objects, sorted by key (namespace/name)."""
        return sorted(self.informer.indexer.list(), key=deletion_handling_meta_namespace_key_func)
