"""Running the programs of examples/ as subprocesses of a test: started as from a
terminal, read line by line with a bound, never left running, and, when one
hangs, failed with its stacks (see tests/programs.py)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from programs import STEP, running
from programs import read_line as read_line

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WAIT = STEP
"""Upper bound (seconds) on any wait for a program; never reached when things work."""


@contextlib.asynccontextmanager
async def program(
    *args: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python *args`` as a subprocess (with the environment ``env``, else this
    process'), stdout and stderr piped; on leaving the block it is killed if still
    running, and waited for."""
    async with running(sys.executable, *args, env=env) as proc:
        yield proc
