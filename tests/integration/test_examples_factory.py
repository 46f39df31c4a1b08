"""The factory examples run, as programs, against the target (emulator or cluster).

Each example runs as a subprocess with the target's kubeconfig while this test's
event loop serves the emulator. Their stderr must stay empty: no traceback, no
unclosed session or transport warning on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator

import pytest
from conftest import KUBECONFIG_ENV, Target
from examples_run import EXAMPLES, program, read_line

from programs import PROGRAM_TEST_TIMEOUT, finish

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)]

SCRIPTS = ["factory_async.py", "factory_sync.py"]


def kubeconfig_path(target: Target) -> str:
    if target.emulator is not None:
        return target.emulator.kubeconfig_path
    return os.environ[KUBECONFIG_ENV]


@contextlib.asynccontextmanager
async def example(
    script: str, target: Target, *args: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``script`` of examples/ on ``target``'s kubeconfig and namespace, with
    ResourceWarnings (unclosed sockets...) shown on its stderr."""
    async with program(
        *("-W", "default", str(EXAMPLES / script)),
        *("--kubeconfig", kubeconfig_path(target), "--namespace", target.namespace),
        *args,
    ) as proc:
        yield proc


@pytest.mark.parametrize("script", SCRIPTS)
async def test_once_prints_what_the_handler_and_the_lister_saw(script: str, target: Target) -> None:
    for name in ("p0", "p1"):
        await target.create_pod(name)
    ns = target.namespace
    async with example(script, target, "--once") as proc:
        stdout, stderr = await finish(proc)
    assert stderr == ""
    assert proc.returncode == 0
    *handled, last = stdout.splitlines()
    assert sorted(handled) == [f"added {ns}/p0", f"added {ns}/p1"]
    assert last == f"synced: 2 pods: {ns}/p0, {ns}/p1"


@pytest.mark.parametrize("script", SCRIPTS)
async def test_follows_changes_until_interrupted(script: str, target: Target) -> None:
    await target.create_pod("p0")
    ns = target.namespace
    async with example(script, target) as proc:
        assert await read_line(proc) == f"added {ns}/p0"
        assert await read_line(proc) == f"synced: 1 pods: {ns}/p0"
        await target.create_pod("p1")
        assert await read_line(proc) == f"added {ns}/p1"
        await target.delete_pod("p0")
        assert await read_line(proc) == f"deleted {ns}/p0"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = await finish(proc)
    assert stderr == ""
    assert stdout == ""
    assert proc.returncode == 0


async def read_until(proc: asyncio.subprocess.Process, wanted: str, allowed: set[str]) -> None:
    """Read lines until ``wanted``; each line before it must be one of ``allowed``."""
    line = await read_line(proc)
    while line != wanted:
        assert line in allowed, f"unexpected {line!r} while waiting for {wanted!r}"
        line = await read_line(proc)


async def test_workqueue_controller_reconciles_retries_and_sees_deletes(target: Target) -> None:
    await target.create_pod("p0")
    ns = target.namespace
    async with example("workqueue_controller.py", target) as proc:
        assert await read_line(proc) == f"reconciled {ns}/p0"  # the initial list
        await target.create_pod("p1", labels={"example.com/fail": "true"})
        assert await read_line(proc) == f"retry {ns}/p1 (attempt 1)"
        assert await read_line(proc) == f"retry {ns}/p1 (attempt 2)"  # after 5 ms
        await target.label_pod("p1", {"example.com/fail": "false"})
        # Backing off until the change arrives.
        retries = {f"retry {ns}/p1 (attempt {n})" for n in range(3, 20)}
        await read_until(proc, f"reconciled {ns}/p1", retries)
        await target.delete_pod("p0")
        # A real server first marks p0 as deleting (an update); the retry that
        # was still waiting reconciles p1 once more.
        again = {f"reconciled {ns}/p0", f"reconciled {ns}/p1"}
        await read_until(proc, f"gone {ns}/p0", again)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = await finish(proc)
    assert stderr == ""
    assert set(stdout.splitlines()) <= again
    assert proc.returncode == 0
