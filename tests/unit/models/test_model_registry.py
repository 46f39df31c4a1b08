"""kubereflector.models' registry: which resource a model class is served as."""

from __future__ import annotations

import pytest
from typing_extensions import TypedDict

from kubereflector.models import ApiResource, Pod, register, resource_of

WIDGETS = ApiResource("example.com", "v1", "Widget", "widgets", namespaced=True)


def test_an_api_resource_says_its_api_version() -> None:
    assert WIDGETS.api_version == "example.com/v1"
    assert ApiResource("", "v1", "Pod", "pods", namespaced=True).api_version == "v1"


@pytest.mark.parametrize("empty", ["version", "kind", "plural"])
def test_an_api_resource_needs_a_version_a_kind_and_a_plural(empty: str) -> None:
    fields = {"group": "example.com", "version": "v1", "kind": "Widget", "plural": "widgets"}
    with pytest.raises(ValueError, match=f"ApiResource needs a {empty}"):
        ApiResource(**{**fields, empty: ""}, namespaced=True)


def test_a_registered_model_has_its_resource() -> None:
    class Widget(TypedDict):
        size: int

    register(Widget, WIDGETS)
    assert resource_of(Widget) is WIDGETS
    register(Widget, ApiResource("example.com", "v1", "Widget", "widgets", namespaced=True))
    with pytest.raises(ValueError, match=r"\.Widget is already registered as ApiResource\("):
        register(Widget, ApiResource("example.com", "v2", "Widget", "widgets", namespaced=True))
    assert resource_of(Widget) is WIDGETS


def test_a_model_of_your_own_may_share_a_built_in_resource() -> None:
    class SlimPod(TypedDict):
        metadata: dict[str, str]

    register(SlimPod, resource_of(Pod))
    assert resource_of(SlimPod) == resource_of(Pod)


def test_an_unregistered_class_is_named() -> None:
    class Gadget(TypedDict):
        size: int

    with pytest.raises(LookupError, match=r"test_model_registry\..*Gadget is not a registered"):
        resource_of(Gadget)
    with pytest.raises(LookupError, match="is not a registered model"):
        resource_of({"kind": "Pod"})  # type: ignore[arg-type]


def test_register_takes_a_class_and_an_api_resource() -> None:
    with pytest.raises(TypeError, match="takes a model class, not 'Widget'"):
        register("Widget", WIDGETS)  # type: ignore[arg-type]

    class Widget(TypedDict):
        size: int

    with pytest.raises(TypeError, match=r"takes an ApiResource for .*Widget, not \('example"):
        register(Widget, ("example.com", "v1"))  # type: ignore[arg-type]
