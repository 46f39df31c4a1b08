"""Test doubles for code built on kubereflector: a fake clock, an in-memory source and
an HTTP API server emulator; and the cache mutation detector's check,
:func:`check_cache_mutations` (client-go's ``KUBE_CACHE_MUTATION_DETECTOR``).

Public and typed: use them to test your own controllers without a cluster.
:class:`FakeControllerSource` and :class:`ApiServerEmulator` are imported on
first use, so importing this package (or the emulator's command-line options)
loads neither the emulator's store nor the HTTP stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..cache._mutation_detector import CacheMutationError, check_cache_mutations
from .clock import FakeClock, settle

if TYPE_CHECKING:
    from .apiserver import ApiServerEmulator
    from .fake_source import FakeControllerSource

__all__ = [
    "ApiServerEmulator",
    "CacheMutationError",
    "FakeClock",
    "FakeControllerSource",
    "check_cache_mutations",
    "settle",
]


def __getattr__(name: str) -> Any:
    # Lazy: keeps the emulator's store and aiohttp out of plain imports.
    if name == "ApiServerEmulator":
        from .apiserver import ApiServerEmulator

        return ApiServerEmulator
    if name == "FakeControllerSource":
        from .fake_source import FakeControllerSource

        return FakeControllerSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
