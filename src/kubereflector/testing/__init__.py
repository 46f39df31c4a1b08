"""Test doubles for code built on kubereflector: a fake clock and an in-memory source.

Public and typed: use them to test your own controllers without a cluster.
"""

from __future__ import annotations

from .clock import FakeClock, settle
from .fake_source import FakeControllerSource

__all__ = ["FakeClock", "FakeControllerSource", "settle"]
