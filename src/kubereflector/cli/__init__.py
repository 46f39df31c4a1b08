"""The command line: ``kubereflector`` (also ``python -m kubereflector``).

::

    kubereflector watch RESOURCE [-n NS] [-A] [-l SELECTOR] [--field-selector F]
                        [--kubeconfig P] [--context C] [-o events|names|json|yaml]
                        [--every DURATION] [--metadata-only] [--no-strip-managed-fields]
    kubereflector get RESOURCE [-n NS] [-A] [-l SELECTOR] [-o table|wide|name|names|json|yaml]
                      [-w]
    kubereflector emulator [--port N] [--write-kubeconfig PATH] [--seed-pods N]
                           [--no-tls] [--no-auth]
    kubereflector demo [--duration S] [--forever]

``watch`` runs a :class:`~kubereflector.SharedIndexInformer` for a resource
(resolved through discovery: ``pods``, ``po``, ``deploy``, a CRD plural) and
prints a live event log, or with ``--every`` the cache's keys at that interval;
Ctrl-C (or SIGTERM) stops it and prints a one-line summary on stderr. ``get``
syncs once and prints from the cache, with kubectl's columns (a CRD's
``additionalPrinterColumns`` for its resources); ``get -w`` then prints each change.
``emulator`` serves the bundled API-server emulator until stopped; ``demo`` runs
an informer against it under churn and injected faults, narrating the recovery
(see :mod:`kubereflector.cli._demo`).

Errors a user can cause (no kubeconfig, unknown context or resource, an
unreachable server, 401/403, a malformed selector) print one line on stderr
and exit non-zero: 1 for runtime errors, 2 for invalid arguments, 130 when
interrupted. ``--debug`` adds the traceback and debug logging.

:func:`main` is the console script; :func:`amain` is the same command as a
coroutine (for running on an existing event loop, e.g. in tests), stopped by
setting its ``stop`` event instead of a signal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import logging
import math
import os
import re
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NoReturn, TextIO, TypeVar

import aiohttp
import msgspec
import yaml

from .._aio.signals import LoopStopSignals
from .._aio.tasks import cancel_and_wait
from .._aio.timeout import within
from ..cache.keys import (
    DeletedFinalStateUnknown,
    deletion_handling_meta_namespace_key_func,
    get_metadata,
    get_resource_version,
)
from ..cache.listwatch import (
    BOOKMARK,
    ERROR,
    INITIAL_EVENTS_END_ANNOTATION,
    ListerWatcher,
    ListOptions,
    ListResult,
    WatchEvent,
    WatchStream,
)
from ..cache.reflector import Reflector, default_watch_error_handler
from ..cache.shared_informer import SharedIndexInformer, wait_for_cache_sync
from ..cache.transforms import strip_managed_fields
from ..client import (
    Client,
    ClientConfig,
    ConfigError,
    ResourceInfo,
    ResourceListWatch,
    UnknownResourceError,
    load_config,
)
from ..client.paths import quote_segment, validate_name, validate_namespace
from ..clock import Clock, RealClock
from ..errors import ApiError, ForbiddenError, UnauthorizedError
from ..selectors import FieldSelector, LabelSelector
from ._tables import render_table

__all__ = ["main"]

PROG = "kubereflector"

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_log = logging.getLogger("kubereflector.cli")
_T = TypeVar("_T")


class _UsageError(Exception):
    """An invalid argument (exit status 2)."""


class _CliError(Exception):
    """A runtime failure with a message meant for the user (exit status 1)."""


# -- durations ----------------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in ``text``: ``30s``, ``1m``, ``500ms``, ``1h``, ``1m30s``, or plain
    seconds (``2.5``). Raises :class:`ValueError` unless it is positive and finite."""
    raw = text.strip()
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
        pos = 0
        if not raw:
            raise ValueError(f"invalid duration {text!r}") from None
        while pos < len(raw):
            match = _DURATION_PART.match(raw, pos)
            if match is None:
                raise ValueError(
                    f"invalid duration {text!r} (use e.g. 30s, 1m, 500ms or plain seconds)"
                ) from None
            seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
            pos = match.end()
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"invalid duration {text!r}: it must be positive")
    return seconds


# -- context of one invocation --------------------------------------------------------------


@dataclass
class _Context:
    stdout: TextIO
    stderr: TextIO
    clock: Clock
    stop: asyncio.Event
    debug: bool = False
    server: str | None = None
    context: str | None = None
    broken_pipe: bool = False

    @property
    def tty(self) -> bool:
        """Progress is shown only when both streams are terminals (not when piped)."""
        return _isatty(self.stdout) and _isatty(self.stderr)

    def out(self, text: str) -> None:
        """Write a line to stdout (flushed: a watch is read live through pipes)."""
        if self.broken_pipe:
            return
        try:
            self.stdout.write(text + "\n")
            self.stdout.flush()
        except BrokenPipeError:
            # The reader went away (``| head``): stop quietly.
            self.broken_pipe = True
            self.stop.set()

    def err(self, text: str) -> None:
        with contextlib.suppress(BrokenPipeError, ValueError):
            self.stderr.write(text + "\n")
            self.stderr.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _now_iso() -> str:
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- observing a ListerWatcher (progress, and the demo's narration) --------------------------


class ListWatchObserver:
    """Callbacks of :class:`ObservedListWatch`; every method does nothing by default.

    Called on the event loop, inline with the Reflector's I/O: keep them quick.
    """

    def list_succeeded(self, options: ListOptions, result: ListResult) -> None:
        """One page of a list arrived."""

    def list_failed(self, options: ListOptions, err: Exception) -> None:
        """A list request raised."""

    def watch_opening(self, options: ListOptions) -> None:
        """A watch is about to be opened."""

    def watch_opened(self, options: ListOptions) -> None:
        """A watch was opened (its response headers arrived)."""

    def initial_progress(self, options: ListOptions, count: int) -> None:
        """A watch-list delivered its ``count``-th initial object."""

    def initial_events_ended(self, options: ListOptions, count: int, resource_version: str) -> None:
        """A watch-list's initial objects (``count``) are complete at ``resource_version``."""

    def watch_event(self, options: ListOptions, event: WatchEvent) -> None:
        """An event of a watch (after a watch-list's initial objects), bookmarks included."""

    def watch_error_event(self, options: ListOptions, status: Any) -> None:
        """The server sent an ``ERROR`` event (a ``Status``) on a watch."""

    def watch_failed(self, options: ListOptions, err: Exception) -> None:
        """Opening or reading a watch raised."""

    def watch_closed(self, options: ListOptions, count: int) -> None:
        """The server ended a watch normally after ``count`` events."""


class ObservedListWatch:
    """A ListerWatcher that reports what passes through it to a :class:`ListWatchObserver`,
    unchanged. Lets the CLI show list progress and the demo narrate without hooks in
    the Reflector. A closing caused by the caller (cancellation) is not reported."""

    __slots__ = ("inner", "observer")

    def __init__(self, inner: ListerWatcher, observer: ListWatchObserver) -> None:
        self.inner = inner
        self.observer = observer

    async def list(self, options: ListOptions) -> ListResult:
        try:
            result = await self.inner.list(options)
        except Exception as err:
            self.observer.list_failed(options, err)
            raise
        self.observer.list_succeeded(options, result)
        return result

    def watch(self, options: ListOptions) -> WatchStream:
        return _ObservedWatch(self.inner, options, self.observer)

    @property
    def url(self) -> str | None:
        """The observed ListerWatcher's ``url``, if it has one (the Reflector's log
        lines name what it watches by it)."""
        url = getattr(self.inner, "url", None)
        return url if isinstance(url, str) else None


class _ObservedWatch(contextlib.AbstractAsyncContextManager[AsyncIterator[WatchEvent]]):
    __slots__ = ("_inner", "_observer", "_options", "_stream")

    def __init__(
        self, inner: ListerWatcher, options: ListOptions, observer: ListWatchObserver
    ) -> None:
        self._inner = inner
        self._options = options
        self._observer = observer
        self._stream: WatchStream | None = None

    async def __aenter__(self) -> AsyncIterator[WatchEvent]:
        self._observer.watch_opening(self._options)
        stream = self._inner.watch(self._options)
        try:
            events = await stream.__aenter__()
        except Exception as err:
            self._observer.watch_failed(self._options, err)
            raise
        self._stream = stream
        self._observer.watch_opened(self._options)
        return _ObservedEvents(events, self._options, self._observer)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stream, self._stream = self._stream, None
        if stream is None:
            return None
        return await stream.__aexit__(exc_type, exc, tb)


class _ObservedEvents:
    """The events of one observed watch (an iterator class, not an async generator,
    so nothing is left to finalize when the Reflector stops reading)."""

    __slots__ = ("_count", "_events", "_initial", "_initial_count", "_observer", "_options")

    def __init__(
        self, events: AsyncIterator[WatchEvent], options: ListOptions, observer: ListWatchObserver
    ) -> None:
        self._events = events
        self._options = options
        self._observer = observer
        self._initial = options.send_initial_events is True
        self._initial_count = 0
        self._count = 0

    def __aiter__(self) -> _ObservedEvents:
        return self

    async def __anext__(self) -> WatchEvent:
        observer = self._observer
        try:
            event = await self._events.__anext__()
        except StopAsyncIteration:
            observer.watch_closed(self._options, self._count)
            raise
        except Exception as err:
            observer.watch_failed(self._options, err)
            raise
        self._count += 1
        etype, obj = event
        if etype == ERROR:
            observer.watch_error_event(self._options, obj)
        elif self._initial:
            if etype == BOOKMARK:
                meta = get_metadata(obj)
                annotations = meta.get("annotations") if isinstance(meta, dict) else None
                if (
                    isinstance(annotations, dict)
                    and annotations.get(INITIAL_EVENTS_END_ANNOTATION) == "true"
                ):
                    self._initial = False
                    observer.initial_events_ended(
                        self._options, self._initial_count, get_resource_version(obj) or ""
                    )
            else:
                self._initial_count += 1
                observer.initial_progress(self._options, self._initial_count)
        else:
            observer.watch_event(self._options, event)
        return event


class _ListProgress(ListWatchObserver):
    """The initial list's progress on a terminal, overwritten in place on stderr:
    objects so far, and the server's ``remainingItemCount`` when it sends one."""

    _REDRAW_EVERY = 0.1

    def __init__(self, stream: TextIO, what: str, *, enabled: bool, clock: Clock) -> None:
        self._stream = stream
        self._what = what
        self._enabled = enabled
        self._clock = clock
        self._count = 0
        self._shown = False
        self._done = not enabled
        self._last_draw = -math.inf

    def list_succeeded(self, options: ListOptions, result: ListResult) -> None:
        if self._done:
            return
        if not options.continue_:
            self._count = 0
        self._count += len(result.items)
        if result.continue_:
            self._draw(result.remaining_item_count, force=True)
        else:
            self.finish()

    def initial_progress(self, options: ListOptions, count: int) -> None:
        if not self._done:
            self._count = count
            self._draw(None)

    def initial_events_ended(self, options: ListOptions, count: int, resource_version: str) -> None:
        self.finish()

    def _draw(self, remaining: int | None, *, force: bool = False) -> None:
        now = self._clock.now()
        if not force and now - self._last_draw < self._REDRAW_EVERY:
            return
        self._last_draw = now
        text = f"listing {self._what}: {self._count} so far"
        if remaining is not None:
            text += f", {remaining} remaining"
        with contextlib.suppress(BrokenPipeError, ValueError):
            self._stream.write("\r\x1b[K" + text)
            self._stream.flush()
        self._shown = True

    def finish(self) -> None:
        """Erase the progress line; show nothing more."""
        if self._done:
            return
        self._done = True
        if self._shown:
            with contextlib.suppress(BrokenPipeError, ValueError):
                self._stream.write("\r\x1b[K")
                self._stream.flush()


class _WatchObserver(_ListProgress):
    """Progress, plus a line on stderr when the server becomes unreachable and when a
    watch is open again (the Reflector retries such failures quietly)."""

    def __init__(self, ctx: _Context, what: str) -> None:
        super().__init__(ctx.stderr, what, enabled=ctx.tty, clock=ctx.clock)
        self._ctx = ctx
        self._down = False

    def list_failed(self, options: ListOptions, err: Exception) -> None:
        self._lost(err)

    def watch_failed(self, options: ListOptions, err: Exception) -> None:
        self._lost(err)

    def watch_opened(self, options: ListOptions) -> None:
        if self._down:
            self._down = False
            self._ctx.err(f"{PROG}: the API server at {self._ctx.server} is reachable again")

    def _lost(self, err: Exception) -> None:
        if self._down or not isinstance(err, aiohttp.ClientConnectionError | OSError):
            return
        self._down = True
        self.finish()
        self._ctx.err(f"{PROG}: warning: {_describe(err, self._ctx)}; retrying")


# -- connecting and running an informer ---------------------------------------------------------


@dataclass
class _Target:
    client: Client
    info: ResourceInfo
    lister_watcher: ResourceListWatch
    namespace: str | None


def _check_arguments(args: argparse.Namespace) -> None:
    """Check the namespace and parse the selectors locally, so that a malformed one
    is reported before any request."""
    if args.namespace:
        try:
            validate_namespace(args.namespace)
        except ValueError as err:
            raise _UsageError(f"-n/--namespace: {err}") from None
    _check_selector("label", args.selector or "", LabelSelector.parse)
    _check_selector("field", args.field_selector or "", FieldSelector.parse)


def _check_selector(kind: str, text: str, parse: Callable[[str], object]) -> None:
    try:
        parse(text)
    except ValueError as err:
        message = str(err)
        if "selector" not in message:
            message = f"invalid {kind} selector {text!r}: {message}"
        raise _UsageError(message) from None


@contextlib.asynccontextmanager
async def _connect(
    args: argparse.Namespace, ctx: _Context, deadline: float | None = None
) -> AsyncIterator[_Target]:
    """Load the config, resolve the resource and make one small list request, so that
    configuration, discovery, authentication and authorization errors surface here,
    once, instead of inside the informer's retry loop. ``deadline`` (on the
    context's clock) bounds all of it, credential plugins included."""
    config = load_config(args.kubeconfig, args.context)
    ctx.context = config.context
    async with Client(config) as client:
        ctx.server = client.server
        yield await _by_deadline(args, ctx, deadline, _target(args, config, client))


async def _by_deadline(
    args: argparse.Namespace, ctx: _Context, deadline: float | None, work: Awaitable[_T]
) -> _T:
    """``await work``, or a one-line error once the context's clock reaches ``deadline``."""
    seconds = None if deadline is None else max(0.0, deadline - ctx.clock.now())
    try:
        return await within(ctx.clock, seconds, work)
    except TimeoutError:
        raise _CliError(
            f"timed out after {args.timeout} connecting to the API server at {ctx.server}"
        ) from None


async def _target(args: argparse.Namespace, config: ClientConfig, client: Client) -> _Target:
    info = await client.discovery.resolve(args.resource)
    namespace: str | None = None
    if info.namespaced and not args.all_namespaces:
        namespace = args.namespace or config.namespace
    lister_watcher = ResourceListWatch(
        client,
        info,
        namespace=namespace,
        label_selector=args.selector,
        field_selector=args.field_selector,
        metadata_only=getattr(args, "metadata_only", False),
    )
    await lister_watcher.list(ListOptions(limit=1))
    return _Target(client, info, lister_watcher, namespace)


def _is_fatal(err: BaseException) -> bool:
    """Errors that retrying will not cure (before the first sync they end the command)."""
    if isinstance(err, UnknownResourceError | ConfigError):
        return True
    return isinstance(err, ApiError) and err.status in (400, 401, 403, 404, 405, 406, 415, 422)


class _Counter:
    """Counts the informer's notifications (changes: adds, updates that changed the
    resourceVersion, deletes and tombstones) and, for ``watch``, prints each one."""

    def __init__(self, ctx: _Context, output: str | None, name_prefix: str = "") -> None:
        self._ctx = ctx
        self._output = output
        self._name_prefix = name_prefix  # "pod", "deployment.apps": for -o name
        self.count = 0

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._emit("ADDED", obj)

    async def on_update(self, old: Any, new: Any) -> None:
        # A relist re-delivers unchanged objects as updates (as client-go does to
        # handlers without a resync period): not a change, so not an event here.
        if get_resource_version(old) != get_resource_version(new):
            self._emit("MODIFIED", new)

    async def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self._emit("DELETED (missed; from relist)", obj.obj, key=obj.key)
        else:
            self._emit("DELETED", obj)

    def _emit(self, kind: str, obj: Any, *, key: str | None = None) -> None:
        self.count += 1
        output = self._output
        if output is None:
            return
        if key is None:
            key = deletion_handling_meta_namespace_key_func(obj)
        if output == "events":
            rv = (get_resource_version(obj) if obj is not None else None) or "-"
            self._ctx.out(f"{_now_iso()}  {kind:<8}  {key}  {rv}")
        elif output in ("names", "name"):
            if output == "name":
                key = f"{self._name_prefix}/{key.rpartition('/')[2]}"
            self._ctx.out(f"{key} (deleted)" if kind.startswith("DELETED") else key)
        elif obj is None:
            return  # a tombstone with no last known state: nothing to print
        else:
            # kubectl get -w --output-watch-events: the event type with the object
            event = {"type": kind.split(" ")[0], "object": obj}
            if output == "json":
                self._ctx.out(msgspec.json.encode(event).decode())
            else:
                self._ctx.out("---\n" + yaml.safe_dump(event, sort_keys=False).rstrip("\n"))


class _InformerRun:
    """One SharedIndexInformer run for a command: start, wait for the first sync (or
    a fatal error, or the stop event), stop."""

    def __init__(
        self,
        target: _Target,
        ctx: _Context,
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

    async def __aenter__(self) -> _InformerRun:
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
            raise _CliError("the informer stopped before its cache synced")
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
            raise _CliError("the informer stopped unexpectedly")


async def _stopped_within(ctx: _Context, seconds: float) -> bool:
    """Wait ``seconds`` on the context's clock; True if the stop event came first."""
    if ctx.stop.is_set():
        return True
    stop = asyncio.ensure_future(ctx.stop.wait())
    sleep = asyncio.ensure_future(ctx.clock.sleep(seconds))
    try:
        await asyncio.wait({stop, sleep}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(stop)
        await cancel_and_wait(sleep)
    return ctx.stop.is_set()


def _sorted_objects(informer: SharedIndexInformer) -> list[Any]:
    return sorted(informer.indexer.list(), key=deletion_handling_meta_namespace_key_func)


# -- watch ----------------------------------------------------------------------------------------


async def _cmd_watch(args: argparse.Namespace, ctx: _Context) -> int:
    every = _duration_arg(args.every, "--every") if args.every is not None else None
    async with _connect(args, ctx) as target:
        what = target.info.resource
        progress = _WatchObserver(ctx, what)
        run = _InformerRun(target, ctx, observer=progress, strip=not args.no_strip_managed_fields)
        counter = _Counter(
            ctx, None if every is not None else args.output, _name_prefix(target.info)
        )
        run.informer.add_event_handler(counter)
        async with run:
            synced = await run.wait_synced()
            progress.finish()
            if synced and every is not None:
                while True:
                    _print_keys(ctx, run.informer, what, args.output)
                    if await _stopped_within(ctx, every):
                        break
            elif synced:
                await run.wait_stopped()
        stats = run.informer.stats()
        first = (
            f"first sync in {run.first_sync:.2f}s" if run.first_sync is not None else "never synced"
        )
        ctx.err(
            f"{stats.objects} objects cached, {counter.count} events, {stats.relists} relists, "
            f"{stats.watch_restarts} watch restarts, {first}"
        )
    return EXIT_OK


def _print_keys(ctx: _Context, informer: SharedIndexInformer, what: str, output: str) -> None:
    objects = _sorted_objects(informer)
    if output in ("json", "yaml"):
        doc = {"apiVersion": "v1", "kind": "List", "items": objects}
        if output == "json":
            ctx.out(msgspec.json.encode(doc).decode())
        else:
            ctx.out("---\n" + yaml.safe_dump(doc, sort_keys=False).rstrip("\n"))
        return
    keys = [deletion_handling_meta_namespace_key_func(obj) for obj in objects]
    if output == "events":
        ctx.out(f"# {_now_iso()}: {len(keys)} {what}")
    lines = list(keys)
    if output == "names":
        lines.append("")
    if lines:
        ctx.out("\n".join(lines))


# -- get -------------------------------------------------------------------------------------------


async def _cmd_get(args: argparse.Namespace, ctx: _Context) -> int:
    deadline = ctx.clock.now() + _duration_arg(args.timeout, "--timeout")
    async with _connect(args, ctx, deadline) as target:
        what = target.info.resource
        columns = []
        if args.output in ("table", "wide"):
            columns = await _by_deadline(args, ctx, deadline, _printer_columns(target))
        printer = _GetPrinter(args.output, target, columns)
        progress = _ListProgress(ctx.stderr, what, enabled=ctx.tty, clock=ctx.clock)
        run = _InformerRun(target, ctx, observer=progress, strip=True)
        async with run:
            synced = await run.wait_synced(max(0.0, deadline - ctx.clock.now()))
            progress.finish()
            if not synced:
                if ctx.stop.is_set():
                    return EXIT_INTERRUPTED
                raise _CliError(f"the cache of {what} did not sync within {args.timeout}")
            objects = _sorted_objects(run.informer)
            printer.listing(ctx, objects, run.informer.last_sync_resource_version())
            if args.watch:
                run.informer.add_event_handler(_WatchPrinter(ctx, printer))
                await run.wait_stopped()
    return EXIT_OK


async def _printer_columns(target: _Target) -> list[dict[str, Any]]:
    """The ``additionalPrinterColumns`` of the CRD serving the target's resource, if it
    is one the user may read (else none: the table shows NAME and AGE)."""
    info = target.info
    if "." not in info.group:  # CRD groups have a dot; most built-in groups do not
        return []
    crd_name = f"{info.resource}.{info.group}"
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + quote_segment(
        validate_name(crd_name)
    )
    try:
        crd = await target.client.get(path)
    except ApiError:
        return []  # not a CRD, or not readable: the default columns
    for version in (crd.get("spec") or {}).get("versions") or []:
        if isinstance(version, dict) and version.get("name") == info.version:
            columns = version.get("additionalPrinterColumns") or []
            return [c for c in columns if isinstance(c, dict)]
    return []


def _name_prefix(info: ResourceInfo) -> str:
    """What ``kubectl get -o name`` prints before the name: ``pod``, ``deployment.apps``."""
    return f"{info.kind.lower()}.{info.group}" if info.group else info.kind.lower()


class _GetPrinter:
    """How ``get`` prints objects: the whole listing, and with ``-w`` each change."""

    def __init__(
        self, output: str, target: _Target, printer_columns: Sequence[dict[str, Any]]
    ) -> None:
        self.output = output
        self.target = target
        self.printer_columns = printer_columns
        self.name_prefix = _name_prefix(target.info)

    def listing(self, ctx: _Context, objects: Sequence[Any], resource_version: str) -> None:
        if self.output in ("json", "yaml"):
            doc = {
                "apiVersion": "v1",
                "kind": "List",
                "metadata": {"resourceVersion": resource_version},
                "items": objects,
            }
            if self.output == "json":
                ctx.out(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode())
            else:
                ctx.out(yaml.safe_dump(doc, sort_keys=False).rstrip("\n"))
        elif self.output in ("name", "names"):
            for obj in objects:
                ctx.out(self.line(obj))
        elif not objects:
            namespace = self.target.namespace
            ctx.err(f"No resources found{f' in {namespace} namespace' if namespace else ''}.")
        else:
            ctx.out(self.table(objects, header=True))

    def line(self, obj: Any) -> str:
        """One object as a line of ``-o name|names|json|yaml`` or a table row."""
        if self.output == "names":
            return deletion_handling_meta_namespace_key_func(obj)
        if self.output == "name":
            return f"{self.name_prefix}/{(get_metadata(obj) or {}).get('name', '')}"
        if self.output == "json":
            return msgspec.json.format(msgspec.json.encode(obj), indent=2).decode()
        if self.output == "yaml":
            return "---\n" + yaml.safe_dump(obj, sort_keys=False).rstrip("\n")
        return self.table([obj], header=False)

    def table(self, objects: Sequence[Any], *, header: bool) -> str:
        info = self.target.info
        return render_table(
            objects,
            info.kind,
            show_namespace=info.namespaced and self.target.namespace is None,
            wide=self.output == "wide",
            printer_columns=self.printer_columns,
            header=header,
        )


class _WatchPrinter:
    """``get -w``: after the listing, one line (or row) per change, as kubectl prints
    them; the replay of the cache on registration is skipped (already listed)."""

    def __init__(self, ctx: _Context, printer: _GetPrinter) -> None:
        self._ctx = ctx
        self._printer = printer

    async def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if not is_in_initial_list:
            self._ctx.out(self._printer.line(obj))

    async def on_update(self, old: Any, new: Any) -> None:
        if get_resource_version(old) != get_resource_version(new):
            self._ctx.out(self._printer.line(new))

    async def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        if obj is not None:
            self._ctx.out(self._printer.line(obj))


# -- emulator and demo -----------------------------------------------------------------------


async def _cmd_emulator(args: argparse.Namespace, ctx: _Context) -> int:
    from ..testing.apiserver import RANDOM_TOKEN, ApiServerEmulator
    from ..testing.apiserver._seed import cluster_pods

    if not 0 <= args.port <= 65535:
        raise _UsageError(f"invalid port {args.port}")
    if args.seed_pods < 0:
        raise _UsageError(f"--seed-pods must be >= 0 (got {args.seed_pods})")
    server = ApiServerEmulator(
        host=args.host,
        port=args.port,
        tls=not args.no_tls,
        token=None if args.no_auth else RANDOM_TOKEN,
    )
    for pod in cluster_pods(args.seed_pods):
        server.create("pods", pod)
    try:
        await server.start()
    except RuntimeError as err:  # TLS without the emulator extra
        raise _CliError(str(err)) from err
    try:
        path = server.kubeconfig_path
        if args.write_kubeconfig:
            server.write_kubeconfig(args.write_kubeconfig)
            path = args.write_kubeconfig
        ctx.out(server.url)
        ctx.err(f"kubeconfig: {path}")
        if args.no_tls and not args.no_auth:
            ctx.err(
                "note: kubectl sends no token over plain HTTP; use it with --no-auth, "
                "or serve HTTPS (the default)"
            )
        ctx.err(f"serving {args.seed_pods} pods; stop with Ctrl-C")
        await ctx.stop.wait()
    finally:
        await server.stop()
    return EXIT_OK


async def _cmd_demo(args: argparse.Namespace, ctx: _Context) -> int:
    from ._demo import run_demo

    duration = None if args.forever else _duration_arg(args.duration, "--duration")
    return await run_demo(duration=duration, out=ctx.stdout, stop=ctx.stop, pods=args.pods)


def _duration_arg(text: str, option: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise _UsageError(f"{option}: {err}") from None


# -- arguments ------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser writing to the invocation's streams."""

    out: TextIO = sys.stdout
    err: TextIO = sys.stderr

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:
            stream = self.err if file is sys.stderr else self.out
            stream.write(message)
            stream.flush()

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _build_parser(ctx: _Context) -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="Informers, caches and list-and-watch from the command line.",
    )
    parser.add_argument("--debug", action="store_true", help="tracebacks and debug logging")
    # On each subcommand too; SUPPRESS keeps a --debug given before the subcommand.
    debug = _Parser(add_help=False)
    debug.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )

    connection = _Parser(add_help=False)
    connection.add_argument("resource", metavar="RESOURCE", help="pods, po, deploy, a CRD plural")
    connection.add_argument(
        "-n", "--namespace", metavar="NS", help="namespace (default: the context's)"
    )
    connection.add_argument(
        "-A", "--all-namespaces", action="store_true", help="every namespace (wins over -n)"
    )
    connection.add_argument(
        "-l", "--selector", metavar="SELECTOR", default="", help="label selector (app=web,...)"
    )
    connection.add_argument(
        "--field-selector", metavar="F", default="", help="field selector (metadata.name=x)"
    )
    connection.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file")
    connection.add_argument("--context", metavar="C", help="kubeconfig context")

    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    watch = commands.add_parser(
        "watch",
        parents=[connection, debug],
        help="run an informer and print a live event log",
        description=(
            "Run a SharedIndexInformer for RESOURCE and print its events (time, type, key, "
            "resourceVersion), or with --every the cache's keys at that interval. "
            "Ctrl-C stops it and prints a summary on stderr."
        ),
    )
    watch.add_argument(
        "-o",
        "--output",
        choices=("events", "name", "names", "json", "yaml"),
        default="events",
        help="events: time, type, key, resourceVersion (default); names: keys, name: "
        "kind/name as kubectl prints it (deletions marked '(deleted)'); json, yaml: each "
        "event as {type, object}",
    )
    watch.add_argument(
        "--every",
        metavar="DURATION",
        help="print the cache's keys at this interval (30s, 1m, 500ms, seconds) instead",
    )
    watch.add_argument(
        "--metadata-only", action="store_true", help="cache only metadata (PartialObjectMetadata)"
    )
    watch.add_argument(
        "--no-strip-managed-fields",
        action="store_true",
        help="keep metadata.managedFields in the cache",
    )
    watch.set_defaults(handler=_cmd_watch)

    get = commands.add_parser(
        "get",
        parents=[connection, debug],
        help="sync once, print from the cache, exit",
        description="Sync an informer's cache of RESOURCE once, print it, and exit.",
    )
    get.add_argument(
        "-o",
        "--output",
        choices=("table", "wide", "name", "names", "json", "yaml"),
        default="table",
        help="table (default; kubectl's columns), wide: more columns, name: kind/name "
        "as kubectl prints it, names: cache keys, json, yaml: a List of the cached objects",
    )
    get.add_argument(
        "--timeout",
        metavar="DURATION",
        default="60s",
        help="give up after this: connecting, discovery and syncing together",
    )
    get.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after the listing, print each change until Ctrl-C (as kubectl get -w)",
    )
    get.set_defaults(handler=_cmd_get)

    emulator = commands.add_parser(
        "emulator",
        parents=[debug],
        help="run the bundled API-server emulator until stopped",
        description="Serve the bundled API-server emulator until Ctrl-C / SIGTERM; "
        "prints its URL on stdout.",
    )
    emulator.add_argument("--host", default="127.0.0.1", help="address to listen on")
    emulator.add_argument("--port", type=int, default=0, help="port (0: pick a free one)")
    emulator.add_argument("--write-kubeconfig", metavar="PATH", help="write a kubeconfig here")
    emulator.add_argument("--seed-pods", type=int, default=0, metavar="N", help="create N pods")
    emulator.add_argument(
        "--no-tls",
        "--insecure-http",
        dest="no_tls",
        action="store_true",
        help="serve plain HTTP (default: HTTPS with a generated CA, in the kubeconfig)",
    )
    # HTTPS is the default; --tls stays accepted for scripts written before.
    emulator.add_argument("--tls", action="store_true", help=argparse.SUPPRESS)
    emulator.add_argument("--no-auth", action="store_true", help="accept requests without a token")
    emulator.set_defaults(handler=_cmd_emulator)

    demo = commands.add_parser(
        "demo",
        parents=[debug],
        help="an informer against the emulator, under churn and injected faults",
        description=(
            "Start the emulator in-process, run an informer against it while pods are "
            "created, updated and deleted and the server drops watches, expires history "
            "and answers 429 and 500; narrate the recovery and verify that the cache "
            "equals the server's objects at the end (exit 0 when it does)."
        ),
    )
    demo.add_argument("--duration", default="20", metavar="S", help="seconds to run (20)")
    demo.add_argument("--forever", action="store_true", help="run until Ctrl-C")
    demo.add_argument("--pods", type=int, default=40, help=argparse.SUPPRESS)
    demo.set_defaults(handler=_cmd_demo)

    for p in (parser, watch, get, emulator, demo):
        p.out = ctx.stdout
        p.err = ctx.stderr
    return parser


# -- errors -----------------------------------------------------------------------------------


def _describe(err: BaseException, ctx: _Context) -> str:
    """One line for an error a user can cause (or a short internal-error line)."""
    server = ctx.server or "the API server"
    if isinstance(err, _UsageError | _CliError | ConfigError | UnknownResourceError):
        text = str(err)
    elif isinstance(err, UnauthorizedError):
        whose = f"of context {ctx.context!r} " if ctx.context else ""
        text = (
            f"{server} rejected the credentials {whose}(401 Unauthorized): check the "
            "token, client certificate or exec plugin in the kubeconfig"
        )
    elif isinstance(err, ForbiddenError):
        text = f"403 Forbidden: {err.message or 'the server refused the request'}"
    elif isinstance(err, ApiError):
        text = str(err)
    elif isinstance(err, aiohttp.ClientConnectorError):
        os_error = err.os_error
        reason = (
            os.strerror(os_error.errno)
            if os_error.errno
            else os_error.strerror or str(os_error) or type(os_error).__name__
        )
        text = f"cannot reach the API server at {server}: {reason.lower()}"
    elif isinstance(err, aiohttp.ClientError):
        text = f"cannot talk to the API server at {server}: {err or type(err).__name__}"
    elif isinstance(err, TimeoutError | asyncio.TimeoutError):
        text = f"timed out talking to the API server at {server}"
    elif isinstance(err, OSError):
        text = err.strerror or str(err)
        if err.filename:
            text = f"{err.filename}: {text}"
    else:
        text = f"internal error: {type(err).__name__}: {err} (run with --debug for the traceback)"
    return " ".join(text.split())


class _LineFormatter(logging.Formatter):
    """``kubereflector: warning: message`` (like the command's own lines)."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{PROG}: {record.levelname.lower()}: {record.getMessage()}"


@contextlib.contextmanager
def _logging(ctx: _Context) -> Iterator[None]:
    """Route the package's log records to the invocation's stderr while it runs."""
    logger = logging.getLogger("kubereflector")
    handler = logging.StreamHandler(ctx.stderr)
    if ctx.debug:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(_LineFormatter())
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if ctx.debug else logging.WARNING)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


# -- entry points ---------------------------------------------------------------------------------


async def amain(
    argv: Sequence[str] | None = None,
    *,
    clock: Clock | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stop: asyncio.Event | None = None,
) -> int:
    """Run one command on the running event loop and return its exit status.

    ``stop``, when set, ends ``watch``, ``emulator`` and ``demo --forever`` the way
    Ctrl-C does (and interrupts ``get``). ``clock`` drives ``--every`` and the
    informer (the real clock by default). Never raises for errors a user can
    cause: they are reported on ``stderr`` in one line.
    """
    ctx = _Context(
        stdout=stdout if stdout is not None else sys.stdout,
        stderr=stderr if stderr is not None else sys.stderr,
        clock=clock if clock is not None else RealClock(),
        stop=stop if stop is not None else asyncio.Event(),
    )
    parser = _build_parser(ctx)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    ctx.debug = bool(args.debug)
    handler: Callable[[argparse.Namespace, _Context], Awaitable[int]] = args.handler
    with _logging(ctx):
        try:
            if hasattr(args, "selector"):
                _check_arguments(args)
            return await handler(args, ctx)
        except Exception as err:
            if ctx.debug:
                ctx.err("".join(traceback.format_exception(type(err), err, err.__traceback__)))
            ctx.err(f"{PROG}: error: {_describe(err, ctx)}")
            return EXIT_USAGE if isinstance(err, _UsageError) else EXIT_ERROR


async def _amain_with_signals(
    argv: Sequence[str] | None, clock: Clock | None, stdout: TextIO, stderr: TextIO
) -> int:
    stop = asyncio.Event()
    with LoopStopSignals(asyncio.get_running_loop(), lambda _sig: stop.set()):
        return await amain(argv, clock=clock, stdout=stdout, stderr=stderr, stop=stop)


def main(
    argv: Sequence[str] | None = None,
    *,
    clock: Clock | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """The ``kubereflector`` command; returns the exit status.

    Runs its own event loop (use :func:`amain` on a running one). SIGINT and
    SIGTERM stop a command cleanly when called from the main thread.
    """
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    try:
        status = asyncio.run(_amain_with_signals(argv, clock, out, err))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    if out is sys.stdout:
        try:
            out.flush()
        except BrokenPipeError:
            # Python flushes stdout again at exit: point it at /dev/null first.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
    return status
