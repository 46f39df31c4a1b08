"""The cache mutation detector (client-go's KUBE_CACHE_MUTATION_DETECTOR): an object an
informer cached and someone changed in place is reported, naming it and what changed;
and the informer's silence since it last heard from the server."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from kubereflector import ResourceEventHandlerFuncs, SharedIndexInformer
from kubereflector.testing import (
    CacheMutationError,
    FakeClock,
    FakeControllerSource,
    check_cache_mutations,
    settle,
)
from running_task import running

pytestmark = pytest.mark.asyncio


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": dict(data)}


async def test_a_handler_changing_a_cached_object_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert not check_cache_mutations.__module__.startswith("tests")
    source = FakeControllerSource()
    source.add(cm("a", secret="s3cr3t"))
    source.add(cm("b"))
    informer = SharedIndexInformer(source, clock=FakeClock())

    def on_add(obj: Any) -> None:
        if obj["metadata"]["name"] == "a":
            obj["data"]["secret"] = "changed"  # the mistake
            obj["metadata"]["labels"] = {"x": "y"}

    async def on_add_async(obj: Any) -> None:
        on_add(obj)

    informer.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add_async))
    async with running(informer):
        await settle()
        with pytest.raises(CacheMutationError) as info:
            check_cache_mutations()
        message = str(info.value)
        assert "ns/a was changed in place (at data.secret, metadata.labels)" in message
        assert "s3cr3t" not in message  # never the values
        assert "ns/b" not in message
        check_cache_mutations()  # reported once
        # A copy is the cure: nothing to report.
        mine = copy.deepcopy(informer.indexer.get_by_key("ns/b"))
        assert mine is not None
        mine["data"]["k"] = "v"
        check_cache_mutations()
        # Changed again later: reported when the informer stops, and to the next check.
        cached = informer.indexer.get_by_key("ns/b")
        assert cached is not None
        cached["data"]["late"] = "x"  # type: ignore[index]
    assert "ns/b was changed in place (at data.late)" in caplog.text
    assert [r.levelno for r in caplog.records if "changed in place" in r.getMessage()] == [
        logging.ERROR
    ]
    with pytest.raises(CacheMutationError, match="ns/b"):
        check_cache_mutations()


async def test_off_unless_the_environment_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBEREFLECTOR_CACHE_MUTATION_DETECTOR", raising=False)
    monkeypatch.delenv("KUBE_CACHE_MUTATION_DETECTOR", raising=False)
    source = FakeControllerSource()
    source.add(cm("a"))
    informer = SharedIndexInformer(source, clock=FakeClock())
    async with running(informer):
        cached = informer.indexer.get_by_key("ns/a")
        assert cached is not None
        cached["data"]["x"] = "y"  # type: ignore[index]
        check_cache_mutations()  # not watched: nothing to say
    monkeypatch.setenv("KUBE_CACHE_MUTATION_DETECTOR", "true")  # client-go's name works too
    informer = SharedIndexInformer(FakeControllerSource(), clock=FakeClock())
    assert informer._mutations is not None


async def test_compact_objects_refuse_writes_and_are_not_copied() -> None:
    source = FakeControllerSource()
    source.add(cm("a", k="v"))
    informer = SharedIndexInformer(source, clock=FakeClock(), object_mode="compact")
    async with running(informer):
        assert informer._mutations is not None
        assert repr(informer._mutations).endswith("objects=0>")
    check_cache_mutations()


async def test_watch_silence_is_the_time_since_the_server_was_last_heard_from() -> None:
    clock = FakeClock()
    source = FakeControllerSource()
    source.add(cm("a"))
    informer = SharedIndexInformer(source, clock=clock)
    assert informer.stats().watch_silence is None  # not started
    async with running(informer):
        assert informer.stats().watch_silence == 0  # listed, watching: just now
        await clock.advance(40)
        assert informer.stats().watch_silence == 40  # nothing since
        source.modify(cm("a", k="v"))
        await settle()
        assert informer.stats().watch_silence == 0  # an event, noticed by this snapshot
        await clock.advance(5)
        assert informer.stats().watch_silence == 5
