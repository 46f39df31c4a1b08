"""What every command is given: :class:`CommandContext`, one invocation's streams,
clock and stop event, and what it has connected to (for its error lines)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TextIO

from ..clock import Clock

__all__ = ["CommandContext"]


@dataclass
class CommandContext:
    """One invocation of the command. Used on the event loop only (not thread-safe).

    ``stop`` ends a command as Ctrl-C does; ``server`` and ``context`` (the
    kubeconfig context) are filled in once known, so that error lines can name them.
    """

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
        """Write a line to stderr; a closed stderr is ignored."""
        with contextlib.suppress(BrokenPipeError, ValueError):
            self.stderr.write(text + "\n")
            self.stderr.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
