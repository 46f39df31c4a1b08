"""The emulator's command line, defined once for ``python -m
kubereflector.testing.apiserver`` and ``kubereflector emulator``: its options
(:func:`add_arguments`, on any parser), the serving (:func:`serve`: start, seed,
write the kubeconfig, announce, serve until a stop event) and the ``python -m``
program (:func:`main`: serve until SIGINT/SIGTERM).

Private module (:func:`main` is re-exported by :mod:`kubereflector.testing.apiserver`).
Light to import: the emulator and the HTTP stack load when :func:`serve` runs, so
a command line that only builds its parser does not pay for them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from typing import Final

from ..._aio.signals import LoopStopSignals
from ._seed import cluster_pods
from ._tls import EmulatorExtraMissing

__all__ = ["add_arguments", "main", "serve"]

PROG: Final = "python -m kubereflector.testing.apiserver"


def _port(text: str) -> int:
    port = _integer(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {port} (0 to 65535; 0 picks a free one)")
    return port


def _count(text: str) -> int:
    count = _integer(text)
    if count < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (got {count})")
    return count


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not seconds > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be > 0 (got {text})")
    return seconds


def _token(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("must not be empty (use --no-auth for no token)")
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the emulator's options to ``parser``: ``--host``, ``--port``,
    ``--write-kubeconfig``, ``--seed-pods``, ``--no-tls`` (alias
    ``--insecure-http``; ``--tls`` is accepted and changes nothing), ``--token`` or
    ``--no-auth``, ``--bookmark-interval`` and ``--history-limit``. Values out of
    range are usage errors (argparse's exit status 2, naming the option)."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=_port, default=0, help="port (0: pick a free one)")
    parser.add_argument(
        "--write-kubeconfig", metavar="PATH", help="also write the kubeconfig here (mode 0600)"
    )
    parser.add_argument(
        "--seed-pods",
        type=_count,
        default=0,
        metavar="N",
        help="create N pods like a small cluster's (labelled apps on three nodes)",
    )
    parser.add_argument(
        "--no-tls",
        "--insecure-http",
        dest="no_tls",
        action="store_true",
        help="serve plain HTTP (default: HTTPS with a generated CA, in the kubeconfig)",
    )
    # HTTPS is the default; --tls stays accepted for scripts written before.
    parser.add_argument("--tls", action="store_true", help=argparse.SUPPRESS)
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument(
        "--token", type=_token, metavar="TOKEN", help="the bearer token (default: a random one)"
    )
    auth.add_argument("--no-auth", action="store_true", help="accept requests without a token")
    parser.add_argument(
        "--bookmark-interval",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="seconds between the bookmarks of watches that allow them (60)",
    )
    parser.add_argument(
        "--history-limit",
        type=_count,
        default=10_000,
        metavar="EVENTS",
        help="events kept per resource for watches and continue tokens (10000)",
    )


def _stdout_line(text: str) -> None:
    print(text, flush=True)


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def serve(
    args: argparse.Namespace,
    stop: asyncio.Event,
    *,
    out: Callable[[str], None] = _stdout_line,
    err: Callable[[str], None] = _stderr_line,
) -> None:
    """Serve an emulator as ``args`` (parsed with :func:`add_arguments`'s options)
    say, until ``stop`` is set; then stop it (the data goes with it).

    In order: create the emulator and its ``--seed-pods``, start it, write
    ``--write-kubeconfig``, then ``out`` the URL (one line: scripts read it) and
    ``err`` the kubeconfig's path, a note when kubectl would send no token (plain
    HTTP with a token), and how many pods it serves. Raises, before anything is
    written: :class:`~._tls.EmulatorExtraMissing` (HTTPS without the
    ``emulator`` extra; the message says what to install) and :class:`OSError`
    (cannot listen). Installs no signal handlers: the caller owns ``stop``.
    """
    from ._emulator import RANDOM_TOKEN, ApiServerEmulator

    emulator = ApiServerEmulator(
        host=args.host,
        port=args.port,
        tls=not args.no_tls,
        token=None if args.no_auth else (args.token or RANDOM_TOKEN),
        history_limit=args.history_limit,
        bookmark_interval=args.bookmark_interval,
    )
    for pod in cluster_pods(args.seed_pods):
        emulator.create("pods", pod)
    async with emulator:
        kubeconfig = emulator.kubeconfig_path
        if args.write_kubeconfig:
            emulator.write_kubeconfig(args.write_kubeconfig)
            kubeconfig = args.write_kubeconfig
        out(emulator.url)
        err(f"kubeconfig: {kubeconfig}")
        if args.no_tls and not args.no_auth:
            err(
                "note: kubectl sends no token over plain HTTP; use it with --no-auth, "
                "or serve HTTPS (the default)"
            )
        err(f"serving {args.seed_pods} pods; stop with Ctrl-C")
        await stop.wait()


async def _serve_until_signalled(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    with LoopStopSignals(asyncio.get_running_loop(), lambda _sig: stop.set()):
        await serve(args, stop)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``python -m kubereflector.testing.apiserver`` command: serve until
    SIGINT/SIGTERM (``--help`` lists the options); prints the URL on stdout, the
    kubeconfig's path on stderr. Returns 0, or 1 after one line on stderr when the
    emulator cannot start (no TLS support installed, or the address cannot be
    listened on); usage errors exit with status 2."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Run the kubereflector API server emulator until SIGINT/SIGTERM."
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve_until_signalled(args))
    except (EmulatorExtraMissing, OSError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    return 0
