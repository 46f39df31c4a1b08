"""Declaring custom resources in Python: the declaration (names, scope, versions,
subresources, printer columns), its registration as a model, the versions of one kind
gathered into one CRD, and the manifest (sample-controller's Foo as the golden one)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import yaml
from msgspec import Meta
from typing_extensions import NotRequired, TypedDict

from crd_models import APPROVAL, SAMPLE_GROUP, Foo, declare, unique_group
from kubereflector.models import ApiResource, resource_of
from kubereflector.models.crd import (
    CustomResource,
    PrinterColumn,
    Rule,
    ScaleSubresource,
    StructuralSchemaError,
    crd_manifest,
    custom_resource,
    custom_resource_of,
    declaration_of,
)
from kubereflector.models.meta_v1 import ObjectMeta

SAMPLE_CONTROLLER = Path(
    "/root/kr-apiserver/src/kubernetes/staging/src/k8s.io/sample-controller/artifacts/examples"
)


class Spec(TypedDict):
    replicas: NotRequired[int]
    selector: NotRequired[str]
    started: NotRequired[Annotated[str, Meta(extra_json_schema={"format": "date-time"})]]
    ready: NotRequired[bool]
    size: NotRequired[float]
    labels: NotRequired[dict[str, str]]


class Status(TypedDict):
    replicas: NotRequired[int]
    phase: NotRequired[str]


def resource_class(name: str = "Widget") -> type:
    """A fresh custom resource class (each declaration takes its own)."""
    return TypedDict(  # type: ignore[no-any-return]
        name,
        {
            "apiVersion": NotRequired[str],
            "kind": NotRequired[str],
            "metadata": NotRequired[ObjectMeta],
            "spec": Spec,
            "status": NotRequired[Status],
        },
    )


# -- the declaration ------------------------------------------------------------------------------


def test_a_declared_class_is_a_registered_model() -> None:
    group = unique_group()
    Widget = resource_class()
    assert custom_resource(group=group, version="v1beta1")(Widget) is Widget
    assert resource_of(Widget) == ApiResource(group, "v1beta1", "Widget", "widgets", True)
    declared = declaration_of(Widget)
    assert (declared.kind, declared.plural, declared.singular, declared.list_kind) == (
        "Widget",
        "widgets",
        None,  # not given: the resource's default
        None,
    )
    resource = custom_resource_of(Widget)
    assert (resource.singular, resource.list_kind, resource.short_names) == (
        "widget",
        "WidgetList",
        (),
    )
    assert declared.status is True  # it has a status field
    assert declared.resource == resource_of(Widget)


def test_names_can_be_given() -> None:
    declared = declare(
        resource_class(),
        kind="Gadget",
        plural="gadgetry",
        singular="gizmo",
        list_kind="GadgetCollection",
        short_names=["gd"],
        categories=("all", "toys"),
        scope="Cluster",
    )
    assert declared.resource.kind == "Gadget"
    assert declared.resource.namespaced is False
    names = crd_manifest(declared.model)["spec"]["names"]
    assert names == {
        "kind": "Gadget",
        "listKind": "GadgetCollection",
        "plural": "gadgetry",
        "singular": "gizmo",
        "shortNames": ["gd"],
        "categories": ["all", "toys"],
    }


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Foo", "foos"),
        ("Policy", "policies"),
        ("Day", "days"),
        ("Class", "classes"),
        ("Box", "boxes"),
    ],
)
def test_the_plural_defaults_to_an_english_one(kind: str, plural: str) -> None:
    assert declare(resource_class(), kind=kind).plural == plural


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"group": "example"}, "group='example': should be a domain with at least one dot"),
        ({"group": "Example.com"}, "a DNS subdomain in lower case"),
        ({"version": "V1"}, "version='V1': a DNS-1035 label"),
        ({"kind": "widget"}, "kind='widget': a CamelCase name"),
        ({"kind": "Wid_get"}, "a CamelCase name"),
        ({"plural": "Widgets"}, "plural='Widgets': a DNS-1035 label in lower case"),
        ({"singular": "a.b"}, "singular='a.b'"),
        ({"list_kind": "Widget"}, "kind and list_kind may not be the same"),
        ({"short_names": ["w", "W"]}, "'W' is not a DNS-1035 label"),
        ({"short_names": ["w", "w"]}, "a name is given twice"),
        ({"categories": ["all_"]}, "'all_' is not a DNS-1035 label"),
        ({"scope": "Namespace"}, 'scope=\'Namespace\': use "Namespaced" or "Cluster"'),
        ({"deprecation_warning": "old"}, "needs deprecated=True"),
        ({"deprecated": True, "deprecation_warning": "x" * 257}, "at most 256"),
        ({"printer_columns": ["Age"]}, "each is a PrinterColumn(name, json_path)"),
        (
            {"printer_columns": [PrinterColumn("A", ".spec.ready")] * 2},
            "a name is used twice",
        ),
        ({"scale": ".spec.replicas"}, "a ScaleSubresource(...)"),
        ({"annotations": {"a": 1}}, "keys and values are strings"),
    ],
)
def test_a_declaration_kube_would_refuse_is_refused(settings: dict[str, Any], message: str) -> None:
    Widget = resource_class()
    with pytest.raises(ValueError, match=r"^test_crd\.Widget: ") as caught:
        declare(Widget, **settings)
    assert message in str(caught.value)
    with pytest.raises(LookupError, match="is not a declared custom resource"):
        declaration_of(Widget)


@pytest.mark.parametrize(
    ("group", "annotations"),
    [
        ("x.k8s.io", None),
        ("kubernetes.io", {"other": "annotation"}),
        ("y.kubernetes.io", {"api-approved.kubernetes.io": "yes"}),
    ],
)
def test_a_protected_group_needs_its_approval(
    group: str, annotations: dict[str, str] | None
) -> None:
    declared = declare(resource_class(), group=group, annotations=annotations)
    with pytest.raises(ValueError, match=rf"Widget: the group {group} is protected: "):
        custom_resource_of(declared.model)


@pytest.mark.parametrize(
    "approval",
    ["unapproved, experimental-only", "https://github.com/kubernetes/enhancements/pull/1111"],
)
def test_a_protected_group_is_accepted_with_its_approval(approval: str) -> None:
    declared = declare(
        resource_class(),
        group=f"{unique_group()}.k8s.io",
        annotations={"api-approved.kubernetes.io": approval},
    )
    assert crd_manifest(declared.model)["metadata"]["annotations"] == {
        "api-approved.kubernetes.io": approval
    }


def test_the_status_subresource_follows_the_status_field() -> None:
    class NoStatus(TypedDict):
        spec: Spec

    assert declare(NoStatus).status is False
    assert declare(resource_class(), status=False).status is False
    with pytest.raises(ValueError, match="the status subresource needs a status field"):
        declare(NoStatus, status=True)


def test_a_class_is_declared_once_and_a_version_by_one_class() -> None:
    group = unique_group()
    Widget, Other = resource_class(), resource_class("Other")
    declare(Widget, group=group)
    with pytest.raises(ValueError, match="is declared a custom resource twice"):
        declare(Widget, group=group, version="v2")
    with pytest.raises(ValueError, match=r"Other and test_crd\.Widget both declare version v1 of"):
        declare(Other, group=group, kind="Widget")


def test_a_module_reloaded_declares_its_class_again() -> None:
    group = unique_group()
    old, new = resource_class(), resource_class()  # the same module and name
    declare(old, group=group)
    declare(new, group=group)
    assert custom_resource_of(new).versions == (declaration_of(new),)


def test_what_is_not_declared_is_named() -> None:
    with pytest.raises(LookupError, match=r"test_crd\.Spec is not a declared custom resource"):
        custom_resource_of(Spec)


def test_printer_columns_and_scale_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="type 'text' is not one of integer"):
        PrinterColumn("A", ".spec.a", type="text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="format 'time' is not one of int32"):
        PrinterColumn("A", ".spec.a", format="time")
    with pytest.raises(ValueError, match=r"a JSON path starting with '.'"):
        PrinterColumn("A", "spec.a")
    with pytest.raises(ValueError, match="priority is 0 or more"):
        PrinterColumn("A", ".spec.a", priority=-1)
    with pytest.raises(ValueError, match="needs a name"):
        PrinterColumn("", ".spec.a")
    with pytest.raises(ValueError, match=r"spec_replicas_path is a path under .spec"):
        ScaleSubresource(spec_replicas_path=".status.replicas")
    with pytest.raises(ValueError, match=r"status_replicas_path is a path under .status"):
        ScaleSubresource(status_replicas_path=".spec.replicas")
    with pytest.raises(ValueError, match=r"label_selector_path is a path under .spec or .status"):
        ScaleSubresource(label_selector_path=".metadata.labels")


# -- versions -------------------------------------------------------------------------------------


def test_versions_of_one_kind_make_one_custom_resource() -> None:
    group = unique_group()
    alpha = declare(resource_class(), group=group, version="v1alpha1")
    beta = declare(resource_class(), group=group, version="v1beta1", served=False)
    ga = declare(resource_class(), group=group, version="v1", storage=True)
    other = declare(resource_class(), group=group, version="v2alpha1", deprecated=True)
    resource = custom_resource_of(alpha.model)
    assert isinstance(resource, CustomResource)
    assert resource == custom_resource_of(ga.model)
    assert resource.name == f"widgets.{group}"
    assert [v.version for v in resource.versions] == ["v1", "v1beta1", "v2alpha1", "v1alpha1"]
    assert resource.storage_version is ga
    assert resource.version("v1beta1") is beta
    with pytest.raises(KeyError, match="has no version 'v3' \\(it has v1, v1beta1"):
        resource.version("v3")
    entries = resource.manifest()["spec"]["versions"]
    assert [(e["name"], e["served"], e["storage"]) for e in entries] == [
        ("v1", True, True),
        ("v1beta1", False, False),
        ("v2alpha1", True, False),
        ("v1alpha1", True, False),
    ]
    assert entries[2]["deprecated"] is True
    assert all(
        e["schema"]["openAPIV3Schema"] == entries[0]["schema"]["openAPIV3Schema"] for e in entries
    )
    assert other.model is resource.versions[2].model


def test_versions_need_exactly_one_storage_version() -> None:
    group = unique_group()
    first = declare(resource_class(), group=group, version="v1")
    declare(resource_class(), group=group, version="v2")
    with pytest.raises(ValueError, match=r"exactly one must be declared storage=True \(found 0\)"):
        custom_resource_of(first.model)
    group = unique_group()
    first = declare(resource_class(), group=group, version="v1", storage=True)
    declare(resource_class(), group=group, version="v2", storage=True)
    with pytest.raises(ValueError, match=r"\(found 2\)"):
        custom_resource_of(first.model)
    lonely = declare(resource_class(), storage=False)
    with pytest.raises(ValueError, match=r"\(found 0\)"):
        custom_resource_of(lonely.model)


@pytest.mark.parametrize(("setting", "value"), [("plural", "widgetz"), ("scope", "Cluster")])
def test_versions_have_the_same_plural_and_scope(setting: str, value: object) -> None:
    group = unique_group()
    first = declare(resource_class(), group=group, version="v1", storage=True)
    declare(resource_class(), group=group, version="v2", **{setting: value})
    with pytest.raises(ValueError, match=f"with different {setting}: "):
        custom_resource_of(first.model)


@pytest.mark.parametrize(
    ("setting", "value", "other"),
    [
        ("singular", "gizmo", "gadget"),
        ("list_kind", "WidgetSet", "WidgetBag"),
        ("short_names", ["w"], ["wd"]),
        ("categories", ["all"], ["toys"]),
        ("annotations", {"a": "b"}, {"a": "c"}),
        ("labels", {"a": "b"}, {}),
    ],
)
def test_a_resources_names_may_be_given_on_one_version(
    setting: str, value: object, other: object
) -> None:
    group = unique_group()
    first = declare(resource_class(), group=group, version="v1", storage=True)
    declare(resource_class(), group=group, version="v2alpha1", **{setting: value})
    resource = custom_resource_of(first.model)
    expected = tuple(value) if isinstance(value, list) else value
    assert getattr(resource, setting) == expected
    declare(resource_class(), group=group, version="v2beta1", **{setting: other})
    with pytest.raises(ValueError, match=f"with different {setting}: "):
        custom_resource_of(first.model)


# -- the manifest ---------------------------------------------------------------------------------


def test_the_manifest_holds_each_versions_subresources_and_columns() -> None:
    declared = declare(
        resource_class(),
        labels={"app": "widgets"},
        printer_columns=[
            PrinterColumn("Replicas", ".spec.replicas"),
            PrinterColumn("Ready", ".spec.ready", priority=1),
            PrinterColumn("Size", ".spec.size", description="how big"),
            PrinterColumn("Started", ".spec.started"),
            PrinterColumn("Phase", ".status.phase", format="password"),
            PrinterColumn("Label", ".spec.labels.app"),
            PrinterColumn("Ready?", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Count", ".status.replicas", type="number"),
            PrinterColumn("Age", ".metadata.creationTimestamp"),
            PrinterColumn("Generation", ".metadata.generation"),
        ],
        scale=ScaleSubresource(label_selector_path=".spec.selector"),
    )
    manifest = crd_manifest(declared.model)
    assert manifest["metadata"] == {
        "name": f"widgets.{declared.group}",
        "labels": {"app": "widgets"},
    }
    (version,) = manifest["spec"]["versions"]
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".spec.selector",
        },
    }
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert {name: c["type"] for name, c in columns.items()} == {
        "Replicas": "integer",
        "Ready": "boolean",
        "Size": "number",
        "Started": "date",
        "Phase": "string",
        "Label": "string",
        "Ready?": "string",
        "Count": "number",
        "Age": "date",
        "Generation": "integer",
    }
    assert columns["Ready"]["priority"] == 1
    assert columns["Size"]["description"] == "how big"
    assert columns["Phase"]["format"] == "password"
    assert "priority" not in columns["Replicas"]
    assert "conversion" not in manifest["spec"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"printer_columns": [PrinterColumn("X", ".spec.replica")]},
            "PrinterColumn('X') names .spec.replica, a field Widget does not have",
        ),
        (
            {"scale": ScaleSubresource(spec_replicas_path=".spec.ready")},
            "ScaleSubresource spec_replicas_path names .spec.ready, a field of type boolean, "
            "not integer",
        ),
        (
            {"scale": ScaleSubresource(status_replicas_path=".status.ready")},
            "names .status.ready, a field Widget does not have",
        ),
        (
            {"scale": ScaleSubresource(label_selector_path=".spec.replicas")},
            "label_selector_path names .spec.replicas, a field of type integer, not string",
        ),
    ],
)
def test_paths_into_the_schema_name_its_fields(settings: dict[str, Any], message: str) -> None:
    declared = declare(resource_class(), **settings)
    with pytest.raises(StructuralSchemaError, match=r"^Widget: ") as caught:
        crd_manifest(declared.model)
    assert message in str(caught.value)


def test_a_conversion_is_written_as_given() -> None:
    group = unique_group()
    v1 = declare(resource_class(), group=group, storage=True)
    conversion: Any = {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:9443/convert"},
        },
    }
    manifest = crd_manifest(v1.model, conversion=conversion)
    assert manifest["spec"]["conversion"] == conversion
    assert manifest["spec"]["conversion"] is not conversion


def test_each_call_returns_a_new_schema() -> None:
    declared = declare(resource_class())
    schema = declared.schema()
    schema["properties"] = {}
    assert declared.schema()["properties"] != {}
    manifest = crd_manifest(declared.model)
    copy.deepcopy(manifest)["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clear()
    assert crd_manifest(declared.model) == manifest


def test_a_version_whose_schema_cannot_be_built_names_the_problem() -> None:
    class Bad(TypedDict):
        spec: Literal["a", 1]

    declared = declare(Bad)
    with pytest.raises(StructuralSchemaError, match=r"^Bad\.spec \(at \.spec of Bad\): "):
        crd_manifest(declared.model)


# -- sample-controller's Foo ----------------------------------------------------------------------


GOLDEN_FOO: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "foos.samplecontroller.k8s.io", "annotations": APPROVAL},
    "spec": {
        "group": "samplecontroller.k8s.io",
        "names": {"kind": "Foo", "listKind": "FooList", "plural": "foos", "singular": "foo"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "apiVersion": {
                                "description": "APIVersion defines the versioned schema of this "
                                "representation of an object. Servers should convert recognized "
                                "schemas to the latest internal value, and may reject "
                                "unrecognized values. More info: https://git.k8s.io/community/"
                                "contributors/devel/sig-architecture/api-conventions.md#resources",
                                "type": "string",
                            },
                            "kind": {
                                "description": "Kind is a string value representing the REST "
                                "resource this object represents. Servers may infer this from the "
                                "endpoint the client submits requests to. Cannot be updated. In "
                                "CamelCase. More info: https://git.k8s.io/community/contributors/"
                                "devel/sig-architecture/api-conventions.md#types-kinds",
                                "type": "string",
                            },
                            "metadata": {"type": "object"},
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "deploymentName": {"type": "string"},
                                    "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                                },
                                "required": ["deploymentName"],
                            },
                            "status": {
                                "type": "object",
                                "properties": {"availableReplicas": {"type": "integer"}},
                            },
                        },
                        "required": ["spec"],
                    }
                },
                "subresources": {"status": {}},
            }
        ],
    },
}


def test_sample_controllers_foo_gives_the_golden_crd() -> None:
    assert crd_manifest(Foo) == GOLDEN_FOO
    assert resource_of(Foo) == ApiResource(SAMPLE_GROUP, "v1alpha1", "Foo", "foos", True)


def subset(small: Any, big: Any) -> bool:
    """Whether everything ``small`` says, ``big`` says too."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            k in big and subset(v, big[k]) for k, v in small.items()
        )
    if isinstance(small, list):
        return isinstance(big, list) and len(small) == len(big) and all(map(subset, small, big))
    return bool(small == big)


@pytest.mark.skipif(
    not SAMPLE_CONTROLLER.is_dir(), reason="the Kubernetes source tree is not on this machine"
)
def test_sample_controllers_own_crd_says_nothing_the_generated_one_does_not() -> None:
    theirs = yaml.safe_load((SAMPLE_CONTROLLER / "crd-status-subresource.yaml").read_text())
    assert subset(theirs, crd_manifest(Foo))
    assert not subset({"spec": {"scope": "Cluster"}}, crd_manifest(Foo))  # the check can fail


def test_a_rule_on_the_object_reaches_its_root() -> None:
    from kubereflector.models.crd import rules

    @rules(Rule("self.metadata.name.size() <= 20", message="short names only"))
    class Short(TypedDict):
        metadata: NotRequired[ObjectMeta]
        spec: Spec

    assert declare(Short).schema()["x-kubernetes-validations"] == [
        {"rule": "self.metadata.name.size() <= 20", "message": "short names only"}
    ]


def test_the_schema_machinery_loads_with_the_first_schema() -> None:
    code = (
        "import sys, kubereflector.models\n"
        "print('kubereflector.models.crd' in sys.modules)\n"
        "import kubereflector.models.crd\n"
        "print('kubereflector.models._crd.schema' in sys.modules)\n"
        "sys.path.insert(0, 'tests')\n"
        "import crd_models\n"
        "kubereflector.models.crd.crd_manifest(crd_models.Foo)\n"
        "print('kubereflector.models._crd.schema' in sys.modules)\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=20,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert loaded.stdout.split() == ["False", "False", "True"]
