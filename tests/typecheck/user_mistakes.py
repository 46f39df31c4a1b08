"""Mistakes mypy --strict must catch. Each line ending in an "E:" comment must get a
mypy error containing the comment's text, and no other line may get one
(test_typecheck.py).
The correct versions of these lines are in user_async.py, user_sync.py,
user_typed_objects.py, user_generics.py and user_crd.py."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from typing_extensions import NotRequired, TypedDict

from kubereflector import (
    DeletedFinalStateUnknown,
    FilteringResourceEventHandler,
    KubeObject,
    Lister,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    SharedInformerFactory,
    SyncSharedInformerFactory,
    run,
)
from kubereflector.client import Client, ResourceClient, SyncClient, SyncResourceClient, load_config
from kubereflector.models import Deployment, ObjectMeta, Pod
from kubereflector.models.crd import ListType, PrinterColumn, Rule, custom_resource
from kubereflector.runtime import AdmissionRequest, Manager, apply, finalizer, set_condition
from kubereflector.testing import FakeControllerSource


async def forgot_await(factory: SharedInformerFactory) -> None:
    synced: dict[str, bool] = factory.wait_for_cache_sync()  # E: Incompatible types in assignment
    print(synced)
    if not all(factory.wait_for_cache_sync(timeout=60).values()):  # E: has no attribute "values"
        raise SystemExit("not synced")
    factory.wait_for_cache_sync(timeout=60)  # E: must be used
    factory.shutdown()  # E: must be used


async def awaited_the_blocking_factory(factory: SyncSharedInformerFactory) -> None:
    await factory.wait_for_cache_sync()  # E: Incompatible types in "await"


def entered_the_wrong_way() -> None:
    with SharedInformerFactory(load_config()) as factory:  # E: has no attribute "__enter__"
        print(factory)


async def entered_the_other_wrong_way() -> None:
    config = load_config()
    async with SyncSharedInformerFactory(config) as factory:  # E: has no attribute "__aenter__"
        print(factory)


def wrote_into_the_cache(informer: SharedIndexInformer) -> None:
    for pod in informer.lister.list():
        pod["metadata"] = {}  # E: Unsupported target for indexed assignment


def forgot_the_tombstone(pod: KubeObject) -> None:
    print(pod["metadata"]["name"])


def forgot_the_tombstone_in_a_filter(pod: KubeObject) -> bool:
    return bool(pod["metadata"].get("labels"))


def handlers_that_forget_tombstones(informer: SharedIndexInformer) -> None:
    ResourceEventHandlerFuncs(on_delete=forgot_the_tombstone)  # E: Argument "on_delete"
    handler: ResourceEventHandlerFuncs[KubeObject] = ResourceEventHandlerFuncs()
    FilteringResourceEventHandler(forgot_the_tombstone_in_a_filter, handler)  # E: Argument 1
    tombstone: DeletedFinalStateUnknown[KubeObject] = DeletedFinalStateUnknown("a", None)
    print(tombstone.obj["metadata"])  # E: Value of type "Mapping[str, Any] | None" is not indexable


class Model:
    name = "m"


def handler_of_another_type(models: SharedIndexInformer[Model], handler: Any) -> None:
    kube_handler: ResourceEventHandlerFuncs[KubeObject] = handler
    models.add_event_handler(kube_handler)  # E: Argument 1 to "add_event_handler"
    name: str = models.lister.list()[0]["metadata"]  # E: Value of type "Model" is not indexable
    print(name, FakeControllerSource())


async def forgot_to_await_a_write(pods: ResourceClient) -> None:
    pod: dict[str, Any] = pods.get("web")  # E: Incompatible types in assignment
    pods.delete("web")  # E: must be used
    print(pod)


async def awaited_a_blocking_write(pods: SyncResourceClient) -> None:
    await pods.get("web")  # E: Incompatible types in "await"


async def forgot_to_await_the_manager(manager: Manager) -> None:
    manager.run()  # E: must be used


async def awaited_the_blocking_run(manager: Manager) -> None:
    await manager.run_sync()  # E: Incompatible types in "await"


def ran_the_function_not_a_call_of_it(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    run(main)  # E: incompatible type


def misread_a_pod(pod: Pod) -> None:
    print(pod["spec"]["nodeNmae"])  # E: TypedDict "PodSpec" has no key "nodeNmae"
    pod["spec"]["nodeName"] = 3  # E: Value of "nodeName" has incompatible type "int"
    pod["metadata"]["labels"] = ["app"]  # E: Value of "labels" has incompatible type


BAD_POD: Pod = {
    "metadata": {"name": "web"},
    "spec": {"containers": [{"image": "nginx"}]},  # E: Missing key "name" for TypedDict "Container"
}
BAD_DEPLOYMENT: Deployment = {
    "spec": {
        "replicas": "3",  # E: TypedDict item "replicas" has type "int"
        "selector": {},
        "template": {"spec": {"containers": "web"}},  # E: TypedDict item "containers" has type
    }
}
MISSPELLED: Deployment = {
    "spec": {
        "selector": {},
        "template": {"spec": {"containers": [], "nodeNmae": "n1"}},  # E: Extra key "nodeNmae"
    }
}
NO_TEMPLATE: Deployment = {"spec": {"selector": {}}}  # E: Missing key "template" for TypedDict


# -- typed by models: the informer, the lister, the handlers, the client ----------------


def on_deployment(deployment: Deployment) -> None:
    print(deployment["spec"]["replicas"])


async def misread_a_typed_cache(factory: SharedInformerFactory, manager: Manager) -> None:
    for pod in factory.lister_for(Pod).list():
        print(pod["spec"]["nodeNmae"])  # E: TypedDict "PodSpec" has no key "nodeNmae"
    web = manager.lister_for(Pod).namespaced("shop").get("web")
    print(web["metadata"])  # E: Value of type "Pod | None" is not indexable
    factory.informer_for(Pod).add_event_handler(
        ResourceEventHandlerFuncs(on_add=on_deployment)  # E: "Callable[[Deployment], None]"
    )
    deployments: Lister[Deployment] = factory.lister_for(Pod)  # E: expected "type[Deployment]"
    print(deployments, factory.informer_for(int))  # E: Value of type variable "ModelT"


async def wrote_the_wrong_thing(client: Client, deployment: Deployment) -> None:
    pods = client.resource(Pod, namespace="shop")
    pod = await pods.get("web")
    pod["spec"]["nodeName"] = 3  # E: Value of "nodeName" has incompatible type "int"
    await pods.create(deployment)  # E: type "Deployment"; expected "Pod"
    async with pods.watch() as events:
        async for event in events:
            print(event.object["spec"]["replicas"])  # E: TypedDict "PodSpec" has no key "replicas"


def wrote_the_wrong_thing_blocking(client: SyncClient, deployment: Deployment) -> None:
    pods = client.resource(Pod, namespace="shop")
    pods.update(deployment)  # E: type "Deployment"; expected "Pod"
    pods.apply(
        {"spec": {"containers": [], "nodeNmae": "n1"}},  # E: Extra key "nodeNmae" for TypedDict
        field_manager="me",
    )


class GizmoSpec(TypedDict):
    size: int


@custom_resource(group="example.com", version="v1", scope="Namespace")  # E: Argument "scope"
class Gizmo(TypedDict):
    metadata: NotRequired[ObjectMeta]
    spec: GizmoSpec


def misread_a_custom_resource(gizmo: Gizmo) -> None:
    print(gizmo["spec"]["sise"])  # E: TypedDict "GizmoSpec" has no key "sise"
    gizmo["spec"]["size"] = "3"  # E: Value of "size" has incompatible type "str"


BAD_GIZMO: Gizmo = {"spec": {"size": 1.5}}  # E: TypedDict item "size" has type "int"


async def created_the_wrong_model(client: Client, pod: Pod) -> None:
    await client.resource(Gizmo, namespace="shop").create(pod)  # E: type "Pod"; expected "Gizmo"


WRONG_MARKERS = (
    ListType("bag"),  # E: Argument 1 to "ListType" has incompatible type
    PrinterColumn("Size", ".spec.size", type="text"),  # E: Argument "type" to "PrinterColumn"
    Rule("self > 0", reason="Invalid"),  # E: Argument "reason" to "Rule"
)


def declared_a_permission_as_a_tuple(manager: Manager) -> None:
    wanted = [("secrets", "get")]
    manager.reconciler("configmaps", rbac=wanted)  # E: Argument "rbac" to "reconciler"


class Gadget(TypedDict):
    spec: dict[str, Any]


def webhooks_typed_wrong(manager: Manager) -> None:
    @manager.validator(Pod)  # E: "Callable[[Deployment, AdmissionRequest[Deployment]], None]"
    def check(pod: Deployment, request: AdmissionRequest[Deployment]) -> None:
        return None

    manager.defaulter(Pod, failure_policy="Never")  # E: No overload variant of "defaulter"
    manager.validator(Pod, reinvocation_policy="IfNeeded")  # E: Unexpected keyword argument

    async def to_hub(old: Gadget) -> Pod:
        return {"spec": {"containers": []}}

    def from_hub(new: Pod) -> Gadget:
        return {"spec": {}}

    manager.converter(Pod, Gadget, to_hub=to_hub, from_hub=from_hub)  # E: Argument "to_hub"


async def operator_helpers(api: ResourceClient[Deployment], deployment: Deployment) -> None:
    set_condition(deployment, "Ready", "Yes", reason="Fine")  # E: Argument 3 to "set_condition"
    await apply(api, deployment, force="yes")  # E: Argument "force" to "apply"

    async def on_pod(pod: Pod) -> None:
        print(pod)

    await finalizer(api, "x", deployment, apply=on_pod, cleanup=on_pod)  # E: Argument "apply"
