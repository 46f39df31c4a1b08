"""Sharding's settings and the Manager's checks of them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kubereflector.client import ClientConfig
from kubereflector.runtime import LeaderElection, Manager, Sharding


def test_defaults_are_client_gos_leader_election_durations() -> None:
    sharding = Sharding(name="my-operator")
    assert (sharding.shards, sharding.lease_duration, sharding.renew_deadline) == (32, 15.0, 10.0)
    assert (sharding.retry_period, sharding.drain_timeout) == (2.0, 30.0)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"name": "My_Operator"}, "lowercase letters, digits and '-'"),
        ({"name": "x" * 41}, "at most 40"),
        ({"name": "op", "shards": 0}, "shards must be an int from 1 to 1024"),
        ({"name": "op", "shards": 1025}, "shards must be an int from 1 to 1024"),
        ({"name": "op", "shards": True}, "shards must be an int"),
        ({"name": "op", "identity": ""}, "identity must be a non-empty string"),
        ({"name": "op", "retry_period": 0}, "retry_period must be a number of seconds > 0"),
        ({"name": "op", "drain_timeout": float("inf")}, "drain_timeout must be a number"),
        (
            {"name": "op", "lease_duration": 0.5, "renew_deadline": 0.4, "retry_period": 0.1},
            "at least 1 second",
        ),
        ({"name": "op", "renew_deadline": 15}, "lease_duration > renew_deadline > retry_period"),
        ({"name": "op", "retry_period": 10}, "lease_duration > renew_deadline > retry_period"),
    ],
)
def test_settings_out_of_range_are_refused_by_name(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        Sharding(**kwargs)


def test_a_manager_is_sharded_or_elected_not_both() -> None:
    config = ClientConfig(server="https://127.0.0.1:6443")
    with pytest.raises(ValueError, match="sharding and leader_election exclude each other"):
        Manager(config, leader_election=LeaderElection("op"), sharding=Sharding(name="op"))
    with pytest.raises(TypeError, match="sharding must be a Sharding"):
        Manager(config, sharding="op")  # type: ignore[arg-type]
    manager = Manager(config, sharding=Sharding(name="op", identity="me"))
    assert manager.sharding is not None
    assert manager.sharding.identity == "me"
    assert Manager(config).sharding is None


def test_a_sharded_manager_asks_for_its_leases_in_its_manifests() -> None:
    config = ClientConfig(server="https://127.0.0.1:6443")
    manager = Manager(config, namespace="shop", sharding=Sharding(name="op"))
    manager.reconciler("configmaps", reconcile=_noop)
    permissions = manager.describe().permissions
    for verb in ("get", "list", "create", "update"):
        assert permissions.allows(verb, "coordination.k8s.io", "leases", namespace="shop")
    assert not permissions.allows("delete", "coordination.k8s.io", "leases", namespace="shop")
    elsewhere = Manager(config, sharding=Sharding(name="op", namespace="ops"))
    elsewhere.reconciler("configmaps", reconcile=_noop)
    rules = elsewhere.describe().permissions
    assert rules.allows("list", "coordination.k8s.io", "leases", namespace="ops")
    assert not rules.allows("list", "coordination.k8s.io", "leases", namespace="shop")


async def _noop(request: Any) -> None:
    return None
