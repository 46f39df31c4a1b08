"""The command line: ``kubereflector`` (also ``python -m kubereflector``).

::

    kubereflector watch RESOURCE [-n NS] [-A] [-l SELECTOR] [--field-selector F]
                        [--kubeconfig P] [--context C] [-o events|name|names|json|yaml]
                        [--every DURATION] [--metadata-only] [--no-strip-managed-fields]
    kubereflector get RESOURCE [-n NS] [-A] [-l SELECTOR] [-o table|wide|name|names|json|yaml]
                      [--timeout DURATION] [-w]
    kubereflector emulator [--host H] [--port N] [--write-kubeconfig PATH] [--seed-pods N]
                           [--no-tls] [--token T | --no-auth] [--bookmark-interval S]
                           [--history-limit N]
    kubereflector demo [--duration S] [--forever]
    kubereflector crd MODULE:CLASS [MODULE:CLASS ...] [-o yaml|json]
    kubereflector manifests MODULE:MANAGER [-n NS] [--image I] [--replicas N] [-o yaml|json]
                            [--report-only] [--check COMMAND ...]

``watch`` runs a :class:`~kubereflector.SharedIndexInformer` for a resource
(resolved through discovery: ``pods``, ``po``, ``deploy``, a CRD plural) and
prints a live event log, or with ``--every`` the cache's keys at that interval;
Ctrl-C (or SIGTERM) stops it and prints a one-line summary on stderr. ``get``
syncs once and prints from the cache, with kubectl's columns (a CRD's
``additionalPrinterColumns`` for its resources); ``get -w`` then prints each change.
``emulator`` serves the bundled API-server emulator until stopped; ``demo`` runs
an informer against it under churn and injected faults, narrating the recovery.
``crd`` prints the CustomResourceDefinition of custom resources declared in Python
(:mod:`kubereflector.models.crd`), importing them from the current directory.
``manifests`` prints the ServiceAccount, least-privilege RBAC and Deployment of the
operator a Manager describes, or (``--check``) runs its tests against an emulator
enforcing that RBAC and reports what it refused.

Errors a user can cause (no kubeconfig, unknown context or resource, an
unreachable server, 401/403, a malformed selector) print one line on stderr
and exit non-zero: 1 for runtime errors, 2 for invalid arguments, 130 when
interrupted. ``--debug`` adds the traceback and debug logging.

:func:`main` is the console script, and the package's only public name. Inside,
one private module per command (``_watch``, ``_get``, ``_emulator``, ``_demo``,
``_crd``),
``_manifests`` with ``_rbac_check``),
each adding its sub-command to the parser and running it; ``_dispatch.amain``
runs one command on a running event loop (stopped by its ``stop`` event instead
of a signal); ``_observer`` watches what passes between the Reflector and the
server, for the progress lines and the demo's narration; ``_printers`` and
``_tables`` print what the commands cache.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from .._aio.signals import LoopStopSignals
from ..clock import Clock
from ._dispatch import amain
from ._errors import EXIT_INTERRUPTED

__all__ = ["main"]


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

    Runs its own event loop. SIGINT and SIGTERM stop a command cleanly when called
    from the main thread.
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
