"""A custom resource declared in Python, typed like the built-in models: its objects are
written as dict literals and read field by field with the types declared; its informer,
lister, client and reconciler are typed by it; and the declaration's API is typed too.
Type-checked by test_typecheck.py, never run. The mistakes these types catch are in
user_mistakes.py."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta
from typing_extensions import NotRequired, TypedDict, assert_type

from kubereflector import (
    Lister,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    SharedInformerFactory,
)
from kubereflector.client import Client, ResourceClient, load_config
from kubereflector.models import ApiResource, Deployment, JSONValue, resource_of
from kubereflector.models.apiextensions_v1 import CustomResourceDefinition, JSONSchemaProps
from kubereflector.models.crd import (
    CustomResource,
    CustomResourceVersion,
    Default,
    EmbeddedResource,
    Format,
    ListType,
    MapType,
    PreserveUnknownFields,
    PrinterColumn,
    Rule,
    ScaleSubresource,
    crd_manifest,
    custom_resource,
    custom_resource_of,
    declaration_of,
    rules,
)
from kubereflector.models.meta_v1 import IntOrString, ObjectMeta
from kubereflector.runtime import Manager, Request, Result


class Port(TypedDict):
    name: str
    port: Annotated[int, Meta(ge=1, le=65535)]
    protocol: NotRequired[Annotated[Literal["TCP", "UDP"], Default("TCP")]]


@rules(Rule("self.min <= self.max", message="min above max", reason="FieldValueInvalid"))
class Range(TypedDict):
    min: int
    max: int


class FooSpec(TypedDict):
    deploymentName: str
    replicas: NotRequired[Annotated[int, Meta(ge=1, le=10)]]
    ports: NotRequired[Annotated[list[Port], ListType("map", keys=("name",))]]
    labels: NotRequired[Annotated[dict[str, str], MapType("atomic")]]
    target: NotRequired[IntOrString]
    range: NotRequired[Annotated[Range, PreserveUnknownFields()]]
    template: NotRequired[Annotated[dict[str, JSONValue], EmbeddedResource()]]
    started: NotRequired[Annotated[str, Format("date-time")]]


class FooStatus(TypedDict):
    availableReplicas: NotRequired[int]


@custom_resource(
    group="samplecontroller.k8s.io",
    version="v1alpha1",
    annotations={"api-approved.kubernetes.io": "unapproved, experimental-only"},
    printer_columns=[PrinterColumn("Replicas", ".spec.replicas")],
    scale=ScaleSubresource(status_replicas_path=".status.availableReplicas"),
)
class Foo(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: FooSpec
    status: NotRequired[FooStatus]


FOO: Foo = {
    "apiVersion": "samplecontroller.k8s.io/v1alpha1",
    "kind": "Foo",
    "metadata": {"name": "example-foo", "labels": {"app": "example"}},
    "spec": {
        "deploymentName": "example-foo",
        "replicas": 1,
        "ports": [{"name": "http", "port": 80}],
        "target": "50%",
        "range": {"min": 1, "max": 2},
        "template": {"apiVersion": "v1", "kind": "ConfigMap"},
    },
}


def read_a_foo(foo: Foo) -> None:
    assert_type(foo["spec"]["deploymentName"], str)
    assert_type(foo["spec"].get("replicas"), int | None)
    assert_type(foo["spec"].get("target"), int | str | None)
    assert_type(foo.get("status", {}).get("availableReplicas"), int | None)
    for port in foo["spec"].get("ports", []):
        assert_type(port["port"], int)
    assert_type(foo["metadata"]["name"], str)


def the_declaration_is_typed() -> None:
    assert_type(Foo, type[Foo])
    assert_type(resource_of(Foo), ApiResource)
    declared = declaration_of(Foo)
    assert_type(declared, CustomResourceVersion)
    assert_type(declared.schema(), JSONSchemaProps)
    resource = custom_resource_of(Foo)
    assert_type(resource, CustomResource)
    assert_type(resource.storage_version.model, type)
    manifest = crd_manifest(Foo)
    assert_type(manifest, CustomResourceDefinition)
    assert_type(manifest["spec"]["versions"][0]["name"], str)
    assert_type(resource.manifest(conversion={"strategy": "None"}), CustomResourceDefinition)


def on_add(foo: Foo) -> None:
    print(foo["spec"]["deploymentName"])


async def typed_by_the_declaration(factory: SharedInformerFactory, client: Client) -> None:
    foos = factory.informer_for(Foo)
    assert_type(foos, SharedIndexInformer[Foo])
    foos.add_event_handler(ResourceEventHandlerFuncs(on_add=on_add))
    assert_type(factory.lister_for(Foo), Lister[Foo])
    for foo in factory.lister_for(Foo).list():
        assert_type(foo["spec"]["deploymentName"], str)
    api = client.resource(Foo, namespace="default")
    assert_type(api, ResourceClient[Foo])
    assert_type(await api.create(FOO), Foo)
    assert_type((await api.get("example-foo"))["spec"].get("replicas"), int | None)


manager = Manager(load_config())


@manager.reconciler(Foo, owns=[Deployment])
async def reconcile(request: Request) -> Result | None:
    foo = manager.lister_for(Foo).namespaced(request.namespace).get(request.name)
    if foo is None:
        return None
    assert_type(foo, Foo)
    replicas = foo["spec"].get("replicas", 1)
    assert_type(replicas, int)
    return None
