"""strip_managed_fields and compose, alone and in an informer."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from types import SimpleNamespace
from typing import Any

import pytest

from kubereflector import (
    DeletedFinalStateUnknown,
    SharedIndexInformer,
    compose,
    strip_managed_fields,
)
from kubereflector.testing import FakeClock, FakeControllerSource, settle

MANAGED = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]


def pod(name: str = "a", **meta: Any) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": {"containers": [{"name": "c"}]},
    }


def test_strip_managed_fields_leaves_the_input_intact() -> None:
    original = pod(managedFields=MANAGED, labels={"app": "x"})
    before = copy.deepcopy(original)
    stripped = strip_managed_fields(original)
    assert original == before
    assert "managedFields" not in stripped["metadata"]
    assert stripped["metadata"]["labels"] == {"app": "x"}
    assert stripped["spec"] is original["spec"]  # shallow: the rest is shared


def test_strip_managed_fields_is_idempotent_and_returns_clean_objects_as_they_are() -> None:
    clean = pod()
    assert strip_managed_fields(clean) is clean
    once = strip_managed_fields(pod(managedFields=MANAGED))
    assert strip_managed_fields(once) is once
    no_meta = {"kind": "Status"}
    assert strip_managed_fields(no_meta) is no_meta


def test_strip_managed_fields_on_objects_with_attributes() -> None:
    meta = SimpleNamespace(name="a", managed_fields=MANAGED)
    model = SimpleNamespace(metadata=meta, spec="s")
    stripped = strip_managed_fields(model)
    assert stripped.metadata.managed_fields is None
    assert stripped.metadata.name == "a"
    assert model.metadata.managed_fields is MANAGED  # the input is untouched
    clean = SimpleNamespace(metadata=SimpleNamespace(name="b", managed_fields=None))
    assert strip_managed_fields(clean) is clean


def test_strip_managed_fields_leaves_tombstones_alone() -> None:
    tombstone = DeletedFinalStateUnknown("default/a", pod(managedFields=MANAGED))
    assert strip_managed_fields(tombstone) is tombstone


def test_compose_applies_left_to_right() -> None:
    def tag(label: str) -> Any:
        def transform(obj: Any) -> Any:
            return {**obj, "tags": [*obj.get("tags", []), label]}

        return transform

    both = compose(tag("first"), tag("second"))
    assert both({})["tags"] == ["first", "second"]
    assert "compose(" in both.__qualname__
    assert compose(strip_managed_fields) is strip_managed_fields
    assert compose()({"x": 1}) == {"x": 1}


def test_compose_refuses_what_is_not_callable() -> None:
    with pytest.raises(TypeError, match="callable"):
        compose(strip_managed_fields, "nope")  # type: ignore[arg-type]


def test_compose_propagates_errors() -> None:
    def fail(obj: Any) -> Any:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        compose(strip_managed_fields, fail)(pod())


@pytest.mark.asyncio
async def test_an_informer_caches_objects_without_managed_fields() -> None:
    clock = FakeClock()
    source = FakeControllerSource(clock=clock)
    source.add(pod("a", managedFields=MANAGED))
    informer = SharedIndexInformer(source, clock=clock)
    informer.set_transform(compose(strip_managed_fields, lambda o: {**o, "seen": True}))
    task = asyncio.create_task(informer.run())
    try:
        await settle()
        source.add(pod("b", managedFields=MANAGED))
        await settle()
        cached = informer.store.list()
        assert len(cached) == 2
        assert all("managedFields" not in o["metadata"] and o["seen"] for o in cached)
        # The source's own objects were not mutated.
        assert all("managedFields" in o["metadata"] for o in source.list_objects())
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
