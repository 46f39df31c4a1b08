"""The emulator's OpenAPI documents and kubectl's server-side field validation.

Private to :mod:`kubereflector.testing.apiserver`. Pure functions of the served
resources: no I/O.

What kubectl does with them (1.27+, checked with ``-v=8``): before ``create -f`` or
``apply -f`` it reads ``/openapi/v3`` and the document of the object's group-version,
looks for the PATCH operation of the object's kind and, when that operation takes a
``fieldValidation`` query parameter, leaves validation to the server
(``?fieldValidation=Strict``); only otherwise does it download ``/openapi/v2`` as
protobuf to validate on its side. So the v3 documents here declare every operation
with kube's ``x-kubernetes-group-version-kind``, and :func:`unknown_fields` does the
server's part: it reports fields the kind does not have, at the top level and in
``metadata`` (not deeper: the schemas here are shallow, except a CRD's own).

The PATCH operations do not offer ``application/strategic-merge-patch+json`` in their
request body: that tells ``kubectl apply`` the documents carry no patch metadata
(merge keys), so it computes strategic patches from its compiled-in types instead.

``/openapi/v2`` is served as JSON only: a request that accepts only protobuf gets
406 Not Acceptable, as kube-apiserver answers a media type it cannot produce.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

import msgspec

from ...errors import failure_status
from ._coercion import META_FIELDS, coerce
from ._discovery import EMULATED_VERSION
from ._negotiation import accepts_json
from ._records import ENCODER
from ._resources import ServedResource
from ._statuses import FieldError, StatusError, path_not_found

__all__ = [
    "FIELD_VALIDATION_VALUES",
    "check_fields",
    "check_patched_fields",
    "openapi_response",
    "unknown_fields",
]

FIELD_VALIDATION_VALUES: Final = ("Ignore", "Warn", "Strict")
_OBJECT_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_SPEC_STATUS: Final = frozenset({"spec", "status"})
# The top-level fields of the built-in kinds (besides apiVersion, kind, metadata).
_BUILTIN_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "ConfigMap": frozenset({"data", "binaryData", "immutable"}),
    "Secret": frozenset({"data", "stringData", "type", "immutable"}),
    "ServiceAccount": frozenset({"secrets", "imagePullSecrets", "automountServiceAccountToken"}),
    "Role": frozenset({"rules"}),
    "ClusterRole": frozenset({"rules", "aggregationRule"}),
    "RoleBinding": frozenset({"subjects", "roleRef"}),
    "ClusterRoleBinding": frozenset({"subjects", "roleRef"}),
}
_BUILTIN_PACKAGES: Final[Mapping[str, str]] = {
    "": "io.k8s.api.core",
    "apps": "io.k8s.api.apps",
    "policy": "io.k8s.api.policy",
    "rbac.authorization.k8s.io": "io.k8s.api.rbac",
    "authorization.k8s.io": "io.k8s.api.authorization",
}
_PATCH_TYPES: Final = ("application/json-patch+json", "application/merge-patch+json")


# -- validation -----------------------------------------------------------------------------


def _top_level_fields(info: ServedResource) -> frozenset[str] | None:
    """The fields ``info``'s objects may have besides apiVersion/kind/metadata
    (``None``: any)."""
    if info.builtin:
        return _BUILTIN_FIELDS.get(info.kind, _SPEC_STATUS)
    schema = info.openapi_schema
    if not schema:
        return None  # registered from Python without a schema: anything goes
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return frozenset()
    return frozenset(properties)


def unknown_fields(info: ServedResource, obj: Any) -> list[str]:
    """The paths of the fields in ``obj`` (an object, or a merge patch of one) that
    ``info``'s kind does not have, as kube's strict decoding names them
    (``"foo"``, ``"metadata.foo"``). Keys starting with ``$`` (patch directives) pass."""
    if not isinstance(obj, Mapping):
        return []
    allowed = _top_level_fields(info)
    found: list[str] = []
    for key in obj:
        if not isinstance(key, str) or key.startswith("$"):
            continue
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if allowed is not None and key not in allowed:
            found.append(key)
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        found.extend(
            f"metadata.{key}"
            for key in meta
            if isinstance(key, str) and not key.startswith("$") and key not in META_FIELDS
        )
    return found


# -- documents ------------------------------------------------------------------------------


def _gv_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _definition_name(info: ServedResource) -> str:
    package = _BUILTIN_PACKAGES.get(info.group) if info.builtin else None
    if package is None:
        package = ".".join(reversed(info.group.split(".")))
    return f"{package}.{info.version}.{info.kind}"


def _gvk(info: ServedResource, kind: str | None = None) -> dict[str, str]:
    return {"group": info.group, "version": info.version, "kind": kind or info.kind}


def _schema(info: ServedResource, ref_prefix: str) -> dict[str, Any]:
    base: dict[str, Any] = dict(info.openapi_schema) if info.openapi_schema else {}
    properties = dict(base.get("properties") or {})
    if not properties and not info.openapi_schema:
        fields = _top_level_fields(info) or _SPEC_STATUS
        properties = {name: {"type": "object"} for name in sorted(fields)}
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    properties["metadata"] = {"$ref": f"{ref_prefix}{_OBJECT_META}"}
    base.update(
        {
            "type": "object",
            "description": f"{info.kind} ({info.api_version}), kubereflector emulator",
            "properties": properties,
            "x-kubernetes-group-version-kind": [_gvk(info)],
        }
    )
    return base


def _operations(info: ServedResource, *, v3: bool) -> dict[str, dict[str, dict[str, Any]]]:
    """``{path: {method: operation}}`` for one resource."""
    ref = "#/components/schemas/" if v3 else "#/definitions/"
    body_ref = {"$ref": f"{ref}{_definition_name(info)}"}
    field_validation = {
        "name": "fieldValidation",
        "in": "query",
        "description": "Ignore, Warn or Strict: what to do with unknown fields",
        **({"schema": {"type": "string"}} if v3 else {"type": "string"}),
        "uniqueItems": True,
    }

    def op(action: str, kind: str | None = None, *, validates: bool = False) -> dict[str, Any]:
        operation: dict[str, Any] = {
            "operationId": f"{action}{info.kind}",
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": _gvk(info, kind),
            "responses": {"200": {"description": "OK"}},
        }
        if validates:
            operation["parameters"] = [field_validation]
        return operation

    def with_body(operation: dict[str, Any], media_types: Iterable[str]) -> dict[str, Any]:
        if v3:
            operation["requestBody"] = {
                "content": {m: {"schema": body_ref} for m in media_types},
                "required": True,
            }
        else:
            operation["consumes"] = list(media_types)
        return operation

    prefix = "/" + _gv_key(info.group, info.version)
    collection = f"{prefix}/{info.plural}"
    if info.namespaced:
        collection = f"{prefix}/namespaces/{{namespace}}/{info.plural}"
    item = f"{collection}/{{name}}"
    paths = {
        collection: {
            "get": op("list", info.list_kind),
            "post": with_body(op("post", validates=True), ["application/json"]),
            "delete": op("deletecollection"),
        },
        item: {
            "get": op("get"),
            "put": with_body(op("put", validates=True), ["application/json"]),
            "patch": with_body(op("patch", validates=True), _PATCH_TYPES),
            "delete": op("delete"),
        },
    }
    if info.namespaced:
        paths[f"{prefix}/{info.plural}"] = {"get": op("list", info.list_kind)}
    return paths


def _info() -> dict[str, str]:
    return {
        "title": "Kubernetes (kubereflector emulator)",
        "version": EMULATED_VERSION["gitVersion"],
    }


def v3_document(resources: Iterable[ServedResource], group: str, version: str) -> dict[str, Any]:
    """The OpenAPI 3.0 document of one group-version (empty paths if none is served)."""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {_OBJECT_META: {"type": "object"}}
    for info in resources:
        if info.group == group and info.version == version:
            paths.update(_operations(info, v3=True))
            schemas[_definition_name(info)] = _schema(info, "#/components/schemas/")
    return {"openapi": "3.0.0", "info": _info(), "paths": paths, "components": {"schemas": schemas}}


def v2_document(resources: Iterable[ServedResource]) -> dict[str, Any]:
    """The Swagger 2.0 document of everything served."""
    paths: dict[str, Any] = {}
    definitions: dict[str, Any] = {_OBJECT_META: {"type": "object"}}
    for info in resources:
        paths.update(_operations(info, v3=False))
        definitions[_definition_name(info)] = _schema(info, "#/definitions/")
    return {"swagger": "2.0", "info": _info(), "paths": paths, "definitions": definitions}


def _not_acceptable() -> StatusError:
    return StatusError(
        failure_status(
            406,
            "NotAcceptable",
            "the kubereflector emulator serves OpenAPI documents as application/json only",
        )
    )


def openapi_response(
    resources: Iterable[ServedResource], segments: list[str], accept: str
) -> tuple[bytes, str]:
    """The body and content type for ``GET /openapi/...`` (``segments`` start with
    ``"openapi"``). Raises :class:`StatusError` (404 unknown path, 406 no JSON)."""
    resources = list(resources)
    if not accepts_json(accept):
        raise _not_acceptable()
    if segments == ["openapi", "v2"]:
        return ENCODER.encode(v2_document(resources)), "application/json"
    if len(segments) < 2 or segments[1] != "v3":
        raise path_not_found()
    served = {(info.group, info.version) for info in resources}
    if len(segments) == 2:
        paths = {}
        for group, version in sorted(served):
            key = _gv_key(group, version)
            body = ENCODER.encode(v3_document(resources, group, version))
            digest = hashlib.sha512(body).hexdigest()[:64].upper()
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
        return ENCODER.encode({"paths": paths}), "application/json"
    rest = segments[2:]
    if rest[0] == "api" and len(rest) == 2:
        group, version = "", rest[1]
    elif rest[0] == "apis" and len(rest) == 3:
        group, version = rest[1], rest[2]
    else:
        raise path_not_found()
    if (group, version) not in served:
        raise path_not_found()
    return ENCODER.encode(v3_document(resources, group, version)), "application/json"


def _unknown(info: ServedResource, obj: Any) -> list[str]:
    """The unknown fields of a write's body: for a custom resource, what kube's decoder
    prunes (its structural schema's unknown fields, at any depth); for built-in
    kinds, the top-level and metadata ones."""
    if info.builtin or not isinstance(obj, dict):
        return unknown_fields(info, obj)
    return coerce(copy.deepcopy(obj), info.openapi_schema)


def check_patched_fields(info: ServedResource, patched: Any, directive: str) -> list[str]:
    """Field validation of a merge or JSON patch of a custom resource, as kube does it:
    on the patched object. Warnings for ``Warn``; for ``Strict``, kube's 422 that
    quotes the patched object (``patch: Invalid value: "{...}": strict decoding
    error: unknown field "spec.x"``)."""
    check_fields(info, {}, directive)  # the directive itself
    if directive == "Ignore" or info.builtin:
        return []
    unknown = [f'unknown field "{path}"' for path in _unknown(info, patched)]
    if not unknown or directive != "Strict":
        return unknown
    text = msgspec.json.encode(patched, order="sorted").decode()
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    error = FieldError("patch", "Invalid", f"strict decoding error: {', '.join(unknown)}", text)
    raise StatusError(
        failure_status(
            422,
            "Invalid",
            f' "" is invalid: patch: {error.text()}',
            {"causes": [error.cause()]},
        )
    )


def check_fields(info: ServedResource, obj: Any, directive: str) -> list[str]:
    """Server-side field validation of a write's body (``directive``: the request's
    ``fieldValidation``; empty means kube's default, Warn). Returns the warnings to
    send (``Warn``); raises :class:`StatusError` 400 for unknown fields under
    ``Strict`` and for a directive kube does not know."""
    if directive and directive not in FIELD_VALIDATION_VALUES:
        supported = ", ".join(f'"{v}"' for v in FIELD_VALIDATION_VALUES)
        raise StatusError(
            failure_status(
                400,
                "BadRequest",
                f'fieldValidation: Unsupported value: "{directive}": supported values: {supported}',
            )
        )
    if directive == "Ignore":
        return []
    unknown = [f'unknown field "{path}"' for path in _unknown(info, obj)]
    if unknown and directive == "Strict":
        raise StatusError(
            failure_status(
                400,
                "BadRequest",
                f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
                f"strict decoding error: {', '.join(unknown)}",
            )
        )
    return unknown
