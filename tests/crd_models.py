"""Custom resources declared in Python, for the tests of ``kubereflector.models.crd`` and of
``kubereflector crd``: Kubernetes' sample-controller's Foo, and helpers that declare a type
under a group of its own (declarations are global: each test gets fresh names)."""

from __future__ import annotations

import itertools
from typing import Annotated, Any

import pytest
from msgspec import Meta
from typing_extensions import NotRequired, TypedDict

from kubereflector.models import ObjectMeta
from kubereflector.models.crd import (
    CustomResourceVersion,
    StructuralSchemaError,
    custom_resource,
    declaration_of,
)

SAMPLE_GROUP = "samplecontroller.k8s.io"
APPROVAL = {
    "api-approved.kubernetes.io": "unapproved, experimental-only; please get an approval from "
    "Kubernetes API reviewers if you're trying to develop a CRD in the *.k8s.io or "
    "*.kubernetes.io groups"
}


class FooSpec(TypedDict):
    deploymentName: str
    replicas: NotRequired[Annotated[int, Meta(ge=1, le=10)]]


class FooStatus(TypedDict):
    availableReplicas: NotRequired[int]


@custom_resource(group=SAMPLE_GROUP, version="v1alpha1", annotations=APPROVAL)
class Foo(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: FooSpec
    status: NotRequired[FooStatus]


_groups = itertools.count()


def unique_group() -> str:
    """A group no other declaration of this process uses."""
    return f"t{next(_groups)}.example.com"


def declare(model: type, **settings: Any) -> CustomResourceVersion:
    """Declare ``model`` (version ``v1`` of a group of its own unless told otherwise)."""
    settings.setdefault("group", unique_group())
    settings.setdefault("version", "v1")
    custom_resource(**settings)(model)
    return declaration_of(model)


def schema_of(model: type, **settings: Any) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of ``model`` declared as a custom resource."""
    schema: dict[str, Any] = dict(declare(model, **settings).schema())
    return schema


def field_schema(hint: object) -> dict[str, Any]:
    """The schema of a field ``spec`` typed ``hint`` of a custom resource."""
    root = TypedDict("Root", {"spec": hint})  # type: ignore[misc]  # noqa: UP013
    spec: dict[str, Any] = schema_of(root)["properties"]["spec"]
    return spec


def field_error(hint: object) -> str:
    """The message of the :class:`StructuralSchemaError` a field ``spec`` typed ``hint``
    raises."""
    root = TypedDict("Root", {"spec": hint})  # type: ignore[misc]  # noqa: UP013
    version = declare(root)
    with pytest.raises(StructuralSchemaError) as caught:
        version.schema()
    return str(caught.value)
