"""CRD conversion webhooks, hub and spoke (controller-runtime's ``conversion`` package):
one *hub* version of a kind and, for every other served version (a *spoke*), a function
to the hub and one from it. Converting between two spokes goes through the hub, so n
versions need 2(n-1) functions, not n(n-1).

::

    conversion = Conversion(FooV1)                      # the hub: a registered model
    conversion.spoke(FooV1alpha1, to_hub=alpha_to_v1, from_hub=v1_to_alpha)

The functions are plain functions on data: each gets a private deep copy of the object
(it may change and return it) and returns the object of the other version; the server
sets ``apiVersion`` (and ``kind`` and ``metadata`` when the function left them out), and
the API server keeps only ``labels`` and ``annotations`` of the returned metadata.
Converting to a version and back must give the object back on the fields both versions
have: what one version cannot hold, keep in an annotation.

:func:`review_conversion` answers an ``apiextensions.k8s.io/v1`` ``ConversionReview``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar, cast

import msgspec

from ..._aio.calls import is_coroutine_callable
from ...models import resource_of
from .admission import ReviewError, _review_of

__all__ = [
    "CONVERSION_REVIEW_VERSION",
    "Conversion",
    "ConversionError",
    "review_conversion",
]

logger = logging.getLogger("kubereflector.runtime.webhooks")

H = TypeVar("H")
S = TypeVar("S")

CONVERSION_REVIEW_VERSION: Final = "apiextensions.k8s.io/v1"
"""The only ``ConversionReview`` version served (``conversionReviewVersions: [v1]``)."""

_ENCODER: Final = msgspec.json.Encoder()
_decode: Final = msgspec.json.decode


class ConversionError(ValueError):
    """An object cannot be converted: an unknown group, kind or version, or a converter
    that failed or returned something other than an object (the message says which)."""


@dataclass(frozen=True, slots=True)
class _Spoke:
    to_hub: Callable[[Any], Any]
    from_hub: Callable[[Any], Any]


class Conversion(Generic[H]):
    """The conversions of one custom resource kind, through the ``hub`` version (a model
    registered with :func:`kubereflector.models.register`, which gives the group, kind
    and plural). Register each other version with :meth:`spoke`.

    Thread-safety: register before serving; :meth:`convert` may then run on any thread.
    """

    def __init__(self, hub: type[H]) -> None:
        resource = resource_of(hub)
        self.hub: Final = hub
        self.group: Final = resource.group
        self.kind: Final = resource.kind
        self.plural: Final = resource.plural
        self.hub_version: Final = resource.version
        self._spokes: dict[str, _Spoke] = {}

    @property
    def crd_name(self) -> str:
        """The name of the CustomResourceDefinition (``plural.group``)."""
        return f"{self.plural}.{self.group}"

    @property
    def versions(self) -> tuple[str, ...]:
        """The hub's version, then the spokes' in registration order."""
        return (self.hub_version, *self._spokes)

    def spoke(
        self, model: type[S], *, to_hub: Callable[[S], H], from_hub: Callable[[H], S]
    ) -> None:
        """Serve ``model``'s version (a registered model of the same group and kind) through
        ``to_hub`` and ``from_hub``. Raises ``ValueError`` for a model of another kind or
        group, the hub's own version, or a version registered already; ``TypeError`` when a
        function is not callable or is a coroutine function (conversions are plain
        functions on data)."""
        resource = resource_of(model)
        if (resource.group, resource.kind) != (self.group, self.kind):
            raise ValueError(
                f"{model.__name__} is a {resource.kind} of {resource.group or 'the core group'}, "
                f"not a {self.kind} of {self.group}: a conversion is between versions of one kind"
            )
        if resource.version == self.hub_version:
            raise ValueError(f"{resource.version} is the hub's version: it needs no conversion")
        if resource.version in self._spokes:
            raise ValueError(f"{self.kind} {resource.version} has its conversion already")
        for name, fn in (("to_hub", to_hub), ("from_hub", from_hub)):
            if not callable(fn):
                raise TypeError(f"{name} must be a function, not {fn!r}")
            if is_coroutine_callable(fn):
                raise TypeError(f"{name} must be a plain function: conversions run on data only")
        self._spokes[resource.version] = _Spoke(to_hub, from_hub)

    def convert(self, obj: Mapping[str, Any], api_version: str) -> dict[str, Any]:
        """``obj`` (an object of this kind in any of its versions) in ``api_version``
        (``group/version``). ``obj`` is not modified. Raises :class:`ConversionError`
        naming the object and the versions when it cannot be converted."""
        source = obj.get("apiVersion")
        target_group, _, target = str(api_version).rpartition("/")
        if target_group != self.group:
            raise ConversionError(f"{api_version} is not a version of {self.group}")
        group, _, version = str(source or "").rpartition("/")
        if group != self.group or obj.get("kind") != self.kind:
            raise ConversionError(
                f"{self._name(obj)} is a {obj.get('kind')!r} of {source!r}, not a {self.kind} "
                f"of {self.group}"
            )
        for wanted in (version, target):
            if wanted != self.hub_version and wanted not in self._spokes:
                raise ConversionError(
                    f"{self.kind} has no conversion for version {wanted!r} "
                    f"(known: {', '.join(self.versions)})"
                )
        current = _copy(obj)
        if version == target:
            return current
        try:
            if version != self.hub_version:
                current = self._step(self._spokes[version].to_hub, current, self.hub_version)
            if target != self.hub_version:
                current = self._step(self._spokes[target].from_hub, current, target)
        except ConversionError:
            raise
        except Exception as exc:
            logger.error(
                "converting %s from %s to %s raised %s",
                self._name(obj),
                version,
                target,
                type(exc).__name__,
                exc_info=exc,
            )
            raise ConversionError(
                f"converting {self._name(obj)} from {version} to {target} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        return current

    def _step(self, fn: Callable[[Any], Any], obj: dict[str, Any], version: str) -> dict[str, Any]:
        metadata = obj.get("metadata")
        out = fn(obj)
        if not isinstance(out, dict):
            raise ConversionError(
                f"the conversion to {self.kind} {version} returned {type(out).__name__}, not an "
                "object"
            )
        out["apiVersion"] = f"{self.group}/{version}"
        out.setdefault("kind", self.kind)
        if "metadata" not in out and metadata is not None:
            out["metadata"] = metadata
        return out

    @staticmethod
    def _name(obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        namespace, name = meta.get("namespace"), meta.get("name")
        return f"{namespace}/{name}" if namespace else str(name or "an object")

    def __repr__(self) -> str:
        return f"<Conversion {self.crd_name} hub={self.hub_version} versions={self.versions}>"


def _copy(obj: Mapping[str, Any]) -> dict[str, Any]:
    return cast("dict[str, Any]", _decode(_ENCODER.encode(obj)))


def review_conversion(conversions: Mapping[tuple[str, str], Conversion[Any]], body: bytes) -> bytes:
    """Answer the ``ConversionReview`` ``body``: each object converted by the
    :class:`Conversion` of its group and kind (``conversions`` maps ``(group, kind)`` to
    it). A failure to convert one object fails the review (``result.status: Failure``,
    the message naming the object); raises :class:`ReviewError` for a body that is not an
    ``apiextensions.k8s.io/v1`` ``ConversionReview`` with a ``uid``. Runs the converters
    on the calling thread."""
    request = _review_of(body, "ConversionReview", CONVERSION_REVIEW_VERSION)["request"]
    uid = request.get("uid")
    desired = request.get("desiredAPIVersion")
    objects = request.get("objects")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("the ConversionReview request has no uid")
    if not isinstance(desired, str) or "/" not in desired:
        raise ReviewError("request.desiredAPIVersion must be a group/version")
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        raise ReviewError("request.objects must be a list of objects")
    converted: list[dict[str, Any]] = []
    result: dict[str, Any] = {"status": "Success"}
    try:
        for obj in objects:
            group = str(obj.get("apiVersion") or "").rpartition("/")[0]
            conversion = conversions.get((group, str(obj.get("kind"))))
            if conversion is None:
                raise ConversionError(
                    f"no conversion of {obj.get('kind')!r} in {group or 'the core group'} is "
                    "served here"
                )
            converted.append(conversion.convert(obj, desired))
    except ConversionError as exc:
        converted = []
        result = {"status": "Failure", "message": str(exc)}
    response = {"uid": uid, "convertedObjects": converted, "result": result}
    return _ENCODER.encode(
        {"apiVersion": CONVERSION_REVIEW_VERSION, "kind": "ConversionReview", "response": response}
    )
