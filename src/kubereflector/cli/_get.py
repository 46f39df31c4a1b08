"""``kubereflector get RESOURCE``: sync an informer's cache once, print it (kubectl's
columns, a CRD's ``additionalPrinterColumns``, or ``-o name|names|json|yaml``) and
exit; with ``-w``, then print each change until stopped."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ..client.paths import quote_segment, validate_name
from ..errors import ApiError
from ._context import CommandContext
from ._errors import EXIT_INTERRUPTED, EXIT_OK, CliError
from ._informer_run import InformerRun
from ._parser import Parser, duration_arg
from ._printers import ChangePrinter, GetPrinter
from ._progress import ListProgress
from ._target import Target, by_deadline, check_target_arguments, connect

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[Parser], parents: Sequence[Parser]) -> Parser:
    """Add the ``get`` sub-command (``parents``: the target and ``--debug`` flags)."""
    get = commands.add_parser(
        "get",
        parents=parents,
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
    get.set_defaults(handler=run)
    return get


async def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    """Run ``get``; returns the exit status (130 when stopped before the cache synced)."""
    check_target_arguments(args)
    deadline = ctx.clock.now() + duration_arg(args.timeout, "--timeout")
    async with connect(args, ctx, deadline) as target:
        what = target.info.resource
        columns = []
        if args.output in ("table", "wide"):
            columns = await by_deadline(args, ctx, deadline, _printer_columns(target))
        printer = GetPrinter(args.output, target, columns)
        progress = ListProgress(ctx.stderr, what, enabled=ctx.tty, clock=ctx.clock)
        informer_run = InformerRun(target, ctx, observer=progress, strip=True)
        async with informer_run:
            synced = await informer_run.wait_synced(max(0.0, deadline - ctx.clock.now()))
            progress.finish()
            if not synced:
                if ctx.stop.is_set():
                    return EXIT_INTERRUPTED
                raise CliError(f"the cache of {what} did not sync within {args.timeout}")
            informer = informer_run.informer
            printer.listing(
                ctx, informer_run.sorted_objects(), informer.last_sync_resource_version()
            )
            if args.watch:
                informer.add_event_handler(ChangePrinter(ctx, printer))
                await informer_run.wait_stopped()
    return EXIT_OK


async def _printer_columns(target: Target) -> list[dict[str, Any]]:
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
