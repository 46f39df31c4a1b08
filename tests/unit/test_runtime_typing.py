"""The two ways to run a Manager are told apart by their types: mypy reports a
``run()`` that is not awaited, and an awaited ``run_sync()``; the right uses pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

PROGRAM = """from kubereflector.client import load_config
from kubereflector.runtime import Manager, Request


async def right() -> None:
    async with Manager(load_config()) as manager:
        await manager.run()


def right_sync() -> None:
    manager = Manager(load_config())

    @manager.reconciler("configmaps")
    def reconcile(request: Request) -> None:
        print(request.key)

    reconcile(Request("ns", "a"))
    manager.run_sync()


async def forgot_await() -> None:
    manager = Manager(load_config())
    manager.run()  # line 23


async def awaited_sync() -> None:
    await Manager(load_config()).run_sync()  # line 27
"""


@pytest.mark.timeout(180)  # mypy analyses the package on a cold cache
def test_mypy_tells_the_two_ways_to_run_apart(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text(PROGRAM, encoding="utf-8")
    out, err, status = api.run(["--strict", "--no-error-summary", str(program)])
    assert status == 1, err
    errors = sorted(
        (int(line.split(":")[1]), line.rsplit("[", 1)[1].rstrip("]"))
        for line in out.splitlines()
        if ": error: " in line
    )
    assert errors == [
        (23, "unused-coroutine"),
        (27, "func-returns-value"),
        (27, "misc"),  # incompatible types in "await"
    ], out
