"""Running the programs of examples/ as subprocesses of a test: started, read line
by line with a timeout, and never left running."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WAIT = 20.0
"""Upper bound (seconds) on any wait for a program; never reached when things work."""


@contextlib.asynccontextmanager
async def program(
    *args: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python *args`` as a subprocess (with the environment ``env``, else this
    process'), stdout and stderr piped; on leaving the block it is killed if still
    running, and waited for."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def read_line(proc: asyncio.subprocess.Process) -> str:
    """The next line ``proc`` prints, without its newline. Raises ``AssertionError``
    (with what the program wrote to stderr) if its output ends first, and
    ``TimeoutError`` after :data:`WAIT` seconds."""
    assert proc.stdout is not None
    raw = await asyncio.wait_for(proc.stdout.readline(), WAIT)
    if not raw:
        assert proc.stderr is not None
        stderr = await asyncio.wait_for(proc.stderr.read(), WAIT)
        raise AssertionError(f"the program ended: {stderr.decode()}")
    return raw.decode().rstrip("\n")
