"""CRDs generated from Python declarations are accepted, as kube-apiserver accepts them: each
is applied to the target (the emulator, or a real cluster with
``KUBEREFLECTOR_TEST_KUBECONFIG``), becomes Established with the names declared, keeps its
schema exactly as generated (a key the server did not know would be dropped), serves its
objects, its status subresource and its printer columns.

Groups are unique to the run (CRDs are cluster-wide, and other runs share the cluster); each
test deletes the CRDs it made.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import pytest
import pytest_asyncio
from conftest import Target
from msgspec import Meta
from typing_extensions import NotRequired, TypedDict

from kubereflector.cache.listwatch import ListOptions
from kubereflector.client import Client
from kubereflector.errors import InvalidError, NotFoundError
from kubereflector.models import JSONValue, resource_of
from kubereflector.models.crd import (
    CustomResource,
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
    rules,
)
from kubereflector.models.meta_v1 import IntOrString, ObjectMeta, Quantity

RUN = uuid.uuid4().hex[:8]
GROUP = f"kr{RUN}.crd-test.example.com"
SAMPLE_GROUP = f"kr{RUN}.samplecontroller.k8s.io"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"

pytestmark = pytest.mark.asyncio


# -- sample-controller's Foo, in a protected group of the run's own -------------------------------


class FooSpec(TypedDict):
    deploymentName: Annotated[str, Rule("self == oldSelf", message="deploymentName is immutable")]
    replicas: NotRequired[Annotated[int, Meta(ge=1, le=10)]]


class FooStatus(TypedDict):
    availableReplicas: NotRequired[int]


@custom_resource(
    group=SAMPLE_GROUP,
    version="v1alpha1",
    annotations={"api-approved.kubernetes.io": "unapproved, experimental-only"},
    printer_columns=[
        PrinterColumn("Deployment", ".spec.deploymentName"),
        PrinterColumn("Replicas", ".spec.replicas"),
        PrinterColumn("Available", ".status.availableReplicas"),
    ],
    scale=ScaleSubresource(status_replicas_path=".status.availableReplicas"),
)
class Foo(TypedDict):
    """Foo is a specification for a Foo resource."""

    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: FooSpec
    status: NotRequired[FooStatus]


# -- a widget with every feature ------------------------------------------------------------------


class Port(TypedDict):
    """A port the widget listens on."""

    name: Annotated[str, Meta(max_length=15, pattern="^[a-z]([-a-z0-9]*[a-z0-9])?$")]
    """The port's name, unique in the widget."""

    port: Annotated[int, Meta(ge=1, le=65535)]
    protocol: NotRequired[Annotated[Literal["TCP", "UDP"], Default("TCP")]]


@rules(
    Rule(
        "self.min <= self.max",
        message_expression="self.min > self.max ? 'min is above max' : 'bad range'",
        reason="FieldValueInvalid",
        field_path=".min",
    )
)
class Range(TypedDict):
    min: int
    max: int


class Settings(TypedDict):
    mode: NotRequired[Literal["Fast", "Slow"]]


class WidgetSpec(TypedDict):
    """What a widget should be."""

    size: Annotated[int, Meta(gt=0, le=100, multiple_of=2)]
    ratio: NotRequired[Annotated[float, Meta(ge=0, lt=1)]]
    colour: NotRequired[Annotated[str, Meta(min_length=1, max_length=20), Default("blue")]]
    ports: NotRequired[Annotated[list[Port], ListType("map", keys=("name",)), Meta(max_length=8)]]
    tags: NotRequired[Annotated[list[Annotated[str, Meta(max_length=32)]], ListType("set")]]
    aliases: NotRequired[Annotated[list[str], ListType("atomic"), Meta(min_length=1)]]
    labels: NotRequired[Annotated[dict[str, str], MapType("atomic"), Meta(max_length=16)]]
    target: NotRequired[IntOrString]
    memory: NotRequired[Quantity]
    range: NotRequired[Range]
    settings: NotRequired[Annotated[Settings, PreserveUnknownFields()]]
    config: NotRequired[dict[str, JSONValue]]
    anything: NotRequired[JSONValue]
    template: NotRequired[Annotated[dict[str, JSONValue], EmbeddedResource()]]
    started: NotRequired[Annotated[str, Format("date-time")]]
    owner: NotRequired[Annotated[str, Format("email")]]
    note: NotRequired[str | None]
    either: NotRequired[
        Annotated[
            Settings,
            Meta(
                extra_json_schema={
                    "oneOf": [{"required": ["mode"]}, {"not": {"required": ["mode"]}}]
                }
            ),
        ]
    ]


class WidgetStatus(TypedDict):
    replicas: NotRequired[int]
    phase: NotRequired[Literal["Pending", "Ready"]]


@rules(Rule("self.metadata.name.size() <= 40", message="widget names are short"))
@custom_resource(
    group=GROUP,
    version="v1",
    short_names=["wdg"],
    categories=[f"kr{RUN}"],
    printer_columns=[
        PrinterColumn("Size", ".spec.size"),
        PrinterColumn("Phase", ".status.phase", description="where it is"),
        PrinterColumn("Colour", ".spec.colour", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp"),
    ],
    scale=ScaleSubresource(spec_replicas_path=".spec.size"),
)
class Widget(TypedDict):
    """A widget: every feature of a CRD declared in Python."""

    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: WidgetSpec
    status: NotRequired[WidgetStatus]


@custom_resource(group=GROUP, version="v1", scope="Cluster", status=False)
class Zone(TypedDict):
    """A cluster-scoped custom resource without subresources."""

    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: NotRequired[Settings]


# -- two versions of one kind ---------------------------------------------------------------------


class GadgetSpecV1alpha1(TypedDict):
    size: int


class GadgetSpec(TypedDict):
    size: Annotated[int, Meta(ge=1)]
    colour: NotRequired[str]


@custom_resource(group=GROUP, version="v1alpha1", kind="Gadget", short_names=["gd"])
class GadgetV1alpha1(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: GadgetSpecV1alpha1


@custom_resource(group=GROUP, version="v1", storage=True)
class Gadget(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: GadgetSpec


# -- helpers --------------------------------------------------------------------------------------


class Applied:
    """CRDs applied by one test, deleted when it ends."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.names: list[str] = []

    async def apply(self, model: type) -> dict[str, Any]:
        """Create the CRD of ``model``; wait until the server says it is Established."""
        manifest = crd_manifest(model)
        name = manifest["metadata"]["name"]
        await self.client.create(CRDS, manifest)
        self.names.append(name)
        return await asyncio.wait_for(self.established(name), 30)

    async def established(self, name: str) -> dict[str, Any]:
        options = ListOptions(field_selector=f"metadata.name={name}")
        while True:  # a watch ends with its timeout: open another
            async with self.client.watch(CRDS, options) as events:
                async for event in events:
                    conditions = (event.object.get("status") or {}).get("conditions") or []
                    if any(
                        c["type"] == "Established" and c["status"] == "True" for c in conditions
                    ):
                        return dict(event.object)

    async def delete_all(self) -> None:
        for name in self.names:
            with contextlib.suppress(NotFoundError):
                await self.client.delete(f"{CRDS}/{name}")


@pytest_asyncio.fixture
async def applied(target: Target) -> AsyncIterator[Applied]:
    crds = Applied(target.client)
    try:
        yield crds
    finally:
        await crds.delete_all()


def objects_path(resource: CustomResource, target: Target, version: str | None = None) -> str:
    api = f"/apis/{resource.group}/{version or resource.storage}"
    if resource.scope == "Cluster":
        return f"{api}/{resource.plural}"
    return f"{api}/namespaces/{target.namespace}/{resource.plural}"


def assert_accepted_as_generated(stored: dict[str, Any], model: type) -> None:
    """The server has the CRD with the names and schemas we generated, nothing dropped."""
    manifest = crd_manifest(model)
    resource = custom_resource_of(model)
    accepted = stored["status"]["acceptedNames"]
    assert accepted["kind"] == resource.kind
    assert accepted["plural"] == resource.plural
    assert accepted.get("shortNames", []) == list(resource.short_names)
    assert accepted.get("categories", []) == list(resource.categories)
    assert stored["spec"]["scope"] == resource.scope
    assert stored["status"]["storedVersions"] == [resource.storage]
    sent = {v["name"]: v for v in manifest["spec"]["versions"]}
    kept = {v["name"]: v for v in stored["spec"]["versions"]}
    assert list(kept) == list(sent)
    for name, version in sent.items():
        for key in ("served", "storage", "schema", "subresources", "additionalPrinterColumns"):
            assert kept[name].get(key) == version.get(key), (name, key)


# -- the tests ------------------------------------------------------------------------------------


async def test_sample_controllers_foo_is_accepted_and_serves_foos(
    target: Target, applied: Applied
) -> None:
    stored = await applied.apply(Foo)
    assert_accepted_as_generated(stored, Foo)
    assert stored["metadata"]["annotations"]["api-approved.kubernetes.io"].startswith("unapproved")
    resource = custom_resource_of(Foo)
    path = objects_path(resource, target)
    foo: Foo = {
        "apiVersion": resource_of(Foo).api_version,
        "kind": "Foo",
        "metadata": {"name": "example-foo"},
        "spec": {"deploymentName": "example-foo", "replicas": 1},
    }
    created = await target.client.create(path, foo)
    assert created["spec"] == foo["spec"]
    status = {**created, "status": {"availableReplicas": 1}}
    updated = await target.client.update(f"{path}/example-foo/status", status)
    assert updated["status"] == {"availableReplicas": 1}
    read = await target.client.get(f"{path}/example-foo")
    assert read["spec"] == foo["spec"]
    assert read["status"] == {"availableReplicas": 1}
    table = await target.client.request("GET", path, accept=TABLE)
    assert isinstance(table, dict)
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns == ["Name", "Deployment", "Replicas", "Available"]
    assert table["rows"][0]["cells"] == ["example-foo", "example-foo", 1, 1]


async def test_a_crd_with_every_feature_is_accepted_and_serves_widgets(
    target: Target, applied: Applied
) -> None:
    stored = await applied.apply(Widget)
    assert_accepted_as_generated(stored, Widget)
    schema = stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]["properties"]
    assert spec["ports"]["x-kubernetes-list-type"] == "map"
    assert spec["target"]["x-kubernetes-int-or-string"] is True
    assert schema["x-kubernetes-validations"][0]["message"] == "widget names are short"
    resource = custom_resource_of(Widget)
    path = objects_path(resource, target)
    widget: Widget = {
        "apiVersion": resource_of(Widget).api_version,
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {
            "size": 4,
            "ratio": 0.5,
            "colour": "red",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            "tags": ["a", "b"],
            "aliases": ["one"],
            "labels": {"team": "x"},
            "target": "50%",
            "memory": "1Gi",
            "range": {"min": 1, "max": 2},
            "settings": {"mode": "Fast"},
            "config": {"nested": {"deep": [1, 2]}},
            "anything": ["x", 1],
            "template": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "inner"},
                "data": {"k": "v"},
            },
            "started": "2024-01-01T00:00:00Z",
            "owner": "someone@example.com",
            "note": "hello",
            "either": {"mode": "Slow"},
        },
    }
    created = await target.client.create(path, widget)
    assert created["spec"] == widget["spec"]
    read = await target.client.get(f"{path}/w1")
    assert read["spec"] == widget["spec"]
    table = await target.client.request("GET", path, accept=TABLE)
    assert isinstance(table, dict)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Size",
        "Phase",
        "Colour",
        "Age",
    ]


async def test_a_cluster_scoped_crd_serves_cluster_wide_objects(
    target: Target, applied: Applied
) -> None:
    stored = await applied.apply(Zone)
    assert_accepted_as_generated(stored, Zone)
    assert "subresources" not in stored["spec"]["versions"][0]
    path = objects_path(custom_resource_of(Zone), target)
    name = f"zone-{RUN}"
    zone: Zone = {
        "apiVersion": resource_of(Zone).api_version,
        "kind": "Zone",
        "metadata": {"name": name},
        "spec": {"mode": "Fast"},
    }
    created = await target.client.create(path, zone)
    assert "namespace" not in created["metadata"]
    assert (await target.client.get(f"{path}/{name}"))["spec"] == {"mode": "Fast"}


async def test_two_versions_make_one_crd_with_one_storage_version(
    target: Target, applied: Applied
) -> None:
    stored = await applied.apply(GadgetV1alpha1)
    assert_accepted_as_generated(stored, Gadget)
    versions = {v["name"]: (v["served"], v["storage"]) for v in stored["spec"]["versions"]}
    assert versions == {"v1": (True, True), "v1alpha1": (True, False)}
    assert stored["status"]["acceptedNames"]["shortNames"] == ["gd"]
    resource = custom_resource_of(Gadget)
    assert resource.storage_version.model is Gadget
    path = objects_path(resource, target)
    gadget: Gadget = {
        "apiVersion": resource_of(Gadget).api_version,
        "kind": "Gadget",
        "metadata": {"name": "g1"},
        "spec": {"size": 3, "colour": "green"},
    }
    await target.client.create(path, gadget)
    read = await target.client.get(f"{path}/g1")
    assert read["apiVersion"] == f"{GROUP}/v1"
    assert read["spec"] == {"size": 3, "colour": "green"}


async def test_the_generated_schema_defaults_and_validates_widgets(
    target: Target, applied: Applied
) -> None:
    await applied.apply(Widget)
    path = objects_path(custom_resource_of(Widget), target)
    api_version = resource_of(Widget).api_version
    minimal: Widget = {
        "apiVersion": api_version,
        "kind": "Widget",
        "metadata": {"name": "minimal"},
        "spec": {"size": 2, "ports": [{"name": "http", "port": 80}]},
    }
    created = await target.client.create(path, minimal)
    assert created["spec"]["colour"] == "blue"  # Default("blue")
    assert created["spec"]["ports"] == [{"name": "http", "port": 80, "protocol": "TCP"}]
    odd: Widget = {**minimal, "metadata": {"name": "odd"}, "spec": {"size": 3}}
    with pytest.raises(InvalidError) as caught:
        await target.client.create(path, odd)
    assert "spec.size" in str(caught.value)  # Meta(multiple_of=2)
    inverted: Widget = {
        **minimal,
        "metadata": {"name": "inverted"},
        "spec": {"size": 2, "range": {"min": 3, "max": 1}},
    }
    with pytest.raises(InvalidError) as caught:
        await target.client.create(path, inverted)
    assert "min is above max" in str(caught.value)  # the Rule's message_expression
