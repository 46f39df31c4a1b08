"""The finalizer helper's state machine (kube-rs's finalizer()), on fake resource
clients; its patches are applied with the emulator's JSON patch, which follows
kube-apiserver's (a missing path tests equal to null)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubereflector.runtime import (
    Result,
    finalizer,
    finalizer_step,
    finalizer_sync,
    remove_finalizer_patch,
)
from kubereflector.testing.apiserver._patch import PatchFailed, json_patch

NAME = "example.com/cleanup"


def obj(*finalizers: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "a", "namespace": "ns"}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": meta}


class Api:
    """A resource client that applies JSON patches to one object."""

    def __init__(self, current: dict[str, Any]) -> None:
        self.current = current
        self.patches: list[Any] = []

    async def patch(self, name: str, patch: Any, *, type: str = "merge") -> Any:
        return self.patch_sync(name, patch, type=type)

    def patch_sync(self, name: str, patch: Any, *, type: str = "merge") -> Any:
        assert name == "a"
        assert type == "json"
        self.patches.append(patch)
        self.current = json_patch(self.current, patch)
        return self.current


class SyncApi(Api):
    def patch(self, name: str, patch: Any, *, type: str = "merge") -> Any:  # type: ignore[override]
        return self.patch_sync(name, patch, type=type)


def test_the_four_steps() -> None:
    assert finalizer_step(obj(), NAME)[0] == "add"
    assert finalizer_step(obj("other"), NAME)[0] == "add"
    assert finalizer_step(obj(NAME), NAME) == ("apply", None)
    assert finalizer_step(obj("other", NAME, deleting=True), NAME)[0] == "cleanup"
    assert finalizer_step(obj("other", deleting=True), NAME) == ("done", None)
    with pytest.raises(ValueError, match=r"metadata\.name"):
        finalizer_step({"metadata": {}}, NAME)
    with pytest.raises(ValueError, match="non-empty"):
        finalizer_step(obj(), "")


@pytest.mark.parametrize("existing", [(), ("other",)])
def test_the_add_patch_adds_once_and_fails_if_the_list_changed(existing: tuple[str, ...]) -> None:
    before = obj(*existing)
    _, patch = finalizer_step(before, NAME)
    after = json_patch(before, patch)
    assert after["metadata"]["finalizers"] == [*existing, NAME]
    # Someone else changed the finalizers meanwhile: the test op fails (no duplicate).
    with pytest.raises(PatchFailed, match="test operation failed"):
        json_patch(obj(*existing, "third"), patch)


def test_the_remove_patch_removes_only_ours() -> None:
    before = obj("other", NAME, deleting=True)
    _, patch = finalizer_step(before, NAME)
    assert json_patch(before, patch)["metadata"]["finalizers"] == ["other"]
    with pytest.raises(PatchFailed):  # the list moved under us: do not remove another's
        json_patch(obj(NAME, "other", deleting=True), patch)
    assert remove_finalizer_patch(obj("other"), NAME) is None


@pytest.mark.asyncio
async def test_a_new_object_gets_the_finalizer_then_apply_runs_on_it_as_patched() -> None:
    seen: list[Any] = []

    async def apply(o: Any) -> Result:
        seen.append(copy.deepcopy(o))
        return Result(requeue_after=60)

    async def cleanup(o: Any) -> Result:
        raise AssertionError("no cleanup for a live object")

    api = Api(obj("other"))
    # One call adds the finalizer and goes on to apply (no echo needed to continue).
    assert await finalizer(api, NAME, api.current, apply=apply, cleanup=cleanup) == Result(60)
    assert api.current["metadata"]["finalizers"] == ["other", NAME]
    assert [o["metadata"]["finalizers"] for o in seen] == [["other", NAME]]
    # The next reconcile sees the finalizer: apply again, nothing patched.
    assert await finalizer(api, NAME, api.current, apply=apply, cleanup=cleanup) == Result(60)
    assert len(seen) == 2
    assert len(api.patches) == 1


@pytest.mark.asyncio
async def test_apply_after_the_add_gets_the_object_with_the_finalizer_from_any_answer() -> None:
    """A patcher answering something other than the object (a test double's None):
    apply still gets the object with the finalizer added, not the one before."""

    class Quiet(Api):
        async def patch(self, name: str, patch: Any, *, type: str = "merge") -> Any:
            self.patch_sync(name, patch, type=type)
            return None

    seen: list[Any] = []

    async def apply(o: Any) -> None:
        seen.append(o)

    before = obj()
    await finalizer(Quiet(before), NAME, before, apply=apply, cleanup=apply)
    assert seen[0]["metadata"]["finalizers"] == [NAME]
    assert "finalizers" not in before["metadata"]  # the caller's object is left as it was


@pytest.mark.asyncio
async def test_deletion_runs_cleanup_then_removes_the_finalizer() -> None:
    async def apply(o: Any) -> None:
        raise AssertionError("no apply while deleting")

    attempts = 0

    async def cleanup(o: Any) -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ConnectionError("cleanup failed")

    api = Api(obj(NAME, deleting=True))
    deleting = copy.deepcopy(api.current)
    with pytest.raises(ConnectionError):
        await finalizer(api, NAME, deleting, apply=apply, cleanup=cleanup)
    assert api.patches == []  # a failed cleanup keeps the finalizer
    assert await finalizer(api, NAME, deleting, apply=apply, cleanup=cleanup) is None
    assert (
        "finalizers" not in api.current["metadata"] or api.current["metadata"]["finalizers"] == []
    )
    # Finalizer gone, still deleting: nothing left to do.
    assert await finalizer(api, NAME, api.current, apply=apply, cleanup=cleanup) is None
    assert attempts == 2


def test_the_sync_twin() -> None:
    calls: list[str] = []
    api = SyncApi(obj())

    def apply(o: Any) -> str:
        calls.append("apply")
        return "applied"

    assert finalizer_sync(api, NAME, api.current, apply=apply, cleanup=print) == "applied"
    assert api.current["metadata"]["finalizers"] == [NAME]
    finalizer_sync(api, NAME, api.current, apply=lambda o: calls.append("apply"), cleanup=print)
    api.current["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    finalizer_sync(api, NAME, api.current, apply=print, cleanup=lambda o: calls.append("cleanup"))
    assert calls == ["apply", "apply", "cleanup"]
    assert api.current["metadata"]["finalizers"] == []

    async def coroutine(o: Any) -> None:
        return None

    with pytest.raises(TypeError, match="plain functions"):
        finalizer_sync(api, NAME, api.current, apply=coroutine, cleanup=coroutine)
