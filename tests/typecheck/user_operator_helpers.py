"""A user's operator helpers, typed as users meet them: owner references, writes,
conditions and the finalizer keep the models they are given. Type-checked by
test_typecheck.py (never run)."""

from __future__ import annotations

from typing import TypedDict

from typing_extensions import NotRequired, assert_type

from kubereflector.client import EventRecorder, ResourceClient, SyncResourceClient, load_config
from kubereflector.models import ConfigMap, Deployment
from kubereflector.models.meta_v1 import Condition, ObjectMeta
from kubereflector.runtime import (
    InformerOptions,
    Manager,
    OperationResult,
    Result,
    apply,
    create_or_patch_sync,
    create_or_update,
    finalizer,
    find_condition,
    get_controller_of,
    is_controlled_by,
    set_condition,
    set_controller_reference,
)


class WidgetStatus(TypedDict):
    conditions: NotRequired[list[Condition]]


class Widget(TypedDict):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    status: NotRequired[WidgetStatus]


manager = Manager(load_config(), informers=InformerOptions(object_mode="compact"))
assert_type(manager.event_recorder("widgets"), EventRecorder)


async def owned(api: ResourceClient[ConfigMap], owner: Deployment) -> None:
    cm: ConfigMap = {"metadata": {"name": "x", "namespace": "shop"}}
    assert_type(set_controller_reference(owner, cm), ConfigMap)
    assert_type(is_controlled_by(cm, owner), bool)
    ref = get_controller_of(cm)
    if ref is not None:
        print(ref["name"])

    def mutate(obj: ConfigMap) -> None:
        obj["data"] = {"k": "v"}

    result, stored = await create_or_update(api, cm, mutate)
    assert_type(result, OperationResult)
    assert_type(stored, ConfigMap)
    assert_type(await apply(api, cm), ConfigMap)


def owned_on_a_thread(api: SyncResourceClient[ConfigMap], cm: ConfigMap) -> None:
    def mutate(obj: ConfigMap) -> None:
        obj["data"] = {}

    assert_type(create_or_patch_sync(api, cm, mutate), tuple[OperationResult, ConfigMap])


async def conditions(api: ResourceClient, widget: Widget) -> Result | None:
    assert_type(set_condition(widget, "Ready", "True", reason="Fine"), bool)
    assert_type(find_condition(widget, "Ready"), Condition | None)

    async def keep(obj: Widget) -> Result:
        assert_type(obj, Widget)
        return Result()

    return await finalizer(api, "example.com/cleanup", widget, apply=keep, cleanup=keep)
