"""Python programs run as subprocesses by the tests (examples, the docs' programs)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Mapping


@contextlib.asynccontextmanager
async def python_program(
    *args: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python *args`` with its stdout and stderr piped; killed on the way out if it
    still runs."""
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
