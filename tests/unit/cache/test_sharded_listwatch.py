"""ShardedListWatch: one shard of a resource, filtered by the server when it can and
by the client always where it must; a change of filter relists at once."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from kubereflector import (
    Cache,
    ListOptions,
    ListResult,
    Reflector,
    ReflectorOptions,
    RelistRequiredError,
    ShardedListWatch,
    ShardFilter,
    ShardSelector,
    WatchStream,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle
from running_task import running

pytestmark = pytest.mark.asyncio

HALVES = [ShardSelector.even(0, 2), ShardSelector.even(1, 2)]


def obj(n: int) -> dict[str, Any]:
    # uids as the API server makes them (random v4 UUIDs; FNV-1a mixes the last
    # bytes of short look-alike strings poorly into its top bits)
    uid = str(uuid.uuid5(uuid.NAMESPACE_OID, str(n)))
    return {"metadata": {"name": f"o{n}", "namespace": "ns", "uid": uid}}


def names(objects: list[Any]) -> set[str]:
    return {o["metadata"]["name"] for o in objects}


def half_of(selector: ShardSelector, count: int) -> set[str]:
    return {f"o{n}" for n in range(count) if selector.matches(obj(n))}


class ShardingServer:
    """A FakeControllerSource that filters by ``shardSelector`` and echoes it, as an
    API server with KEP-5866 does (lists only: watches pass through unfiltered, so
    the tests show the client filters them anyway)."""

    def __init__(self, source: FakeControllerSource) -> None:
        self.source = source
        self.selectors: list[str] = []

    async def list(self, options: ListOptions) -> ListResult:
        self.selectors.append(options.shard_selector)
        result = await self.source.list(dataclasses.replace(options, shard_selector=""))
        if not options.shard_selector:
            return result
        selector = ShardSelector.parse(options.shard_selector)
        items = [o for o in result.items if selector.matches(o)]
        return ListResult(items, result.resource_version, result.continue_, None, str(selector))

    def watch(self, options: ListOptions) -> WatchStream:
        self.selectors.append(options.shard_selector)
        return self.source.watch(dataclasses.replace(options, shard_selector=""))


def filled(count: int) -> FakeControllerSource:
    source = FakeControllerSource()
    for n in range(count):
        source.add(obj(n))
    return source


async def test_a_list_the_server_did_not_filter_is_filtered_on_the_client() -> None:
    source = filled(40)
    lw = ShardedListWatch(source, ShardFilter.of(HALVES[0], scope="first"))
    result = await lw.list(ListOptions())
    assert names(result.items) == half_of(HALVES[0], 40)
    assert 0 < len(result.items) < 40
    assert source.list_requests[0].shard_selector == str(HALVES[0])
    assert lw.synced is not None
    assert lw.synced.filter.scope == "first"


async def test_a_list_the_server_filtered_is_trusted_as_it_is() -> None:
    server = ShardingServer(filled(40))
    # keep() that refuses all: only a trusted (server-filtered) list can pass objects
    lw = ShardedListWatch(server, ShardFilter(lambda o: False, HALVES[1]))
    result = await lw.list(ListOptions())
    assert names(result.items) == half_of(HALVES[1], 40)
    assert result.shard_info == str(HALVES[1])
    assert server.selectors == [str(HALVES[1])]


async def test_an_echo_of_another_selector_is_not_trusted() -> None:
    class Liar(ShardingServer):
        async def list(self, options: ListOptions) -> ListResult:
            result = await self.source.list(dataclasses.replace(options, shard_selector=""))
            return dataclasses.replace(result, shard_info=str(HALVES[0]))

    lw = ShardedListWatch(Liar(filled(40)), ShardFilter.of(HALVES[1]))
    result = await lw.list(ListOptions())
    assert names(result.items) == half_of(HALVES[1], 40)


async def test_a_filter_without_a_selector_sends_none_and_filters_alone() -> None:
    source = filled(10)
    lw = ShardedListWatch(source, ShardFilter(lambda o: o["metadata"]["name"] == "o3"))
    assert names((await lw.list(ListOptions())).items) == {"o3"}
    assert source.list_requests[0].shard_selector == ""


async def test_watch_events_outside_the_shard_are_dropped_and_bookmarks_pass() -> None:
    source = filled(0)
    lw = ShardedListWatch(ShardingServer(source), ShardFilter.of(HALVES[0]))
    await lw.list(ListOptions())
    mine = next(n for n in range(100) if HALVES[0].matches(obj(n)))
    theirs = next(n for n in range(100) if not HALVES[0].matches(obj(n)))
    options = ListOptions(resource_version=source.resource_version, allow_watch_bookmarks=True)
    async with lw.watch(options) as events:
        source.add(obj(theirs))
        source.add(obj(mine))
        source.modify(obj(theirs))
        source.delete(obj(mine))
        got = [await anext(events), await anext(events)]
    assert [(e.type, e.object["metadata"]["name"]) for e in got] == [
        ("ADDED", f"o{mine}"),
        ("DELETED", f"o{mine}"),
    ]


async def test_a_watch_list_counts_as_a_sync_at_its_end_bookmark() -> None:
    source = filled(30)
    clock = FakeClock(100.0)
    lw = ShardedListWatch(source, ShardFilter.of(HALVES[1], scope=1), clock=clock)
    options = ListOptions(
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
    )
    seen: set[str] = set()
    async with lw.watch(options) as events:
        async for event in events:
            if event.type == "BOOKMARK":
                break
            seen.add(event.object["metadata"]["name"])
            assert lw.synced is None
    assert seen == half_of(HALVES[1], 30)
    assert lw.synced is not None
    assert (lw.synced.filter.scope, lw.synced.at) == (1, 100.0)


async def test_a_rewatch_after_the_filter_changed_requires_a_relist() -> None:
    source = filled(5)
    lw = ShardedListWatch(source, ShardFilter.of(HALVES[0]))
    listed = await lw.list(ListOptions())
    lw.set_filter(ShardFilter.of(HALVES[1]))
    with pytest.raises(RelistRequiredError):
        async with lw.watch(ListOptions(resource_version=listed.resource_version)):
            pass


async def test_a_filter_change_during_a_paginated_list_requires_a_relist() -> None:
    source = filled(30)
    lw = ShardedListWatch(source, ShardFilter.of(HALVES[0]))
    first = await lw.list(ListOptions(limit=5))
    assert first.continue_
    lw.set_filter(ShardFilter.of(HALVES[1]))
    with pytest.raises(RelistRequiredError):
        await lw.list(ListOptions(limit=5, continue_=first.continue_))


async def test_a_reflector_relists_at_once_when_the_filter_changes() -> None:
    source = filled(60)
    clock = FakeClock()
    lw = ShardedListWatch(source, ShardFilter.of(HALVES[0], scope=0), clock=clock)
    store = Cache()
    errors: list[BaseException] = []
    reflector = Reflector(
        lw,
        store,
        clock=clock,
        options=ReflectorOptions(use_watch_list=False, idle_timeout=None),
        on_watch_error=lambda _r, err: errors.append(err),
    )
    async with running(reflector):
        assert {k.split("/")[1] for k in store.list_keys()} == half_of(HALVES[0], 60)
        lists_before = reflector.stats().lists
        lw.set_filter(ShardFilter.of(HALVES[1], scope=1))
        await settle()  # no clock advance: no backoff was waited for
        assert {k.split("/")[1] for k in store.list_keys()} == half_of(HALVES[1], 60)
        assert reflector.stats().lists == lists_before + 1
        assert lw.synced is not None
        assert lw.synced.filter.scope == 1
        # the new shard's changes flow; the old shard's do not
        mine = next(n for n in range(60, 200) if HALVES[1].matches(obj(n)))
        theirs = next(n for n in range(60, 200) if HALVES[0].matches(obj(n)))
        source.add(obj(mine))
        source.add(obj(theirs))
        await settle()
        assert f"ns/o{mine}" in store.list_keys()
        assert f"ns/o{theirs}" not in store.list_keys()
    assert errors == []


async def test_a_watch_list_reflector_relists_at_once_too() -> None:
    source = filled(40)
    clock = FakeClock()
    lw = ShardedListWatch(source, ShardFilter.of(HALVES[0]), clock=clock)
    store = Cache()
    reflector = Reflector(
        lw, store, clock=clock, options=ReflectorOptions(use_watch_list=True, idle_timeout=30)
    )
    async with running(reflector):
        assert {k.split("/")[1] for k in store.list_keys()} == half_of(HALVES[0], 40)
        lw.set_filter(ShardFilter.of(HALVES[1]))
        await settle()
        assert {k.split("/")[1] for k in store.list_keys()} == half_of(HALVES[1], 40)
        lw.set_filter(ShardFilter.nothing())
        await settle()
        assert store.list_keys() == []


async def test_relists_required_twice_without_a_sync_between_back_off() -> None:
    class Refusing:
        """Every list says the selection moved (a broken ListerWatcher)."""

        calls = 0

        async def list(self, options: ListOptions) -> ListResult:
            self.calls += 1
            raise RelistRequiredError("moved")

        def watch(self, options: ListOptions) -> WatchStream:
            raise AssertionError("never watched")

    clock = FakeClock()
    lw = Refusing()
    errors: list[BaseException] = []
    reflector = Reflector(
        lw,
        Cache(),
        clock=clock,
        options=ReflectorOptions(use_watch_list=False, idle_timeout=None, backoff_jitter=0),
        on_watch_error=lambda _r, err: errors.append(err),
    )
    async with running(reflector):
        assert lw.calls == 2  # once at once, the second waits for backoff
        assert len(errors) == 1
        assert isinstance(errors[0], RelistRequiredError)
        await clock.advance(0.8)
        await settle()
        assert lw.calls == 3


async def test_on_synced_is_told_of_each_full_sync_after_it_was_handed_on() -> None:
    source = filled(10)
    told: list[Any] = []
    lw = ShardedListWatch(source, ShardFilter.of(HALVES[0], scope="a"), on_synced=told.append)
    first = await lw.list(ListOptions(limit=4))
    assert first.continue_
    await settle()
    assert told == []  # a page is no full sync
    while first.continue_:
        first = await lw.list(ListOptions(limit=4, continue_=first.continue_))
    assert told == []  # not within the call: after it
    await settle()
    assert len(told) == 1
    assert told[0] is lw.synced
    assert told[0].filter.scope == "a"
