"""What kube-apiserver does to an object before it stores it: the checks of a request
body, the fields the server sets or keeps (``rest.BeforeCreate``/``BeforeUpdate``),
the status and generation rules of its strategies, the defaults clients notice, and
when an update changes nothing.

Private to :mod:`kubereflector.testing.apiserver`. Pure functions: no I/O and no
store; each raises :class:`~._statuses.StatusError` with the Status kube would
answer. They build new dicts and never modify a stored object.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from typing import Any, Final

from ...errors import failure_status
from ._coercion import coerce
from ._fields import FieldManagers
from ._merge import strategic_merge_patch
from ._patch import PatchFailed, json_patch, merge_patch
from ._records import ENCODER, Record
from ._resources import ServedResource
from ._statuses import FieldError, StatusError, bad_request, conflict, invalid
from ._timestamps import timestamp
from ._validation import validate_object

__all__ = [
    "EMPTY",
    "apply_body",
    "apply_defaults",
    "check_preconditions",
    "coerce_custom",
    "managers_for",
    "marked_for_deletion",
    "new_object",
    "patched",
    "replacement",
    "request_body",
    "set_managed",
    "unchanged",
]

EMPTY: Final[Mapping[str, Any]] = {"metadata": {}}
"""What a create changes from (kube's is a Go zero value; see _fields)."""

_IDENTITY: Final = ("name", "namespace", "resourceVersion")
"""The metadata a status apply keeps (the rest of its metadata is ignored)."""

_SERVER_FIELDS: Final = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
_GENERATE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


def request_body(info: ServedResource, obj: Any, *, strict: bool) -> dict[str, Any]:
    """A request body as a fresh top-level dict with its own metadata dict, after
    kube's checks of its ``apiVersion`` and ``kind`` (custom resources must name
    both when ``strict``, as over HTTP)."""
    if not isinstance(obj, dict):
        raise bad_request(f"the body of the request is not a {info.kind} object")
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if strict and not info.builtin and not (kind and api_version):
        missing = "Kind" if not kind else "apiVersion"
        raise bad_request(  # kube quotes the body here too; objects stay out of messages
            f"the object provided is unrecognized (must be of type {info.kind}): "
            f"Object '{missing}' is missing in the request body"
        )
    if api_version and api_version != info.api_version:
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected "
            f"API version ({info.api_version})"
        )
    meta = obj.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    if kind and kind != info.kind:
        if info.builtin:  # the decoder cannot convert it
            raise bad_request(
                f'{kind} in version "{info.version}" cannot be handled as a {info.kind}: '
                f"the kind in the data ({kind}) does not match the expected kind ({info.kind})"
            )
        raise invalid(
            str(kind),
            str(meta.get("name") or ""),
            [FieldError("kind", "Invalid", f"must be {info.kind}", kind)],
            info.group,
        )
    body: dict[str, Any] = {"kind": info.kind, "apiVersion": info.api_version}
    body.update((k, v) for k, v in obj.items() if k not in ("kind", "apiVersion"))
    body["metadata"] = dict(meta)
    return body


def coerce_custom(info: ServedResource, body: dict[str, Any]) -> list[str]:
    """What kube's decoder does to a custom resource (:func:`._coercion.coerce`:
    pruning, defaults, ObjectMeta's fields only), in place; the unknown fields'
    paths. Built-in objects are left alone (``[]``)."""
    if info.builtin:
        return []
    return coerce(body, info.openapi_schema)


def _check_namespace(info: ServedResource, meta: dict[str, Any], namespace: str | None) -> None:
    """Set ``meta``'s namespace from the request's (400 if they differ, or if a
    namespaced object has none); drop it for a cluster-scoped resource."""
    if info.namespaced:
        given = meta.get("namespace")
        if namespace and given and given != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent "
                "on the request"
            )
        ns = namespace or given
        if not ns:
            raise bad_request("a namespaced object needs a namespace")
        meta["namespace"] = ns
    else:
        meta.pop("namespace", None)


def new_object(
    info: ServedResource, obj: Any, namespace: str | None, *, strict: bool
) -> dict[str, Any]:
    """A create's object, checked and validated, with its name (generated from
    ``generateName`` if need be) and namespace; not yet stamped with a uid,
    generation and creationTimestamp, nor admitted. ``strict`` (over HTTP): a
    ``resourceVersion`` is refused and ``status`` of a resource with a status
    subresource reset; else (the Python data API) server-set fields are dropped."""
    body = request_body(info, obj, strict=strict)
    coerce_custom(info, body)
    meta = body["metadata"]
    if meta.get("resourceVersion") and strict:
        raise StatusError(
            failure_status(
                500,
                "InternalError",
                "resourceVersion should not be set on objects to be created",
            )
        )
    for name in _SERVER_FIELDS:
        meta.pop(name, None)
    _check_namespace(info, meta, namespace)
    if not meta.get("name"):
        generate = meta.get("generateName")
        if not generate:
            raise invalid(
                info.kind,
                "",
                [FieldError("metadata.name", "Required", "name or generateName is required")],
                info.group,
            )
        suffix = "".join(random.choice(_GENERATE_ALPHABET) for _ in range(5))
        meta["name"] = f"{generate}{suffix}"
    if strict and info.has_status:
        body.pop("status", None)  # kube's strategies reset status on create
    validate_object(info, body)
    return body


def replacement(
    info: ServedResource,
    existing: Record,
    body: dict[str, Any],
    name: str,
    subresource: str | None,
    keep_status: bool,
) -> dict[str, Any]:
    """What an update of ``existing`` with ``body`` stores (not yet validated):
    server-set fields kept, ``status`` or everything else kept as the
    subresource rules say, ``generation`` bumped on spec changes. Raises 400 for a
    name or namespace that does not match, 409 for a stale resourceVersion."""
    meta = body["metadata"]
    given_name = meta.get("name")
    if given_name and given_name != name:
        raise bad_request(
            f"the name of the object ({given_name}) does not match the name on the URL ({name})"
        )
    meta["name"] = name
    _check_namespace(info, meta, existing.namespace or None)
    wanted_rv = meta.get("resourceVersion")
    old = existing.obj
    old_meta = old["metadata"]
    if wanted_rv and str(wanted_rv) != old_meta["resourceVersion"]:
        raise conflict(
            info,
            name,
            "the object has been modified; please apply your changes to the latest "
            "version and try again",
        )
    if subresource == "status":
        new = dict(old)
        new["metadata"] = dict(old_meta)
        if "status" in body:
            new["status"] = body["status"]
        else:
            new.pop("status", None)
        return new
    new = body
    for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    if keep_status and info.has_status:
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
    meta.pop("generation", None)
    if info.generation:
        generation = int(old_meta.get("generation", 1))
        meta["generation"] = generation + 1 if _spec_of(new) != _spec_of(old) else generation
    return new


def patched(info: ServedResource, doc: Any, patch_type: str, patch: Any) -> dict[str, Any]:
    """``doc`` (an object of ``info``) with ``patch`` applied (``patch_type``: ``"json"``,
    ``"merge"`` or ``"strategic"``, by the kind's patch strategies and merge keys);
    422 when it cannot be applied or leaves no metadata."""
    try:
        if patch_type == "json":
            result = json_patch(doc, patch)
        elif patch_type == "merge":
            result = merge_patch(doc, patch)
        elif patch_type == "strategic":
            result = strategic_merge_patch(doc, patch, info.schema.root)
        else:
            raise ValueError(f"unknown patch type {patch_type!r}")
    except PatchFailed as exc:
        raise StatusError(
            failure_status(422, "Invalid", f"the patch could not be applied: {exc}")
        ) from None
    if not isinstance(result, dict) or not isinstance(result.get("metadata"), dict):
        raise StatusError(failure_status(422, "Invalid", "the patched object has no metadata"))
    return result


def apply_body(
    info: ServedResource,
    config: Any,
    name: str,
    namespace: str | None,
    subresource: str | None,
) -> dict[str, Any]:
    """A server-side apply's configuration, checked (400: no kind or apiVersion, a
    name or namespace that does not match), with what it may set: only ``status``
    (and the identity) on the status subresource, no ``status`` on the main resource
    of one that has the subresource."""
    if not isinstance(config, dict) or not config.get("kind") or not config.get("apiVersion"):
        given = config if isinstance(config, dict) else {}
        raise bad_request(
            f"invalid object type: {given.get('apiVersion') or '/'}, Kind={given.get('kind') or ''}"
        )
    body = request_body(info, config, strict=True)
    _check_apply_fields(info, body, name)
    meta = body["metadata"]
    if meta.get("name") and meta["name"] != name:
        raise bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    meta["name"] = name
    _check_namespace(info, meta, namespace)
    if subresource == "status":
        body = {k: v for k, v in body.items() if k in ("kind", "apiVersion", "metadata", "status")}
        body["metadata"] = {k: v for k, v in meta.items() if k in _IDENTITY}
    elif info.has_status:
        body.pop("status", None)
    return body


def _check_apply_fields(info: ServedResource, body: dict[str, Any], name: str) -> None:
    """kube 1.28 turns an applied configuration of a custom resource into a typed value
    of its schema before anything else, and answers a field the schema does not
    declare with a 500 naming it (the first one it meets; ``fieldValidation`` does not
    matter)."""
    if info.builtin or not info.openapi_schema:
        return
    unknown = coerce(copy.deepcopy(body), info.openapi_schema)
    if unknown:
        path = "." + unknown[0]
        raise StatusError(
            failure_status(
                500,
                "InternalError",
                f"failed to create typed patch object (/{name}; {info.api_version}, "
                f"Kind={info.kind}): {path}: field not declared in schema",
            )
        )


def check_preconditions(
    info: ServedResource, name: str, meta: Mapping[str, Any], preconditions: Mapping[str, Any]
) -> None:
    """A delete's ``preconditions`` (uid, resourceVersion) against the stored ``meta``:
    409 Conflict naming the one that does not match."""
    for field_name, json_name, hint in (
        ("uid", "UID", "deleted and then recreated"),
        ("resourceVersion", "ResourceVersion", "modified"),
    ):
        wanted = preconditions.get(field_name)
        if wanted is not None and str(wanted) != str(meta.get(field_name)):
            raise StatusError(
                failure_status(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {info.kind} "{name}": the {json_name} '
                    f"in the precondition ({wanted}) does not match the {json_name} in record "
                    f"({meta.get(field_name)}). The object might have been {hint}",
                    {"name": name, "kind": info.kind},
                )
            )


def marked_for_deletion(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` (which has finalizers) as a delete leaves it: with a
    ``deletionTimestamp``, and its generation bumped if it has one."""
    new = dict(obj)
    meta = new["metadata"] = dict(obj["metadata"])
    meta["deletionTimestamp"] = timestamp()
    meta["deletionGracePeriodSeconds"] = 0
    if "generation" in meta:
        meta["generation"] = int(meta["generation"]) + 1
    return new


def managers_for(
    existing: Record, body: Mapping[str, Any], subresource: str | None
) -> FieldManagers:
    """The managers an update starts from: those the body carries, if it carries
    any (kube lets a client rewrite managedFields), else the stored ones."""
    given = body["metadata"].get("managedFields")
    if subresource or not given:
        given = existing.obj["metadata"].get("managedFields")
    return FieldManagers.decode(given)


def set_managed(meta: dict[str, Any], managers: FieldManagers) -> None:
    """Write ``managers`` as ``meta``'s managedFields (none: no key)."""
    encoded = managers.encode()
    if encoded:
        meta["managedFields"] = encoded
    else:
        meta.pop("managedFields", None)


def unchanged(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether an update changes nothing (managedFields timestamps aside)."""
    if new == old:
        return True
    new_meta, old_meta = new["metadata"], old["metadata"]
    if {**new, "metadata": None} != {**old, "metadata": None} or _without_managed(
        new_meta
    ) != _without_managed(old_meta):
        return False
    return _untimed(new_meta.get("managedFields")) == _untimed(old_meta.get("managedFields"))


def _without_managed(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k != "managedFields"}


def _untimed(managed: Any) -> list[bytes]:
    entries = managed if isinstance(managed, list) else []
    return sorted(
        ENCODER.encode({k: v for k, v in e.items() if k != "time"} if isinstance(e, dict) else e)
        for e in entries
    )


def _spec_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def apply_defaults(info: ServedResource, obj: dict[str, Any]) -> None:
    """The few defaults kube's admission and strategies set that clients notice
    (``obj`` is modified)."""
    if not info.builtin:
        return
    if info.plural == "pods":
        status = obj.get("status")
        if not isinstance(status, dict) or not status.get("phase"):
            obj["status"] = {**(status if isinstance(status, dict) else {}), "phase": "Pending"}
    elif info.plural == "namespaces":
        meta = obj["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj["status"] = {"phase": "Active"}
