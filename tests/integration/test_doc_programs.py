"""The programs of the README and the docs, run as a user runs them.

* Each program that follows a cluster until Ctrl-C (it ends in ``run(main())`` or
  ``manager.run_sync()``) runs in a subprocess against the emulator, seeded the way
  ``kubereflector emulator --seed-pods`` seeds it; once it watches, it gets SIGINT
  and must exit with status 0 and an empty stderr (no traceback).
* The quick start finds the seeded web pods it looks for.
* The pytest example of "Test your controller" runs under pytest, with
  pytest-asyncio, as the page says: with its marker, or with ``asyncio_mode =
  "auto"``; without either, pytest does not run it (why the page names them).

The subprocesses are waited on through their output and the emulator's watches,
each wait bounded; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from examples_run import program, read_line

from doc_snippets import Snippet, snippet, snippets
from kubereflector.testing import ApiServerEmulator
from kubereflector.testing.apiserver._seed import cluster_pods
from programs import PROGRAM_TEST_TIMEOUT, finish, start, step

SEED_PODS = 30

FOLLOWERS = [s for s in snippets() if s.follows_a_cluster]


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ApiServerEmulator]:
    async with ApiServerEmulator() as emulator:
        for pod in cluster_pods(SEED_PODS):
            emulator.create("pods", pod)
        emulator.create("configmaps", {"metadata": {"name": "settings"}, "data": {"a": "1"}})
        yield emulator


@contextlib.asynccontextmanager
async def started(
    block: Snippet, kubeconfig: str, tmp_path: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``block`` running as a script, pointed at ``kubeconfig`` by ``KUBECONFIG``."""
    path = tmp_path / "program.py"
    path.write_text(block.code, encoding="utf-8")
    async with program(str(path), env={**os.environ, "KUBECONFIG": kubeconfig}) as proc:
        yield proc


async def interrupt(proc: asyncio.subprocess.Process) -> None:
    """Ctrl-C: the program must end with status 0 and nothing on stderr (no traceback)."""
    proc.send_signal(signal.SIGINT)
    _, stderr = await finish(proc)
    assert stderr == ""
    assert proc.returncode == 0


async def read_until(proc: asyncio.subprocess.Process, suffix: str) -> str:
    """The first line of the program's output ending with ``suffix``."""
    line = await read_line(proc)
    while not line.endswith(suffix):
        line = await read_line(proc)
    return line


def test_the_readme_and_the_docs_have_such_programs() -> None:
    places = {s.name.partition(":")[0] for s in FOLLOWERS}
    assert {"README.md", "docs/getting-started.md", "docs/how-to/controller.md"} <= places
    assert len(FOLLOWERS) >= 5


@pytest.mark.asyncio
@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
@pytest.mark.parametrize("program", FOLLOWERS, ids=lambda s: s.name)
async def test_ctrl_c_ends_the_program_quietly(
    program: Snippet, server: ApiServerEmulator, tmp_path: Path
) -> None:
    async with started(program, server.kubeconfig_path, tmp_path) as proc:
        await step(proc, server.wait_for_watches(1), "its watch")  # it follows changes now
        await interrupt(proc)


@pytest.mark.asyncio
@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_the_quick_start_finds_the_seeded_web_pods(
    server: ApiServerEmulator, tmp_path: Path
) -> None:
    web = [
        pod
        for pod in cluster_pods(SEED_PODS)
        if pod["metadata"]["namespace"] == "default" and pod["metadata"]["labels"]["app"] == "web"
    ]
    assert web  # what the quick start looks for is there
    quick_start = snippet("README.md", "Quick start")
    async with started(quick_start, server.kubeconfig_path, tmp_path) as proc:
        line = await read_until(proc, "web pods, read from the cache")
        assert line == f"{len(web)} web pods, read from the cache"
        await interrupt(proc)


async def run_pytest(tmp_path: Path, test_code: str, ini: str) -> tuple[int, str]:
    """pytest over ``test_code`` alone, with the configuration ``ini`` (not this
    project's): as in a user's repository."""
    (tmp_path / "test_users_controller.py").write_text(test_code, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(ini, encoding="utf-8")
    proc = await start(
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-c",
        str(tmp_path / "pytest.ini"),
        "--rootdir",
        str(tmp_path),
        str(tmp_path / "test_users_controller.py"),
        stderr=asyncio.subprocess.STDOUT,
        cwd=tmp_path,
    )
    stdout, _ = await finish(proc)
    assert proc.returncode is not None
    return proc.returncode, stdout


@pytest.mark.asyncio
@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_the_pytest_example_runs_under_pytest_asyncio(tmp_path: Path) -> None:
    code = snippet("docs/how-to/testing.md", "With the fake source").code
    marker = "@pytest.mark.asyncio\n"
    assert marker in code

    status, output = await run_pytest(tmp_path, code, "[pytest]\n")
    assert status == 0, output
    assert "1 passed" in output, output

    unmarked = code.replace(marker, "")
    status, output = await run_pytest(tmp_path, unmarked, "[pytest]\nasyncio_mode = auto\n")
    assert status == 0, output
    assert "1 passed" in output, output

    # Neither the marker nor auto mode: pytest-asyncio leaves the test alone and
    # pytest fails it ("async def functions are not natively supported").
    status, output = await run_pytest(tmp_path, unmarked, "[pytest]\n")
    assert status != 0, output
    assert "1 failed" in output, output
    assert "async def functions are not natively supported" in output  # as the page says
