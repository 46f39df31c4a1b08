"""Parsing the command line: :class:`Parser`, which the commands add their
sub-commands to, and the values argparse cannot check itself (durations)."""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Any, NoReturn, TextIO

from ._errors import EXIT_USAGE, UsageError

__all__ = ["Parser", "duration_arg", "parse_duration"]


class Parser(argparse.ArgumentParser):
    """An ArgumentParser writing to the invocation's streams (``out`` for help,
    ``err`` for usage errors, which exit with status 2)."""

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


def duration_arg(text: str, option: str) -> float:
    """:func:`parse_duration` of the value of ``option``; raises :class:`UsageError`
    naming the option."""
    try:
        return parse_duration(text)
    except ValueError as err:
        raise UsageError(f"{option}: {err}") from None
