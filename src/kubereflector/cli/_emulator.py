"""``kubereflector emulator``: serve the bundled API-server emulator until Ctrl-C (or
SIGTERM, or the stop event), printing its URL on stdout and where its kubeconfig
is on stderr.

Self-contained (its flags and its run): the emulator is imported only when this
command runs, so the other commands do not pay for loading it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ._context import CommandContext
from ._errors import EXIT_OK, CliError, UsageError
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
    emulator.set_defaults(handler=run)
    return emulator


async def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    """Serve until the stop event; returns the exit status. Raises :class:`UsageError`
    for a bad port or pod count, :class:`CliError` when TLS is asked for without
    the emulator extra."""
    from ..testing.apiserver import RANDOM_TOKEN, ApiServerEmulator
    from ..testing.apiserver._seed import cluster_pods

    if not 0 <= args.port <= 65535:
        raise UsageError(f"invalid port {args.port}")
    if args.seed_pods < 0:
        raise UsageError(f"--seed-pods must be >= 0 (got {args.seed_pods})")
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
        raise CliError(str(err)) from err
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
