"""Serving a seeded ApiServerEmulator beside its control server, in a process of its own.

What ``_configmaps.py`` and ``_emulator.py`` share: each seeds an emulator,
builds the aiohttp app of its control endpoints, and hands both to
:func:`serve_until_stopped`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal

from aiohttp import web

from kubereflector.testing import ApiServerEmulator


def plain_emulator(port: int) -> ApiServerEmulator:
    """An emulator for ``port`` on plain HTTP, with no token, whose watches get no
    periodic bookmarks within a run (one an hour)."""
    return ApiServerEmulator(port=port, token=None, bookmark_interval=3600.0)


async def serve_until_stopped(
    emulator: ApiServerEmulator, control: web.Application, control_port: int
) -> None:
    """Serve ``emulator`` (not yet started) and ``control`` (on 127.0.0.1:``control_port``,
    on the same event loop), print ``ready`` on stdout once both listen, and stop both
    on SIGINT or SIGTERM.

    First the heap is collected and frozen: the server's own heap (every seeded
    object) is not what is measured, so it is kept out of this process's later
    collections and the server answers steadily."""
    gc.collect()
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with emulator:
        runner = web.AppRunner(control, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", control_port).start()
        print("ready", flush=True)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
