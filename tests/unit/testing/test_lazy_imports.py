"""Importing kubereflector.testing (FakeClock, FakeControllerSource) or the emulator's
command-line options loads no HTTP stack: ApiServerEmulator, and aiohttp and yaml
with it, load on first use.

Each check runs in a fresh interpreter: this process has imported everything.
"""

from __future__ import annotations

import sys

import pytest

from programs import PROGRAM_TEST_TIMEOUT, run_sync

pytestmark = pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)

HEAVY = ("aiohttp", "yaml", "kubereflector.testing.apiserver._emulator")


def loaded_after(code: str) -> list[str]:
    """Which of :data:`HEAVY` a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    result = run_sync([sys.executable, "-c", probe], check=True)
    return [name for name in result.stdout.strip().split(",") if name]


@pytest.mark.parametrize(
    "module",
    [
        "kubereflector.testing",
        "kubereflector.testing.apiserver",
        "kubereflector.testing.apiserver._command",
    ],
)
def test_importing_loads_no_http_stack(module: str) -> None:
    assert loaded_after(f"import {module}") == []


def test_the_emulator_loads_on_first_use() -> None:
    code = "from kubereflector.testing import ApiServerEmulator, FakeControllerSource"
    assert loaded_after(code) == list(HEAVY)
