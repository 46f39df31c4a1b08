"""``kubereflector watch RESOURCE``: run a SharedIndexInformer and print a live event
log, or with ``--every`` the cache's keys at that interval, until Ctrl-C (or
SIGTERM, or the stop event); then a one-line summary on stderr."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Sequence

from .._aio.timeout import within
from ._context import CommandContext
from ._errors import EXIT_OK
from ._informer_run import InformerRun
from ._parser import Parser, duration_arg
from ._printers import EventLog, print_keys
from ._progress import WatchProgress
from ._target import check_target_arguments, connect

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[Parser], parents: Sequence[Parser]) -> Parser:
    """Add the ``watch`` sub-command (``parents``: the target and ``--debug`` flags)."""
    watch = commands.add_parser(
        "watch",
        parents=parents,
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
    watch.set_defaults(handler=run)
    return watch


async def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    """Run ``watch`` until stopped; returns the exit status (0: stopped, as asked)."""
    check_target_arguments(args)
    every = duration_arg(args.every, "--every") if args.every is not None else None
    async with connect(args, ctx) as target:
        what = target.info.resource
        progress = WatchProgress(ctx, what)
        informer_run = InformerRun(
            target, ctx, observer=progress, strip=not args.no_strip_managed_fields
        )
        events = EventLog(ctx, None if every is not None else args.output, target.info)
        informer_run.informer.add_event_handler(events)
        async with informer_run:
            synced = await informer_run.wait_synced()
            progress.finish()
            if synced and every is not None:
                while True:
                    print_keys(ctx, informer_run.sorted_objects(), what, args.output)
                    if await _stopped_within(ctx, every):
                        break
            elif synced:
                await informer_run.wait_stopped()
        stats = informer_run.informer.stats()
        first_sync = informer_run.first_sync
        first = f"first sync in {first_sync:.2f}s" if first_sync is not None else "never synced"
        ctx.err(
            f"{stats.objects} objects cached, {events.count} events, {stats.relists} relists, "
            f"{stats.watch_restarts} watch restarts, {first}"
        )
    return EXIT_OK


async def _stopped_within(ctx: CommandContext, seconds: float) -> bool:
    """Wait ``seconds`` on the context's clock; True if the stop event came first."""
    with contextlib.suppress(TimeoutError):
        await within(ctx.clock, seconds, ctx.stop.wait())
    return ctx.stop.is_set()
