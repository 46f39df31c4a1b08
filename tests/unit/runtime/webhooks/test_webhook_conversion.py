"""Hub-and-spoke conversion (kubereflector.runtime.webhooks.conversion): round trips,
conversions between spokes through the hub, the ConversionReview answer and its error
paths."""

from __future__ import annotations

import json
from typing import Any, TypedDict

import pytest

from kubereflector.models import ApiResource, register
from kubereflector.runtime.webhooks import (
    Conversion,
    ConversionError,
    ReviewError,
    Webhooks,
    review_conversion,
)

GROUP = "conversion.test.example.com"


class GizmoV2(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


class GizmoV1(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


class GizmoV1beta1(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


class Other(TypedDict, total=False):
    apiVersion: str


register(GizmoV2, ApiResource(GROUP, "v2", "Gizmo", "gizmos", True))
register(GizmoV1, ApiResource(GROUP, "v1", "Gizmo", "gizmos", True))
register(GizmoV1beta1, ApiResource(GROUP, "v1beta1", "Gizmo", "gizmos", True))
register(Other, ApiResource(GROUP, "v1", "Other", "others", True))


# v2 (hub): spec.size {value, unit}; v1: spec.size "3Gi"; v1beta1: spec.sizeGi 3
def v1_to_hub(obj: GizmoV1) -> GizmoV2:
    spec = obj["spec"]
    value = spec.pop("size")
    spec["size"] = {"value": int(value[:-2]), "unit": value[-2:]}
    return GizmoV2(**obj)  # type: ignore[typeddict-item]


def hub_to_v1(obj: GizmoV2) -> GizmoV1:
    spec = obj["spec"]
    size = spec.pop("size")
    spec["size"] = f"{size['value']}{size['unit']}"
    return GizmoV1(**obj)  # type: ignore[typeddict-item]


def beta_to_hub(obj: GizmoV1beta1) -> GizmoV2:
    spec = obj["spec"]
    spec["size"] = {"value": spec.pop("sizeGi"), "unit": "Gi"}
    return GizmoV2(**obj)  # type: ignore[typeddict-item]


def hub_to_beta(obj: GizmoV2) -> GizmoV1beta1:
    spec = obj["spec"]
    spec["sizeGi"] = spec.pop("size")["value"]
    return GizmoV1beta1(**obj)  # type: ignore[typeddict-item]


def gizmos() -> Conversion[GizmoV2]:
    conversion = Conversion(GizmoV2)
    conversion.spoke(GizmoV1, to_hub=v1_to_hub, from_hub=hub_to_v1)
    conversion.spoke(GizmoV1beta1, to_hub=beta_to_hub, from_hub=hub_to_beta)
    return conversion


def gizmo(version: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "Gizmo",
        "metadata": {"name": "g", "namespace": "ns", "uid": "1", **meta},
        "spec": {"colour": "blue", **spec},
    }


def test_a_spoke_goes_to_the_hub_and_back_unchanged() -> None:
    conversion = gizmos()
    original = gizmo("v1", {"size": "3Gi"}, labels={"a": "b"})
    hub = conversion.convert(original, f"{GROUP}/v2")
    assert hub == gizmo("v2", {"size": {"value": 3, "unit": "Gi"}}, labels={"a": "b"})
    assert conversion.convert(hub, f"{GROUP}/v1") == original
    assert original == gizmo("v1", {"size": "3Gi"}, labels={"a": "b"})  # not modified


def test_spokes_convert_to_each_other_through_the_hub() -> None:
    conversion = gizmos()
    beta = conversion.convert(gizmo("v1", {"size": "7Gi"}), f"{GROUP}/v1beta1")
    assert beta == gizmo("v1beta1", {"sizeGi": 7})
    assert conversion.convert(beta, f"{GROUP}/v1") == gizmo("v1", {"size": "7Gi"})


def test_the_same_version_is_a_copy() -> None:
    original = gizmo("v1", {"size": "1Gi"})
    copy = gizmos().convert(original, f"{GROUP}/v1")
    assert copy == original
    assert copy is not original


def test_conversions_name_what_they_cannot_convert() -> None:
    conversion = gizmos()
    with pytest.raises(ConversionError, match="has no conversion for version 'v3'"):
        conversion.convert(gizmo("v1", {"size": "1Gi"}), f"{GROUP}/v3")
    with pytest.raises(ConversionError, match="not a version of"):
        conversion.convert(gizmo("v1", {"size": "1Gi"}), "elsewhere.io/v1")
    with pytest.raises(ConversionError, match="is a 'Thing'"):
        conversion.convert({**gizmo("v1", {}), "kind": "Thing"}, f"{GROUP}/v2")


def test_a_converter_that_fails_is_reported_with_the_object(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conversion = gizmos()
    with pytest.raises(ConversionError) as failed:
        conversion.convert(gizmo("v1", {"size": "big"}), f"{GROUP}/v2")
    assert str(failed.value) == (
        "converting ns/g from v1 to v2 failed: ValueError: invalid literal for int() with "
        "base 10: 'b'"
    )
    assert any(r.exc_info for r in caplog.records)


def test_a_converter_must_return_an_object() -> None:
    conversion = Conversion(GizmoV2)
    conversion.spoke(GizmoV1, to_hub=lambda obj: None, from_hub=hub_to_v1)  # type: ignore[arg-type,return-value]
    with pytest.raises(ConversionError, match="returned NoneType, not an object"):
        conversion.convert(gizmo("v1", {"size": "1Gi"}), f"{GROUP}/v2")


def test_the_server_sets_api_version_kind_and_metadata() -> None:
    conversion = Conversion(GizmoV2)
    conversion.spoke(
        GizmoV1,
        to_hub=lambda obj: {"spec": obj["spec"]},  # type: ignore[typeddict-item]
        from_hub=hub_to_v1,
    )
    out = conversion.convert(gizmo("v1", {"size": "1Gi"}), f"{GROUP}/v2")
    assert out["apiVersion"] == f"{GROUP}/v2"
    assert out["kind"] == "Gizmo"
    assert out["metadata"]["name"] == "g"


def test_spokes_are_checked() -> None:
    conversion = Conversion(GizmoV2)
    with pytest.raises(ValueError, match="a conversion is between versions of one kind"):
        conversion.spoke(Other, to_hub=v1_to_hub, from_hub=hub_to_v1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="the hub's version"):
        conversion.spoke(GizmoV2, to_hub=lambda o: o, from_hub=lambda o: o)
    conversion.spoke(GizmoV1, to_hub=v1_to_hub, from_hub=hub_to_v1)
    with pytest.raises(ValueError, match="has its conversion already"):
        conversion.spoke(GizmoV1, to_hub=v1_to_hub, from_hub=hub_to_v1)

    async def coroutine(obj: GizmoV1beta1) -> GizmoV2:
        return beta_to_hub(obj)

    with pytest.raises(TypeError, match="plain function"):
        conversion.spoke(GizmoV1beta1, to_hub=coroutine, from_hub=hub_to_beta)  # type: ignore[arg-type]
    assert conversion.versions == ("v2", "v1")
    assert conversion.crd_name == f"gizmos.{GROUP}"


def test_a_kind_has_one_hub() -> None:
    hooks = Webhooks()
    hooks.converter(GizmoV2, GizmoV1, to_hub=v1_to_hub, from_hub=hub_to_v1)
    with pytest.raises(ValueError, match="a kind has one hub"):
        hooks.converter(GizmoV1, GizmoV1beta1, to_hub=beta_to_hub, from_hub=hub_to_beta)  # type: ignore[arg-type]
    hooks.converter(GizmoV2, GizmoV1beta1, to_hub=beta_to_hub, from_hub=hub_to_beta)
    (conversion,) = hooks.conversions
    assert conversion.versions == ("v2", "v1", "v1beta1")


def review(desired: str, *objects: dict[str, Any], uid: str = "u-1") -> bytes:
    return json.dumps(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": list(objects)},
        }
    ).encode()


def answer_of(body: bytes) -> dict[str, Any]:
    decoded = json.loads(body)
    assert (decoded["apiVersion"], decoded["kind"]) == (
        "apiextensions.k8s.io/v1",
        "ConversionReview",
    )
    return dict(decoded["response"])


def test_a_review_converts_every_object() -> None:
    kinds = {(GROUP, "Gizmo"): gizmos()}
    body = review(
        f"{GROUP}/v1",
        gizmo("v1beta1", {"sizeGi": 2}),
        gizmo("v2", {"size": {"value": 5, "unit": "Gi"}}),
    )
    assert answer_of(review_conversion(kinds, body)) == {
        "uid": "u-1",
        "convertedObjects": [gizmo("v1", {"size": "2Gi"}), gizmo("v1", {"size": "5Gi"})],
        "result": {"status": "Success"},
    }


def test_a_review_that_cannot_be_converted_fails_with_the_reason() -> None:
    kinds = {(GROUP, "Gizmo"): gizmos()}
    failed = answer_of(review_conversion(kinds, review(f"{GROUP}/v1", gizmo("v9", {}))))
    assert failed["convertedObjects"] == []
    assert failed["result"]["status"] == "Failure"
    assert "has no conversion for version 'v9'" in failed["result"]["message"]
    unknown = answer_of(review_conversion({}, review(f"{GROUP}/v1", gizmo("v1", {}))))
    assert unknown["result"]["message"] == f"no conversion of 'Gizmo' in {GROUP} is served here"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{}", "expected a apiextensions.k8s.io/v1 ConversionReview"),
        (
            b'{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":{}}',
            "only apiextensions.k8s.io/v1 is served",
        ),
        (
            b'{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{}}',
            "has no uid",
        ),
        (
            b'{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview",'
            b'"request":{"uid":"u","desiredAPIVersion":"v1"}}',
            "desiredAPIVersion must be a group/version",
        ),
        (
            b'{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview",'
            b'"request":{"uid":"u","desiredAPIVersion":"a/v1","objects":[1]}}',
            "objects must be a list of objects",
        ),
    ],
)
def test_bad_conversion_reviews_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(ReviewError, match=message):
        review_conversion({}, body)
