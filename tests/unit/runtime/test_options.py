"""ControllerOptions: one options value for the Manager's reconcilers and the Controller."""

from __future__ import annotations

import dataclasses

import pytest

from kubereflector.runtime import ControllerOptions
from kubereflector.workqueue import ItemExponentialFailureRateLimiter


def test_defaults_are_controller_runtimes() -> None:
    options = ControllerOptions()
    assert options.max_concurrent_reconciles == 1
    assert options.rate_limiter is None


@pytest.mark.parametrize("workers", [0, -1, True, 1.5, "2"])
def test_workers_must_be_a_positive_integer(workers: object) -> None:
    with pytest.raises(ValueError, match="max_concurrent_reconciles must be an integer >= 1"):
        ControllerOptions(max_concurrent_reconciles=workers)  # type: ignore[arg-type]


def test_rate_limiter_must_be_a_rate_limiter() -> None:
    with pytest.raises(TypeError, match="rate_limiter must be a RateLimiter, not str"):
        ControllerOptions(rate_limiter="fast")  # type: ignore[arg-type]
    limiter = ItemExponentialFailureRateLimiter[object](0.01, 1.0)
    assert ControllerOptions(rate_limiter=limiter).rate_limiter is limiter


def test_options_are_immutable_values() -> None:
    options = ControllerOptions(max_concurrent_reconciles=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_concurrent_reconciles = 2  # type: ignore[misc]
    assert dataclasses.replace(options, max_concurrent_reconciles=2) == ControllerOptions(
        max_concurrent_reconciles=2
    )
