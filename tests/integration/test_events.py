"""EventRecorder over HTTP: against the emulator, or a real cluster.

The recorder's clock is a FakeClock (series endings and token refills happen
when the test moves it); the server is real HTTP either way.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from conftest import Target

from kubereflector import InvalidError
from kubereflector.client import EventRecorder, ResourceClient
from kubereflector.testing import FakeClock

pytestmark = pytest.mark.asyncio

COMPONENT = "example.com/test-controller"


def events(target: Target) -> ResourceClient:
    return target.client.resource("events.k8s.io/v1/events", namespace=target.namespace)


async def subject(target: Target, name: str = "subject") -> dict[str, Any]:
    return await target.client.resource("configmaps", namespace=target.namespace).create(
        {"metadata": {"name": name}}
    )


async def test_an_event_says_what_happened_to_what(target: Target) -> None:
    obj = await subject(target)
    recorder = EventRecorder(target.client, COMPONENT, reporting_instance="ctl-0")
    recorder.record(obj, "Warning", "SyncFailed", "could not sync: boom", action="Sync")
    await recorder.flush()
    (event,) = (await events(target).list()).items
    assert event["type"] == "Warning"
    assert (event["reason"], event["action"], event["note"]) == (
        "SyncFailed",
        "Sync",
        "could not sync: boom",
    )
    assert (event["reportingController"], event["reportingInstance"]) == (COMPONENT, "ctl-0")
    meta = obj["metadata"]
    assert event["regarding"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "namespace": target.namespace,
        "name": "subject",
        "uid": meta["uid"],
        "resourceVersion": meta["resourceVersion"],
    }
    assert event["metadata"]["name"].startswith("subject.")
    assert "series" not in event
    assert event["eventTime"].endswith("Z")


async def test_a_flood_of_identical_events_is_one_event_with_a_series_count(
    target: Target,
) -> None:
    obj = await subject(target)
    recorder = EventRecorder(target.client, COMPONENT, clock=FakeClock())
    for _ in range(150):
        recorder.record(obj, "Normal", "Synced", "in sync")
    await recorder.flush()
    for _ in range(50):  # the series continues after its Event exists
        recorder.record(obj, "Normal", "Synced", "in sync")
    await recorder.flush()
    (event,) = (await events(target).list()).items
    assert event["series"]["count"] == 200
    assert event["series"]["lastObservedTime"] >= event["eventTime"]
    assert recorder.dropped == 0


async def test_series_written_at_once_end_with_exact_counts(target: Target) -> None:
    objects = [await subject(target, f"subject-{i}") for i in range(4)]
    recorder = EventRecorder(target.client, COMPONENT, clock=FakeClock(), max_concurrent_sends=4)
    expected: dict[tuple[str, str], int] = {}
    for round_ in range(3):  # repeats interleaved across series, while writes are in flight
        for i, obj in enumerate(objects):
            for reason in ("Synced", "Scaled", "Updated"):
                for _ in range(i + round_ + 1):
                    recorder.record(obj, "Normal", reason, "in sync")
                key = (obj["metadata"]["name"], reason)
                expected[key] = expected.get(key, 0) + i + round_ + 1
        if round_ == 1:
            await recorder.flush()
    await recorder.flush()
    found = {
        (e["regarding"]["name"], e["reason"]): e.get("series", {}).get("count", 1)
        for e in (await events(target).list()).items
    }
    assert found == expected
    assert recorder.dropped == 0


async def test_a_repeat_after_the_series_ended_is_a_new_event(target: Target) -> None:
    obj = await subject(target)
    clock = FakeClock()
    recorder = EventRecorder(target.client, COMPONENT, clock=clock)
    recorder.record(obj, "Normal", "Synced", "in sync")
    recorder.record(obj, "Normal", "Synced", "in sync")
    await recorder.flush()
    await clock.advance(6 * 60 + 1)
    recorder.record(obj, "Normal", "Synced", "in sync")
    await recorder.flush()
    counts = sorted(
        e.get("series", {}).get("count", 1) for e in (await events(target).list()).items
    )
    assert counts == [1, 2]


async def test_different_reasons_are_different_events(target: Target) -> None:
    obj = await subject(target)
    recorder = EventRecorder(target.client, COMPONENT, clock=FakeClock())
    recorder.record(obj, "Normal", "Created", "made it")
    recorder.record(obj, "Normal", "Scaled", "to 3")
    recorder.record(obj, "Normal", "Scaled", "to 4")  # a repeat of Scaled: the first note stays
    await recorder.flush()
    found = {e["reason"]: e for e in (await events(target).list()).items}
    assert set(found) == {"Created", "Scaled"}
    assert found["Scaled"]["note"] == "to 3"
    assert found["Scaled"]["series"]["count"] == 2


async def test_the_token_bucket_drops_floods_about_one_object(
    target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    noisy, quiet = await subject(target, "noisy"), await subject(target, "quiet")
    clock = FakeClock()
    recorder = EventRecorder(target.client, COMPONENT, clock=clock)
    with caplog.at_level(logging.WARNING, logger="kubereflector.client.events"):
        for i in range(30):
            recorder.record(noisy, "Warning", f"Reason{i}", "different each time")
    recorder.record(quiet, "Normal", "Fine", "another object has its own bucket")
    await recorder.flush()
    names = [e["regarding"]["name"] for e in (await events(target).list()).items]
    assert names.count("noisy") == 25
    assert names.count("quiet") == 1
    assert recorder.dropped == 5
    assert "too many events about this object" in caplog.text
    # A repeat of an existing Event waits for a token (every 5 minutes) rather than dropping.
    recorder.record(noisy, "Warning", "Reason0", "again")
    await recorder.flush()
    reason0 = [e for e in (await events(target).list()).items if e["reason"] == "Reason0"]
    assert "series" not in reason0[0]
    await clock.advance(300)
    await recorder.flush()
    reason0 = [e for e in (await events(target).list()).items if e["reason"] == "Reason0"]
    assert reason0[0]["series"]["count"] == 2


async def test_objects_whose_bucket_refilled_are_forgotten(target: Target) -> None:
    """Objects deleted and created again get a new uid each time: the rate-limit state
    of those gone quiet is dropped, not kept until the 4,096th (the soak's growth)."""
    clock = FakeClock()
    recorder = EventRecorder(target.client, COMPONENT, clock=clock)
    for i in range(20):
        gone = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gone", "namespace": target.namespace, "uid": f"uid-{i}"},
        }
        recorder.record(gone, "Normal", "Replicated", "copied")
    await recorder.flush()
    assert recorder.objects_tracked == 20
    await clock.advance(300)  # every bucket has its token back
    live = await subject(target, "live")
    for _ in range(256 - 20):  # the 256th record sweeps
        recorder.record(live, "Normal", "Synced", "in sync")
    await recorder.flush()
    assert recorder.objects_tracked == 1
    assert "objects=1" in repr(recorder)


async def test_recording_never_raises_and_works_from_threads(target: Target) -> None:
    obj = await subject(target)
    recorder = EventRecorder(target.client, COMPONENT)
    recorder.record({"metadata": {"name": "no-kind"}}, "Normal", "X", "dropped, logged")
    recorder.record(obj, "Sideways", "X", "not a type kube knows")  # type: ignore[arg-type]
    recorder.record(object(), "Normal", "X", "not an object")

    def from_a_thread() -> None:
        for _ in range(10):
            recorder.record(obj, "Normal", "FromThread", "hello")

    await asyncio.gather(*(asyncio.to_thread(from_a_thread) for _ in range(3)))
    await recorder.flush()
    (event,) = (await events(target).list()).items
    assert event["reason"] == "FromThread"
    assert event["series"]["count"] == 30


async def test_the_server_validates_events_as_kube_does(target: Target) -> None:
    obj = await subject(target)
    regarding = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "namespace": target.namespace,
        "name": obj["metadata"]["name"],
    }
    base = {
        "metadata": {"name": "e"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "type": "Normal",
        "regarding": regarding,
    }
    with pytest.raises(InvalidError) as missing:
        await events(target).create(base)
    assert {"reportingController", "reportingInstance", "action", "reason"} == {
        c.field for c in missing.value.causes
    }
    complete = {
        **base,
        "reportingController": COMPONENT,
        "reportingInstance": "i",
        "action": "Sync",
        "reason": "Synced",
        "note": "first",
    }
    with pytest.raises(InvalidError) as series:
        await events(target).create({**complete, "series": {"count": 1}})
    assert {c.field for c in series.value.causes} == {"series.count", "series.lastObservedTime"}
    await events(target).create(complete)
    with pytest.raises(InvalidError) as immutable:
        await events(target).patch("e", {"reason": "Other", "note": "changed"})
    assert {c.field for c in immutable.value.causes} == {"reason", "message"}
    counted = await events(target).patch(
        "e", {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}}
    )
    assert counted["series"]["count"] == 2
