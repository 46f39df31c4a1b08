"""apply, create_or_update and create_or_patch on fake resource clients: the operation
results, the writes sent, the field manager apply defaults to."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest

from kubereflector import NotFoundError
from kubereflector.client import ResourceInfo
from kubereflector.runtime import (
    Controller,
    OperationResult,
    Request,
    apply,
    apply_sync,
    create_or_patch,
    create_or_patch_sync,
    create_or_update,
    create_or_update_sync,
    merge_patch,
)
from kubereflector.testing import FakeClock, FakeControllerSource
from running_task import running as started

CONFIGMAPS = ResourceInfo("", "v1", "configmaps", "ConfigMap", namespaced=True)


def cm(name: str = "a", **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        **fields,
    }


class SyncApi:
    """A resource client over a dict of objects; records each write as (verb, ...)."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {o["metadata"]["name"]: copy.deepcopy(o) for o in objects}
        self.writes: list[tuple[Any, ...]] = []
        self.rv = 10

    def _stored(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[stored["metadata"]["name"]] = stored
        return copy.deepcopy(stored)

    def get(self, name: str) -> dict[str, Any]:
        if name not in self.objects:
            raise NotFoundError(404, "NotFound", f"configmaps {name!r} not found")
        return copy.deepcopy(self.objects[name])

    def create(self, obj: Any, *, dry_run: bool = False, field_manager: str | None = None) -> Any:
        self.writes.append(("create", copy.deepcopy(obj), field_manager))
        return self._stored(obj)

    def update(self, obj: Any, *, dry_run: bool = False, field_manager: str | None = None) -> Any:
        self.writes.append(("update", copy.deepcopy(obj), field_manager))
        return self._stored(obj)

    def patch(
        self,
        name: str,
        patch: Any,
        *,
        type: str = "merge",
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> Any:
        self.writes.append(("patch", name, patch, subresource))
        merged = _merge(self.objects[name], patch)
        return self._stored(merged)

    def apply(
        self,
        obj: Any,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Any:
        self.writes.append(("apply", copy.deepcopy(obj), field_manager, force, subresource))
        return self._stored(obj)


class AsyncApi(SyncApi):
    async def get(self, name: str) -> dict[str, Any]:  # type: ignore[override]
        return SyncApi.get(self, name)

    async def create(self, obj: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return SyncApi.create(self, obj, **kwargs)

    async def update(self, obj: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return SyncApi.update(self, obj, **kwargs)

    async def patch(self, name: str, patch: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return SyncApi.patch(self, name, patch, **kwargs)

    async def apply(self, obj: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return SyncApi.apply(self, obj, **kwargs)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def set_data(**data: str) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        obj["data"] = dict(data)

    return mutate


def test_merge_patch() -> None:
    before = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1], "gone": True}
    after = {"a": 1, "b": {"c": 5, "d": 3, "new": 1}, "e": [1, 2]}
    patch = merge_patch(before, after)
    assert patch == {"gone": None, "b": {"c": 5, "new": 1}, "e": [1, 2]}
    assert _merge(before, patch) == after
    assert merge_patch(after, after) == {}


@pytest.mark.asyncio
async def test_create_or_update_creates_updates_or_leaves_alone() -> None:
    api = AsyncApi()
    result, created = await create_or_update(api, cm(), set_data(k="v"))
    assert result is OperationResult.CREATED
    assert str(result) == "created"
    assert created["data"] == {"k": "v"}
    assert api.writes[0][0] == "create"
    # Nothing to change: no write.
    result, same = await create_or_update(api, cm(), set_data(k="v"))
    assert result is OperationResult.NONE
    assert len(api.writes) == 1
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    # A change: an update conditional on the resourceVersion read.
    result, updated = await create_or_update(api, cm(), set_data(k="w"), field_manager="me")
    assert result is OperationResult.UPDATED
    verb, sent, manager = api.writes[-1]
    assert (verb, manager) == ("update", "me")
    assert sent["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert updated["data"] == {"k": "w"}


@pytest.mark.asyncio
async def test_create_or_update_reads_the_cache_when_given_one() -> None:
    existing = cm(data={"k": "v"})
    existing["metadata"]["resourceVersion"] = "7"
    api = AsyncApi()  # the server has nothing: only the cache is read

    class Cache:
        def get(self, name: str) -> Any:
            return existing if name == "a" else None

    result, _ = await create_or_update(api, cm(), set_data(k="v"), cache=Cache())
    assert result is OperationResult.NONE
    result, _ = await create_or_update(api, cm("b"), set_data(k="v"), cache=Cache())
    assert result is OperationResult.CREATED
    assert existing == cm(data={"k": "v"}) | {"metadata": existing["metadata"]}  # untouched


@pytest.mark.asyncio
async def test_mutate_may_not_move_the_object_nor_return_something() -> None:
    api = AsyncApi(cm())

    def rename(obj: dict[str, Any]) -> None:
        obj["metadata"]["name"] = "b"

    with pytest.raises(ValueError, match="name or namespace"):
        await create_or_update(api, cm(), rename)
    with pytest.raises(TypeError, match="returns None"):
        await create_or_update(api, cm(), lambda obj: obj)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match=r"metadata\.name"):
        await create_or_update(api, {"metadata": {}}, set_data())
    assert api.writes == []


@pytest.mark.asyncio
async def test_create_or_patch_patches_the_object_and_its_status_apart() -> None:
    api = AsyncApi(cm(data={"k": "v"}, status={"phase": "old"}))

    def data_and_status(obj: dict[str, Any]) -> None:
        obj["data"]["k"] = "w"
        obj["status"]["phase"] = "new"

    result, patched = await create_or_patch(api, cm(), data_and_status)
    assert result is OperationResult.UPDATED_STATUS
    assert api.writes == [
        ("patch", "a", {"data": {"k": "w"}}, None),
        ("patch", "a", {"status": {"phase": "new"}}, "status"),
    ]
    assert patched["status"] == {"phase": "new"}

    def status_only(obj: dict[str, Any]) -> None:
        obj["status"] = {"phase": "newer"}

    result, _ = await create_or_patch(api, cm(), status_only)
    assert result is OperationResult.UPDATED_STATUS_ONLY
    assert str(result) == "updatedStatusOnly"

    def data_only(obj: dict[str, Any]) -> None:
        obj.pop("data", None)

    result, _ = await create_or_patch(api, cm(), data_only)
    assert result is OperationResult.UPDATED
    assert api.writes[-1] == ("patch", "a", {"data": None}, None)
    result, _ = await create_or_patch(api, cm(), data_only)
    assert result is OperationResult.NONE
    result, _ = await create_or_patch(api, cm("new"), set_data(k="v"))
    assert result is OperationResult.CREATED


def test_the_blocking_twins() -> None:
    api = SyncApi()
    assert create_or_update_sync(api, cm(), set_data(k="v"))[0] is OperationResult.CREATED
    assert create_or_update_sync(api, cm(), set_data(k="w"))[0] is OperationResult.UPDATED
    assert create_or_patch_sync(api, cm(), set_data(k="x"))[0] is OperationResult.UPDATED
    assert create_or_patch_sync(api, cm("b"), set_data())[0] is OperationResult.CREATED
    assert apply_sync(api, cm("c"), field_manager="me")["metadata"]["name"] == "c"
    assert api.writes[-1][2:] == ("me", True, None)


@pytest.mark.asyncio
async def test_apply_forces_and_needs_a_field_manager_outside_a_reconcile() -> None:
    api = AsyncApi()
    await apply(api, cm(data={"k": "v"}), field_manager="shop-operator", subresource="status")
    assert api.writes[-1][2:] == ("shop-operator", True, "status")
    await apply(api, cm(), field_manager="shop-operator", force=False)
    assert api.writes[-1][3] is False
    with pytest.raises(ValueError, match="needs a field_manager outside a reconcile"):
        await apply(api, cm())
    with pytest.raises(ValueError, match="non-empty"):
        await apply(api, cm(), field_manager="")


@pytest.mark.asyncio
async def test_apply_in_a_reconcile_is_the_controllers_field_manager() -> None:
    """Coroutine and plain-function reconcilers alike (the thread gets the context)."""
    clock = FakeClock()
    source = FakeControllerSource()
    source.add(cm("a"))
    from kubereflector import SharedIndexInformer

    informer = SharedIndexInformer(source, clock=clock)
    api = AsyncApi()
    done = asyncio.Event()

    async def reconcile(request: Request) -> None:
        await apply(api, cm(request.name, data={"k": "v"}))
        done.set()

    threaded = SyncApi()
    thread_done = asyncio.Event()
    loop = asyncio.get_running_loop()

    def reconcile_sync(request: Request) -> None:
        apply_sync(threaded, cm(request.name))
        loop.call_soon_threadsafe(thread_done.set)

    run = asyncio.create_task(informer.run())
    try:
        for fn, name, event in (
            (reconcile, "shop-operator", done),
            (reconcile_sync, "threaded", thread_done),
        ):
            controller = Controller(fn, for_=(informer, CONFIGMAPS), name=name, clock=clock)
            async with started(controller):
                await asyncio.wait_for(event.wait(), 10)
    finally:
        run.cancel()
        await asyncio.wait({run})
    assert api.writes[-1][2] == "shop-operator"
    assert threaded.writes[-1][2] == "threaded"
