"""Running one command: :func:`amain` builds the parser (each command module adds its
sub-command), routes the package's log records to stderr, runs the chosen command,
and turns what it raised into one line on stderr and an exit status."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TextIO

from .._compiled import compiled_modules
from .._version import __version__
from ..clock import Clock, RealClock
from . import _crd, _demo, _emulator, _get, _manifests, _watch
from ._context import CommandContext
from ._errors import EXIT_ERROR, EXIT_USAGE, PROG, UsageError, describe
from ._parser import Parser
from ._target import target_arguments

__all__ = ["amain"]


def _version_line() -> str:
    """``kubereflector 0.1.0 (pure Python)``, or ``(compiled by mypyc: 8 modules)``."""
    compiled = compiled_modules()
    form = f"compiled by mypyc: {len(compiled)} modules" if compiled else "pure Python"
    return f"{PROG} {__version__} ({form})"


def _build_parser(ctx: CommandContext) -> Parser:
    parser = Parser(
        prog=PROG,
        description="Informers, caches and list-and-watch from the command line.",
    )
    parser.add_argument("--debug", action="store_true", help="tracebacks and debug logging")
    parser.add_argument(
        "--version",
        action="version",
        version=_version_line(),
        help="the version, and whether this installation is compiled by mypyc",
    )
    # On each subcommand too; SUPPRESS keeps a --debug given before the subcommand.
    debug = Parser(add_help=False)
    debug.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    target = target_arguments()
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    subparsers = [
        _watch.add_parser(commands, [target, debug]),
        _get.add_parser(commands, [target, debug]),
        _emulator.add_parser(commands, [debug]),
        _demo.add_parser(commands, [debug]),
        _crd.add_parser(commands, [debug]),
        _manifests.add_parser(commands, [debug]),
    ]
    for p in (parser, *subparsers):
        p.out = ctx.stdout
        p.err = ctx.stderr
    return parser


class _LineFormatter(logging.Formatter):
    """``kubereflector: warning: message`` (like the command's own lines)."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{PROG}: {record.levelname.lower()}: {record.getMessage()}"


@contextlib.contextmanager
def _logging(ctx: CommandContext) -> Iterator[None]:
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
    ctx = CommandContext(
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
    handler: Callable[[argparse.Namespace, CommandContext], Awaitable[int]] = args.handler
    with _logging(ctx):
        try:
            return await handler(args, ctx)
        except Exception as err:
            if ctx.debug:
                ctx.err("".join(traceback.format_exception(type(err), err, err.__traceback__)))
            ctx.err(f"{PROG}: error: {describe(err, ctx)}")
            return EXIT_USAGE if isinstance(err, UsageError) else EXIT_ERROR
