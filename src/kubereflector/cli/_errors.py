"""How a command fails: the exit statuses, the two errors commands raise for the
user, and :func:`describe`, the one line that reports any error on stderr."""

from __future__ import annotations

import asyncio
import os

import aiohttp

from ..client import ConfigError, UnknownResourceError
from ..errors import ApiError, ForbiddenError, UnauthorizedError
from ._context import CommandContext

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "PROG",
    "CliError",
    "UsageError",
    "describe",
]

PROG = "kubereflector"
"""The command's name, which starts each line it writes on stderr."""

EXIT_OK = 0
"""Success; also a command that runs until stopped (``watch``, ``emulator``), stopped."""
EXIT_ERROR = 1
"""A runtime error: no kubeconfig, an unreachable server, 401/403, ..."""
EXIT_USAGE = 2
"""Invalid arguments."""
EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C) before the command could finish."""


class UsageError(Exception):
    """An invalid argument (exit status 2)."""


class CliError(Exception):
    """A runtime failure with a message meant for the user (exit status 1)."""


def describe(err: BaseException, ctx: CommandContext) -> str:
    """One line for an error a user can cause (or a short internal-error line)."""
    server = ctx.server or "the API server"
    if isinstance(err, UsageError | CliError | ConfigError | UnknownResourceError):
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
