"""The Prometheus exporter: names, labels and values, read back from the exposition."""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from kubereflector import SharedIndexInformer, wait_for_cache_sync
from kubereflector.metrics import Metrics
from kubereflector.testing import FakeClock, FakeControllerSource, settle


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition: (name, sorted labels) -> value."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(metrics: Metrics, metric: str, /, **labels: str) -> float:
    return samples(metrics)[(metric, tuple(sorted(labels.items())))]


def test_controller_metrics_use_controller_runtime_names() -> None:
    metrics = Metrics(process=False)
    c = metrics.controller("replicator")
    c.set_max_concurrent_reconciles(4)
    c.worker_started()
    c.worker_started()
    c.worker_finished()
    c.reconciled("success", 0.02)
    c.reconciled("requeue_after", 0.01)
    c.reconciled("error", 0.5)
    c.reconciled("error", 0.5, terminal=True)
    assert (
        value(metrics, "controller_runtime_max_concurrent_reconciles", controller="replicator") == 4
    )
    assert value(metrics, "controller_runtime_active_workers", controller="replicator") == 1
    for result, count in (("success", 1), ("error", 2), ("requeue", 0), ("requeue_after", 1)):
        assert (
            value(
                metrics,
                "controller_runtime_reconcile_total",
                controller="replicator",
                result=result,
            )
            == count
        )
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller="replicator") == 2
    assert (
        value(
            metrics, "controller_runtime_terminal_reconcile_errors_total", controller="replicator"
        )
        == 1
    )
    assert (
        value(metrics, "controller_runtime_reconcile_time_seconds_count", controller="replicator")
        == 4
    )
    assert (
        value(
            metrics,
            "controller_runtime_reconcile_time_seconds_bucket",
            controller="replicator",
            le="0.025",
        )
        == 2
    )


def test_workqueue_provider_uses_client_go_names() -> None:
    metrics = Metrics(process=False)
    provider = metrics.workqueue_provider()
    provider.new_depth_metric("q").inc()
    provider.new_adds_metric("q").inc()
    provider.new_latency_metric("q").observe(0.001)
    provider.new_work_duration_metric("q").observe(0.002)
    provider.new_unfinished_work_seconds_metric("q").set(1.5)
    provider.new_longest_running_processor_seconds_metric("q").set(0.5)
    provider.new_retries_metric("q").inc()
    labels = {"name": "q", "controller": "q"}
    assert value(metrics, "workqueue_depth", **labels) == 1
    assert value(metrics, "workqueue_adds_total", **labels) == 1
    assert value(metrics, "workqueue_queue_duration_seconds_count", **labels) == 1
    assert value(metrics, "workqueue_work_duration_seconds_sum", **labels) == pytest.approx(0.002)
    assert value(metrics, "workqueue_unfinished_work_seconds", **labels) == 1.5
    assert value(metrics, "workqueue_longest_running_processor_seconds", **labels) == 0.5
    assert value(metrics, "workqueue_retries_total", **labels) == 1


def test_leader_election_and_rest_client_metrics() -> None:
    metrics = Metrics(process=False)
    leader = metrics.leader_election()
    leader.on("kube-system/op")
    assert value(metrics, "leader_election_master_status", name="kube-system/op") == 1
    leader.off("kube-system/op")
    leader.slowpath_exercised("kube-system/op")
    assert value(metrics, "leader_election_master_status", name="kube-system/op") == 0
    assert value(metrics, "leader_election_slowpath_total", name="kube-system/op") == 1

    rest = metrics.rest_client()
    rest.observe("GET", "200", "10.0.0.1", 0.01)
    rest.observe("GET", "200", "10.0.0.1", 0.02)
    rest.observe("PUT", "409", "10.0.0.1", 0.01)
    rest.observe("GET", "<error>", "10.0.0.1", 1.0)
    req = "rest_client_requests_total"
    assert value(metrics, req, code="200", method="GET", host="10.0.0.1") == 2
    assert value(metrics, req, code="409", method="PUT", host="10.0.0.1") == 1
    assert value(metrics, req, code="<error>", method="GET", host="10.0.0.1") == 1
    latency = "rest_client_request_duration_seconds_count"
    assert value(metrics, latency, verb="GET", host="10.0.0.1") == 3


def test_the_lifecycle_counters_of_a_controller() -> None:
    metrics = Metrics(process=False)
    recorder = metrics.controller("c")
    recorder.timed_out()
    recorder.conflicted()
    recorder.conflicted()
    recorder.stale()
    assert value(metrics, "controller_runtime_reconcile_timeouts_total", controller="c") == 1
    assert value(metrics, "kubereflector_reconcile_conflicts_total", controller="c") == 2
    assert value(metrics, "kubereflector_reconcile_stale_reads_total", controller="c") == 1


def test_registries_are_separate_unless_shared() -> None:
    a, b = Metrics(process=False), Metrics(process=False)
    a.controller("c").reconciled("success", 0.1)
    assert value(a, "controller_runtime_reconcile_total", controller="c", result="success") == 1
    assert (
        "controller_runtime_reconcile_total",
        (("controller", "c"), ("result", "success")),
    ) not in samples(b)
    shared = CollectorRegistry()
    Metrics(shared, process=False)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Metrics(shared, process=False)


def test_process_metrics_are_exported_by_default() -> None:
    names = {name for name, _ in samples(Metrics())}
    assert "python_info" in names
    assert "python_gc_collections_total" in names


@pytest.mark.asyncio
async def test_informer_metrics_are_read_at_scrape_time() -> None:
    source = FakeControllerSource()
    for i in range(3):
        source.add({"metadata": {"name": f"cm-{i}", "namespace": "ns"}})
    clock = FakeClock()
    informer = SharedIndexInformer(source, clock=clock)
    metrics = Metrics(process=False)
    metrics.add_informers(lambda: {"configmaps": informer})
    assert value(metrics, "kubereflector_informer_synced", resource="configmaps") == 0
    assert math.isnan(
        value(metrics, "kubereflector_informer_last_sync_resource_version", resource="configmaps")
    )
    assert math.isnan(
        value(metrics, "kubereflector_informer_last_event_age_seconds", resource="configmaps")
    )
    task = asyncio.create_task(informer.run())
    try:
        assert await wait_for_cache_sync(informer, timeout=10)
        source.modify({"metadata": {"name": "cm-0", "namespace": "ns"}, "data": {"a": "b"}})
        await settle()
        got: dict[str, Any] = {
            name.removeprefix("kubereflector_informer_"): v
            for (name, labels), v in samples(metrics).items()
            if labels == (("resource", "configmaps"),)
        }
        assert got["objects"] == 3
        assert got["synced"] == 1
        assert got["lists_total"] == 1
        assert got["relists_total"] == 0
        assert got["deltas_total"] == 4
        assert got["last_sync_resource_version"] == float(source.resource_version)
        assert got["pending_notifications"] == 0
        assert got["last_event_age_seconds"] == 0
        await clock.advance(12)
        assert (
            value(metrics, "kubereflector_informer_last_event_age_seconds", resource="configmaps")
            == 12
        )
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    with pytest.raises(TypeError, match="callable"):
        metrics.add_informers({"configmaps": informer})  # type: ignore[arg-type]


def test_sharding_metrics_say_which_shards_a_replica_holds() -> None:
    metrics = Metrics(process=False)
    sharding = metrics.sharding("replicator")
    sharding.members(3)
    sharding.held({1, 3}, 4)
    sharding.acquired()
    sharding.acquired()
    sharding.released("rebalance")
    sharding.handoff(0.4)
    assert value(metrics, "kubereflector_sharding_shards_held", name="replicator") == 2
    held = [
        value(metrics, "kubereflector_sharding_shard_held", name="replicator", shard=str(s))
        for s in range(4)
    ]
    assert held == [0, 1, 0, 1]
    assert value(metrics, "kubereflector_sharding_members", name="replicator") == 3
    assert value(metrics, "kubereflector_sharding_acquisitions_total", name="replicator") == 2
    assert (
        value(
            metrics, "kubereflector_sharding_releases_total", name="replicator", reason="rebalance"
        )
        == 1
    )
    assert value(metrics, "kubereflector_sharding_handoff_seconds_count", name="replicator") == 1
    sharding.held({3}, 4)
    assert value(metrics, "kubereflector_sharding_shard_held", name="replicator", shard="1") == 0
