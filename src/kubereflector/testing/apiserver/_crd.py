"""CustomResourceDefinitions as objects: creating one (apiextensions.k8s.io/v1) serves
its resource, as kube-apiserver's apiextensions server does.

Private to :mod:`kubereflector.testing.apiserver`. :func:`install` registers the
``customresourcedefinitions`` resource on a store and hooks it: a CRD about to be
stored is checked (422 Invalid, with kube's field paths) and given the status kube
reports (``acceptedNames``, ``NamesAccepted`` and ``Established`` conditions); once
stored, its storage version is served (discovery with scope, short names,
categories; its schema in the OpenAPI documents; its ``additionalPrinterColumns``
in Tables). Updating the CRD updates what is served; deleting it deletes its
objects (watchers see them go) and ends its watches.

The storage version's ``openAPIV3Schema`` is enforced on the custom resources as
kube does (pruning, defaults, validation, CEL rules: see :mod:`._validation`); a
CRD whose rules do not compile is refused with kube's causes. When a CRD's schema
changes, the stored objects are pruned and defaulted again without a new
resourceVersion or an event: kube does it on every read from storage, so a read
after the change shows the new defaults. Its other served versions are served by
:mod:`._conversion` (converted by ``apiVersion`` or by the conversion webhook), and
a new storage version keeps the objects stored in the old one.

Differences from kube: the CRD's own schema is not checked to be structural, and its
CEL rules are only parsed, not type-checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ._cel import compile_errors
from ._records import Bucket, Record, decode
from ._resources import DEFAULT_VERBS, ServedResource
from ._statuses import FieldError, invalid
from ._store import Store
from ._strategy import coerce_custom
from ._timestamps import timestamp

__all__ = ["CRD_RESOURCE", "install"]

CRD_RESOURCE: Final = ServedResource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
    short_names=("crd", "crds"),
    categories=("api-extensions",),
    builtin=True,
    subresources=("status",),
)
_SCOPES: Final = ("Namespaced", "Cluster")


def install(store: Store) -> None:
    """Serve CRDs on ``store`` (once per store)."""
    store.register(CRD_RESOURCE)
    store.admission[CRD_RESOURCE.group_resource] = _admit
    served: dict[str, str] = {}  # CRD name -> group_resource it serves

    def observe(bucket: Bucket, event_type: str, record: Record) -> None:
        if bucket.info is not CRD_RESOURCE:
            return
        previous = served.pop(record.name, None)
        info = None if event_type == "DELETED" else _served_resource(record.obj)
        if previous is not None:
            current = store.buckets.get(previous)
            if info is not None and current is not None and _same_resource(current.info, info):
                schema_changed = current.info.openapi_schema != info.openapi_schema
                if current.info.version != info.version:
                    store.retarget(current, info)  # a new storage version: the objects stay
                current.info = info  # printer columns, schema, names...: served from now on
                served[record.name] = previous
                if schema_changed:
                    _recoerce(current)
                return
            store.unregister(previous)  # deleted, or now another group or plural
        if info is None or info.group_resource in store.buckets:
            return  # deleted; or served already (by a Python registration): leave it
        store.register(info)
        served[record.name] = info.group_resource

    store.observers.append(observe)


def _recoerce(bucket: Bucket) -> None:
    """Prune and default every stored object of ``bucket`` by its (new) schema, as kube's
    reads from storage do: same resourceVersion, no event. (Objects stored in an older
    version are left to their version's conversion.)"""
    api_version = bucket.info.api_version
    for key, record in list(bucket.objects.items()):
        if record.obj.get("apiVersion") != api_version:
            continue
        obj = decode(record.full())
        coerce_custom(bucket.info, obj)
        if obj != record.obj:
            bucket.objects[key] = Record(obj, bucket.info.typemeta_prefix)


def _same_resource(a: ServedResource, b: ServedResource) -> bool:
    return (a.group, a.plural) == (b.group, b.plural)


def _storage_version(spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    versions = [v for v in spec.get("versions") or [] if isinstance(v, Mapping)]
    return next((v for v in versions if v.get("storage")), None)


def _served_resource(crd: Mapping[str, Any]) -> ServedResource:
    spec = crd["spec"]
    names = spec["names"]
    version = _storage_version(spec)
    assert version is not None  # admitted
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    subresources = version.get("subresources") or {}
    return ServedResource(
        spec["group"],
        version["name"],
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
            c for c in version.get("additionalPrinterColumns") or [] if isinstance(c, Mapping)
        ),
    )


def _conversion_errors(spec: dict[str, Any]) -> list[FieldError]:
    """Default ``spec.conversion`` (strategy ``None``) and check it as kube does."""
    conversion = spec.setdefault("conversion", {"strategy": "None"})
    if not isinstance(conversion, dict):
        return [FieldError("spec.conversion", "Invalid", "must be an object", conversion)]
    strategy = conversion.setdefault("strategy", "None")
    webhook = conversion.get("webhook")
    if strategy == "None":
        if webhook is not None:
            return [
                FieldError(
                    "spec.conversion.webhook",
                    "Forbidden",
                    "should not be set when strategy is not set to Webhook",
                )
            ]
        return []
    if strategy != "Webhook":
        return [
            FieldError("spec.conversion.strategy", "NotSupported", '"None", "Webhook"', strategy)
        ]
    path = "spec.conversion.webhook"
    if not isinstance(webhook, dict):
        return [FieldError(path, "Required", "must be set when strategy is set to Webhook")]
    errors: list[FieldError] = []
    config = webhook.get("clientConfig")
    if not isinstance(config, dict) or (config.get("url") is None) == (
        config.get("service") is None
    ):
        errors.append(
            FieldError(
                f"{path}.clientConfig", "Required", "exactly one of url or service is required"
            )
        )
    elif isinstance(config.get("service"), dict):
        config["service"].setdefault("port", 443)
    versions = webhook.get("conversionReviewVersions")
    if not isinstance(versions, list) or not versions:
        errors.append(
            FieldError(
                f"{path}.conversionReviewVersions", "Required", "must specify one of v1, v1beta1"
            )
        )
    elif not any(v in ("v1", "v1beta1") for v in versions):
        errors.append(
            FieldError(
                f"{path}.conversionReviewVersions",
                "Invalid",
                "must include at least one of v1, v1beta1",
                versions,
            )
        )
    return errors


def _admit(crd: dict[str, Any]) -> None:
    """Check a CRD (422 Invalid) and set the status kube's controllers would."""
    name = crd["metadata"]["name"]
    errors: list[FieldError] = []
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        errors.append(FieldError("spec", "Required", "a CRD needs a spec"))
        raise invalid(CRD_RESOURCE.kind, name, errors, CRD_RESOURCE.group)
    group = spec.get("group")
    raw_names = spec.get("names")
    names: Mapping[str, Any] = raw_names if isinstance(raw_names, Mapping) else {}
    plural, kind = names.get("plural"), names.get("kind")
    if not group or not isinstance(group, str) or "." not in group:
        errors.append(
            FieldError("spec.group", "Invalid", "should be a domain with at least one dot", group)
        )
    if not plural or not isinstance(plural, str) or plural != plural.lower():
        errors.append(FieldError("spec.names.plural", "Required", "a lowercase plural name"))
    if not kind or not isinstance(kind, str):
        errors.append(FieldError("spec.names.kind", "Required", "the kind of the objects"))
    if spec.get("scope") not in _SCOPES:
        errors.append(
            FieldError("spec.scope", "NotSupported", '"Cluster", "Namespaced"', spec.get("scope"))
        )
    raw_versions = spec.get("versions")
    versions: list[Any] = raw_versions if isinstance(raw_versions, list) else []
    if not versions:
        errors.append(
            FieldError(
                "spec.versions",
                "Invalid",
                "must have exactly one version marked as storage version",
                versions,
            )
        )
    elif sum(1 for v in versions if isinstance(v, Mapping) and v.get("storage")) != 1:
        errors.append(
            FieldError(
                "spec.versions",
                "Invalid",
                "must have exactly one version marked as storage version",
                [v.get("name") for v in versions if isinstance(v, Mapping)],
            )
        )
    schema_paths = [
        (i, (v.get("schema") or {}).get("openAPIV3Schema"))
        for i, v in enumerate(versions)
        if isinstance(v, Mapping) and isinstance(v.get("schema"), Mapping)
    ]
    for index, schema in schema_paths:
        if isinstance(schema, Mapping):
            where = (
                "spec.validation.openAPIV3Schema"
                if len(versions) == 1
                else f"spec.versions[{index}].schema.openAPIV3Schema"
            )
            errors.extend(compile_errors(schema, where))
    errors += _conversion_errors(spec)
    if not errors and name != f"{plural}.{group}":
        errors.append(
            FieldError("metadata.name", "Invalid", 'must be spec.names.plural+"."+spec.group', name)
        )
    if errors:
        raise invalid(CRD_RESOURCE.kind, name, errors, CRD_RESOURCE.group)
    accepted = {
        k: v
        for k, v in names.items()
        if k in ("plural", "singular", "kind", "listKind", "shortNames", "categories")
    }
    accepted.setdefault("singular", str(kind).lower())
    accepted.setdefault("listKind", f"{kind}List")
    now = timestamp()
    crd["status"] = {
        "acceptedNames": accepted,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": now,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": now,
            },
        ],
        "storedVersions": [
            v["name"] for v in versions if isinstance(v, Mapping) and v.get("storage")
        ],
    }
