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
    assert options.reconcile_timeout is None
    assert options.requeue_on_own_writes is False  # the one departure: see read_your_writes


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), True, "5"])
def test_a_reconcile_timeout_is_a_positive_finite_number(timeout: object) -> None:
    with pytest.raises(ValueError, match="reconcile_timeout must be a finite number"):
        ControllerOptions(reconcile_timeout=timeout)  # type: ignore[arg-type]
    assert ControllerOptions(reconcile_timeout=2.5).reconcile_timeout == 2.5


def test_informer_options_are_the_factorys_arguments() -> None:
    import inspect

    from kubereflector import SharedInformerFactory
    from kubereflector.runtime import InformerOptions

    factory_arguments = set(inspect.signature(SharedInformerFactory).parameters)
    options = InformerOptions(object_mode="compact", default_resync=30)
    assert set(options.as_kwargs()) <= factory_arguments
    assert options.as_kwargs()["object_mode"] == "compact"
    # The namespace is the manager's own argument; wrap_lister_watcher is its sharding's.
    assert set(options.as_kwargs()) == factory_arguments - {
        "client_or_config",
        "namespace",
        "wrap_lister_watcher",
    }


def test_a_managers_informers_list_first_unless_told_otherwise() -> None:
    from kubereflector import ReflectorOptions
    from kubereflector.runtime import InformerOptions

    default = InformerOptions().as_kwargs()["reflector_options"]
    assert default == ReflectorOptions(use_watch_list=False)
    chosen = ReflectorOptions(page_size=50)
    assert InformerOptions(reflector_options=chosen).as_kwargs()["reflector_options"] is chosen
    assert chosen.use_watch_list


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
