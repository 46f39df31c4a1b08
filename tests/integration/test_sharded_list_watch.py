"""KEP-5866 sharded lists and watches over HTTP: on the emulator (which serves
``shardSelector``, and can be switched to serve like an older server), and, with a
kubeconfig, on a real kube-apiserver (v1.28 here: no sharded lists, so only the
older-server behaviour and the client-side path run there).

The client's answer does not depend on the server: ShardedListWatch gives the
same objects whether the server filtered or the client did.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Target, WatchedCache

from kubereflector import (
    BadRequestError,
    ListOptions,
    Reflector,
    ReflectorOptions,
    ShardedListWatch,
    ShardFilter,
    ShardSelector,
)
from kubereflector.client import ResourceListWatch
from running_task import running

pytestmark = pytest.mark.asyncio

QUARTERS = [ShardSelector.even(i, 4) for i in range(4)]


async def make_configmaps(target: Target, count: int) -> dict[str, str]:
    """``count`` ConfigMaps in the test's namespace; name -> uid."""
    api = target.client.resource("configmaps", namespace=target.namespace)
    uids: dict[str, str] = {}
    for n in range(count):
        created = await api.create({"metadata": {"name": f"cm-{n:03d}"}, "data": {"n": str(n)}})
        uids[created["metadata"]["name"]] = created["metadata"]["uid"]
    return uids


def names(items: list[Any]) -> set[str]:
    return {item["metadata"]["name"] for item in items}


def expected_quarter(uids: dict[str, str], quarter: ShardSelector) -> set[str]:
    return {name for name, uid in uids.items() if quarter.matches({"metadata": {"uid": uid}})}


async def test_a_server_without_sharded_lists_ignores_the_selector(target: Target) -> None:
    if target.emulator is not None:
        target.emulator.sharded_list_watch = False  # serve as kube-apiserver before 1.36
    uids = await make_configmaps(target, 12)
    lw = ResourceListWatch(target.client, "configmaps", namespace=target.namespace)
    result = await lw.list(ListOptions(shard_selector=str(QUARTERS[0])))
    assert result.shard_info is None
    assert names(result.items) == set(uids)
    # even a selector that would not parse: ignored, not refused
    result = await lw.list(ListOptions(shard_selector="not a selector"))
    assert names(result.items) == set(uids)


async def test_a_server_with_sharded_lists_filters_and_echoes(target: Target) -> None:
    emulator = target.faults()  # kube-apiserver v1.28 has no KEP-5866
    assert emulator.sharded_list_watch
    uids = await make_configmaps(target, 40)
    lw = ResourceListWatch(target.client, "configmaps", namespace=target.namespace)
    seen: set[str] = set()
    for quarter in QUARTERS:
        result = await lw.list(ListOptions(shard_selector=str(quarter)))
        assert result.shard_info == str(quarter)
        assert names(result.items) == expected_quarter(uids, quarter)
        assert result.remaining_item_count is None
        seen |= names(result.items)
    assert seen == set(uids)
    # paged: each page echoes the selector, the pages add up to the quarter
    paged: set[str] = set()
    options = ListOptions(shard_selector=str(QUARTERS[2]), limit=3)
    while True:
        page = await lw.list(options)
        assert page.shard_info == str(QUARTERS[2])
        paged |= names(page.items)
        if not page.continue_:
            break
        options = ListOptions(shard_selector=str(QUARTERS[2]), limit=3, continue_=page.continue_)
    assert paged == expected_quarter(uids, QUARTERS[2])
    with pytest.raises(BadRequestError, match=r"invalid shard selector: .*'0x' prefix"):
        await lw.list(ListOptions(shard_selector="shardRange(object.metadata.uid, '0', '1')"))
    with pytest.raises(BadRequestError, match="empty shard selector is not allowed"):
        await target.client.request(
            "GET",
            f"/api/v1/namespaces/{target.namespace}/configmaps",
            params={"shardSelector": ""},
        )


async def test_a_sharded_watch_sends_only_the_shard(target: Target) -> None:
    emulator = target.faults()
    api = target.client.resource("configmaps", namespace=target.namespace)
    lw = ResourceListWatch(target.client, "configmaps", namespace=target.namespace)
    listed = await lw.list(ListOptions())
    got: list[str] = []
    options = ListOptions(resource_version=listed.resource_version, shard_selector=str(QUARTERS[1]))
    async with lw.watch(options) as events:
        created = {}
        for n in range(40):  # (some land in the quarter: all but surely)
            obj = await api.create({"metadata": {"name": f"w-{n}"}})
            created[obj["metadata"]["name"]] = obj["metadata"]["uid"]
        wanted = expected_quarter(created, QUARTERS[1])
        assert wanted
        async for event in events:  # (the test's timeout bounds the wait)
            got.append(event.object["metadata"]["name"])
            if len(got) == len(wanted):
                break
    assert set(got) == wanted
    assert emulator.sharded_list_watch


@pytest.mark.parametrize("server_side", [True, False], ids=["server-side", "client-side"])
@pytest.mark.parametrize("use_watch_list", [False, True], ids=["list", "watch-list"])
async def test_server_and_client_side_filtering_agree_object_for_object(
    target: Target, server_side: bool, use_watch_list: bool
) -> None:
    if target.emulator is not None:
        target.emulator.sharded_list_watch = server_side
    elif server_side:
        pytest.skip("kube-apiserver v1.28 has no KEP-5866: only the client-side path runs")
    uids = await make_configmaps(target, 30)
    stores = [WatchedCache() for _ in QUARTERS]
    reflectors = [
        Reflector(
            ShardedListWatch(
                ResourceListWatch(target.client, "configmaps", namespace=target.namespace),
                ShardFilter.of(quarter),
            ),
            store,
            options=ReflectorOptions(use_watch_list=use_watch_list),
        )
        for quarter, store in zip(QUARTERS, stores, strict=True)
    ]
    api = target.client.resource("configmaps", namespace=target.namespace)

    def held(store: WatchedCache) -> set[str]:
        return {key.split("/")[1] for key in store.list_keys()}

    async with (
        running(reflectors[0]),
        running(reflectors[1]),
        running(reflectors[2]),
        running(reflectors[3]),
    ):
        for store, quarter in zip(stores, QUARTERS, strict=True):
            want = expected_quarter(uids, quarter)
            await store.wait_until(lambda s=store, w=want: held(s) == w)  # type: ignore[misc]
        # changes land in exactly the right shard
        for n in range(10):
            obj = await api.create({"metadata": {"name": f"late-{n}"}})
            uids[obj["metadata"]["name"]] = obj["metadata"]["uid"]
        await api.delete("cm-000")
        del uids["cm-000"]
        for store, quarter in zip(stores, QUARTERS, strict=True):
            want = expected_quarter(uids, quarter)
            await store.wait_until(lambda s=store, w=want: held(s) == w)  # type: ignore[misc]
    union: set[str] = set()
    for store in stores:
        assert not union & held(store)
        union |= held(store)
    assert union == set(uids)
