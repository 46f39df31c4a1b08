"""Test doubles for code built on kubereflector: a fake clock, an in-memory source and
an HTTP API server emulator.

Public and typed: use them to test your own controllers without a cluster.
:class:`ApiServerEmulator` is imported on first use, so importing this package
does not load the HTTP stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .clock import FakeClock, settle
from .fake_source import FakeControllerSource

if TYPE_CHECKING:
    from .apiserver import ApiServerEmulator

__all__ = ["ApiServerEmulator", "FakeClock", "FakeControllerSource", "settle"]


def __getattr__(name: str) -> Any:
    # Lazy: keeps aiohttp out of plain imports.
    if name == "ApiServerEmulator":
        from .apiserver import ApiServerEmulator

        return ApiServerEmulator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
