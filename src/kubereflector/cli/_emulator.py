"""``kubereflector emulator``: serve the bundled API-server emulator until Ctrl-C (or
SIGTERM, or the stop event), printing its URL on stdout and where its kubeconfig
is on stderr.

Its options and its serving are the emulator's own command line
(:mod:`kubereflector.testing.apiserver._command`, which ``python -m
kubereflector.testing.apiserver`` runs too): one definition for both. That module
is light to import; the emulator itself loads only when this command runs, so the
other commands do not pay for it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..testing.apiserver._command import add_arguments, serve
from ..testing.apiserver._tls import EmulatorExtraMissing
from ._context import CommandContext
from ._errors import EXIT_OK, CliError
from ._parser import Parser

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[Parser], parents: Sequence[Parser]) -> Parser:
    """Add the ``emulator`` sub-command (``parents``: the ``--debug`` flag)."""
    emulator = commands.add_parser(
        "emulator",
        parents=parents,
        help="run the bundled API-server emulator until stopped",
        description="Serve the bundled API-server emulator until Ctrl-C / SIGTERM; "
        "prints its URL on stdout.",
    )
    add_arguments(emulator)
    emulator.set_defaults(handler=run)
    return emulator


async def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    """Serve until the stop event; returns the exit status. Raises :class:`CliError`
    when TLS is asked for without the emulator extra (bad option values were usage
    errors of the parser already)."""
    try:
        await serve(args, ctx.stop, out=ctx.out, err=ctx.err)
    except EmulatorExtraMissing as err:
        raise CliError(str(err)) from err
    return EXIT_OK
