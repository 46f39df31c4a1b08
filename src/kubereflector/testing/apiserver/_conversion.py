"""Every served version of a CustomResourceDefinition, and the conversion between them, as
kube-apiserver's apiextensions server does it: objects are stored in the storage version
and answered in the version a request addresses, converted by rewriting their
``apiVersion`` (``conversion.strategy: None``) or by the CRD's conversion webhook
(``Webhook``: an ``apiextensions.k8s.io/v1`` ``ConversionReview`` of the objects not in
the wanted version, the answer checked as kube checks it, metadata but labels and
annotations kept from the original).

:func:`install` serves a CRD's other versions when it is stored (discovery, OpenAPI,
routing); :class:`Conversions` converts. Objects keep the version they were stored in
(after a change of the storage version, older ones stay in theirs until written again),
so every read converts what is not in the wanted version, then prunes and defaults
it by that version's schema (as kube's decoding of a custom resource does).

Private to :mod:`kubereflector.testing.apiserver`. Event loop only.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ...errors import failure_status
from ._records import ENCODER, Bucket, Record
from ._resources import DEFAULT_VERBS, ServedResource
from ._statuses import StatusError
from ._store import Store
from ._strategy import coerce_custom
from ._webhook_client import CallFailed, WebhookCaller

__all__ = ["Conversions", "CrdConversion", "install"]

_decode: Final = msgspec.json.decode


def _copy(obj: Mapping[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = _decode(ENCODER.encode(obj))
    return copied


_CONVERSION_TIMEOUT: Final = 30.0
"""Seconds a conversion webhook may take (kube's webhook client default)."""


@dataclass(frozen=True, slots=True)
class CrdConversion:
    """A CRD's ``spec.conversion``: ``strategy`` ``None`` or ``Webhook`` (with its
    ``clientConfig`` and ``conversionReviewVersions``)."""

    crd: str
    kind: str
    strategy: str = "None"
    client_config: Mapping[str, Any] | None = None
    review_versions: tuple[str, ...] = ()

    @classmethod
    def of(cls, crd: Mapping[str, Any]) -> CrdConversion:
        spec = crd.get("spec") or {}
        conversion = spec.get("conversion") or {}
        webhook = conversion.get("webhook") or {}
        return cls(
            crd=str(crd["metadata"]["name"]),
            kind=str((spec.get("names") or {}).get("kind") or ""),
            strategy=str(conversion.get("strategy") or "None"),
            client_config=webhook.get("clientConfig"),
            review_versions=tuple(webhook.get("conversionReviewVersions") or ()),
        )


def _served_versions(crd: Mapping[str, Any], storage: ServedResource) -> list[ServedResource]:
    """A CRD's served versions other than its storage one, as the emulator serves them."""
    spec = crd["spec"]
    names = spec["names"]
    found = []
    for version in spec.get("versions") or []:
        if not isinstance(version, Mapping) or not version.get("served"):
            continue
        if version.get("name") == storage.version:
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        subresources = version.get("subresources") or {}
        found.append(
            ServedResource(
                spec["group"],
                str(version["name"]),
                names["plural"],
                names["kind"],
                namespaced=spec["scope"] == "Namespaced",
                singular=names.get("singular") or names["kind"].lower(),
                short_names=tuple(names.get("shortNames") or ()),
                verbs=DEFAULT_VERBS,
                categories=tuple(names.get("categories") or ()),
                subresources=("status",) if "status" in subresources else (),
                openapi_schema=schema if isinstance(schema, Mapping) else None,
                printer_columns=tuple(
                    c
                    for c in version.get("additionalPrinterColumns") or []
                    if isinstance(c, Mapping)
                ),
            )
        )
    return found


def install(store: Store, conversions: Conversions) -> None:
    """Serve every served version of each CRD stored in ``store`` (after the CRD
    observer of :mod:`._crd`, which serves its storage version), and keep its
    conversion for ``conversions``."""

    def observe(bucket: Bucket, event_type: str, record: Record) -> None:
        if bucket.info.group_resource != "customresourcedefinitions.apiextensions.k8s.io":
            return
        crd = record.obj
        spec = crd.get("spec") or {}
        resource = f"{(spec.get('names') or {}).get('plural')}.{spec.get('group')}"
        served = store.buckets.get(resource)
        if event_type == "DELETED" or served is None:
            store.set_versions(resource, [])
            conversions.by_resource.pop(resource, None)
            return
        store.set_versions(resource, _served_versions(crd, served.info))
        conversions.by_resource[resource] = CrdConversion.of(crd)

    store.observers.append(observe)


class Conversions:
    """Converts custom resources between the versions of their CRD (see the module
    documentation)."""

    def __init__(self, caller: WebhookCaller) -> None:
        self.caller = caller
        self.by_resource: dict[str, CrdConversion] = {}

    def needs(self, objs: Sequence[Mapping[str, Any]], info: ServedResource) -> bool:
        """Whether any of ``objs`` is in another version than ``info``'s."""
        api_version = info.api_version
        return any(obj.get("apiVersion") != api_version for obj in objs)

    async def convert(
        self, info: ServedResource, objs: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """``objs`` (objects of ``info``'s resource) in ``info``'s version; those already in
        it are returned as they are (not copied). Raises :class:`~._statuses.StatusError`
        (500) when the conversion webhook fails."""
        target = info.api_version
        pending = [i for i, obj in enumerate(objs) if obj.get("apiVersion") != target]
        out = [obj if isinstance(obj, dict) else dict(obj) for obj in objs]
        if not pending:
            return out
        conversion = self.by_resource.get(info.group_resource)
        if conversion is None or conversion.strategy != "Webhook":
            converted = [_copy({**objs[i], "apiVersion": target}) for i in pending]
        else:
            converted = await self._webhook(conversion, [objs[i] for i in pending], target)
        for i, obj in zip(pending, converted, strict=True):
            coerce_custom(info, obj)  # pruned and defaulted by that version's schema, as kube reads
            out[i] = obj
        return out

    async def convert_one(self, info: ServedResource, obj: Mapping[str, Any]) -> dict[str, Any]:
        """``obj`` in ``info``'s version (see :meth:`convert`)."""
        return (await self.convert(info, [obj]))[0]

    async def _webhook(
        self, conversion: CrdConversion, objs: Sequence[Mapping[str, Any]], target: str
    ) -> list[dict[str, Any]]:
        first = objs[0]
        gvk = f"{first.get('apiVersion')}, Kind={first.get('kind') or conversion.kind}"

        def failed(reason: str) -> StatusError:
            # kube answers the converter's plain error: a 500 without a reason
            status = failure_status(500, "", f"conversion webhook for {gvk} failed: {reason}")
            del status["reason"]
            return StatusError(status)

        version = next((v for v in conversion.review_versions if v in ("v1", "v1beta1")), None)
        if version is None or conversion.client_config is None:
            raise failed("no supported conversion review versions")
        uid = str(uuid.uuid4())
        review = {
            "kind": "ConversionReview",
            "apiVersion": f"apiextensions.k8s.io/{version}",
            "request": {"uid": uid, "desiredAPIVersion": target, "objects": list(objs)},
            "response": {"uid": "", "convertedObjects": None, "result": {"metadata": {}}},
        }
        try:
            answer = await self.caller.post(
                conversion.client_config,
                ENCODER.encode(review),
                timeout=_CONVERSION_TIMEOUT,
                query={"timeout": f"{int(_CONVERSION_TIMEOUT)}s"},
            )
        except CallFailed as exc:
            raise failed(exc.reason) from None
        response = answer.get("response") if isinstance(answer, dict) else None
        if version == "v1" and (
            not isinstance(answer, dict)
            or answer.get("apiVersion") != "apiextensions.k8s.io/v1"
            or answer.get("kind") != "ConversionReview"
        ):
            got = (
                f"{answer.get('apiVersion')}, Kind={answer.get('kind')}"
                if isinstance(answer, dict)
                else "?"
            )
            raise failed(
                f"expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, "
                f"got {got}"
            )
        if not isinstance(response, dict):
            raise failed("no response provided")
        if version == "v1" and response.get("uid") != uid:
            raise failed(f'expected response.uid="{uid}", got "{response.get("uid")}"')
        result = response.get("result") or {}
        if result.get("status") != "Success":
            raise failed(
                str(result.get("message") or "")
                or f"response.result.status was '{result.get('status')}', not 'Success'"
            )
        converted = response.get("convertedObjects") or []
        if not isinstance(converted, list) or len(converted) != len(objs):
            count = len(converted) if isinstance(converted, list) else 0
            raise failed(f"returned {count} objects, expected {len(objs)}")
        out = []
        for index, (original, obj) in enumerate(zip(objs, converted, strict=True)):
            where = f"returned invalid converted object at index {index}"
            if not isinstance(obj, dict):
                raise failed(f"{where}: not an object")
            if obj.get("apiVersion") != target:
                raise failed(
                    f"{where}: invalid groupVersion (expected {target}, received "
                    f"{obj.get('apiVersion')})"
                )
            if obj.get("kind") != original.get("kind"):
                raise failed(
                    f"{where}: invalid kind (expected {original.get('kind')}, received "
                    f"{obj.get('kind')})"
                )
            problem = _changed_identity(original, obj)
            if problem:
                raise failed(f"{where}: {problem}")
            out.append(_restore_metadata(original, obj))
        return out


def _changed_identity(original: Mapping[str, Any], converted: Mapping[str, Any]) -> str | None:
    before = original.get("metadata") or {}
    after = converted.get("metadata")
    if not isinstance(after, Mapping):
        return "missing metadata in converted object"
    for field in ("name", "namespace", "uid"):
        if (before.get(field) or "") != (after.get(field) or ""):
            return f"must have the same {field}: {before.get(field)} != {after.get(field)}"
    return None


def _restore_metadata(original: Mapping[str, Any], converted: dict[str, Any]) -> dict[str, Any]:
    """``converted`` with ``original``'s metadata, but the converted labels and annotations
    (kube's ``restoreObjectMeta``)."""
    meta = dict(original.get("metadata") or {})
    answered = converted["metadata"]
    for field in ("labels", "annotations"):
        value = answered.get(field)
        if value is None:
            meta.pop(field, None)
        else:
            meta[field] = value
    converted["metadata"] = meta
    return converted
