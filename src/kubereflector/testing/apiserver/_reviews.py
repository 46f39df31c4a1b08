"""The create-only endpoints of authentication and authorization, which store nothing:
a ServiceAccount's ``token`` subresource (TokenRequest), SubjectAccessReviews and
SelfSubjectAccessReviews.

Private to :mod:`kubereflector.testing.apiserver`. Event loop only. Answers as
kube-apiserver v1.28 does (201 with the object and its ``status``; 422 with kube's
field paths and messages; 404 for a missing ServiceAccount), except that the
answers carry no ``managedFields``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from aiohttp import web

from ...errors import failure_status
from ._negotiation import json_response, read_body
from ._rbac import Attributes, authorize
from ._records import ENCODER
from ._resources import ServedResource
from ._statuses import FieldError, StatusError, bad_request, method_not_allowed, not_found
from ._store import Store
from ._timestamps import timestamp, wall_now
from ._users import UserInfo, Users

__all__ = [
    "REVIEW_RESOURCES",
    "TOKEN_AUDIENCE",
    "install",
    "serve_review",
    "serve_token_request",
]

TOKEN_AUDIENCE: Final = "https://kubernetes.default.svc.cluster.local"
"""The audience of a TokenRequest that names none (kube's ``--service-account-issuer``
of the integration suite's server)."""
_DEFAULT_EXPIRATION: Final = 3600
_MIN_EXPIRATION: Final = 600
_MAX_EXPIRATION: Final = 1 << 32
_AUTHORIZATION: Final = "authorization.k8s.io"
_AUTHENTICATION: Final = "authentication.k8s.io"
_SELF_FIELDS: Final = ("resourceAttributes", "nonResourceAttributes")


def _review_resource(plural: str, kind: str) -> ServedResource:
    return ServedResource(
        _AUTHORIZATION,
        "v1",
        plural,
        kind,
        namespaced=False,
        verbs=("create",),
        builtin=True,
        generation=False,
    )


SUBJECT_ACCESS_REVIEWS: Final = _review_resource("subjectaccessreviews", "SubjectAccessReview")
SELF_SUBJECT_ACCESS_REVIEWS: Final = _review_resource(
    "selfsubjectaccessreviews", "SelfSubjectAccessReview"
)
REVIEW_RESOURCES: Final = (SUBJECT_ACCESS_REVIEWS, SELF_SUBJECT_ACCESS_REVIEWS)


def _invalid(kind: str, group: str, errors: list[FieldError]) -> StatusError:
    """kube's 422 for an object without a name (the kind as the body wrote it)."""
    texts = [f"{e.field}: {e.text()}" for e in errors]
    joined = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
    details: dict[str, Any] = {"group": group}
    if kind:
        details["kind"] = kind
    details["causes"] = [e.cause() for e in errors]
    message = f'{kind}.{group} "" is invalid: {joined}'
    return StatusError(failure_status(422, "Invalid", message, details))


async def _body(request: web.BaseRequest) -> dict[str, Any]:
    if request.method != "POST":
        raise method_not_allowed(request.method, request.path)
    body = await read_body(request)
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    return body


# -- TokenRequest ----------------------------------------------------------------------------


async def serve_token_request(
    store: Store, users: Users, request: web.BaseRequest, namespace: str, name: str
) -> web.Response:
    """``POST /api/v1/namespaces/{namespace}/serviceaccounts/{name}/token``: a new token
    of that ServiceAccount (kube's TokenRequest API)."""
    body = await _body(request)
    spec = body.get("spec")
    spec = dict(spec) if isinstance(spec, dict) else {}
    seconds = spec.get("expirationSeconds", _DEFAULT_EXPIRATION)
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise bad_request("spec.expirationSeconds must be an integer")
    if seconds < _MIN_EXPIRATION:
        error = FieldError(
            "spec.expirationSeconds",
            "Invalid",
            "may not specify a duration less than 10 minutes",
            seconds,
        )
        raise _invalid("TokenRequest", _AUTHENTICATION, [error])
    if seconds > _MAX_EXPIRATION:
        error = FieldError(
            "spec.expirationSeconds",
            "Invalid",
            "may not specify a duration larger than 2^32 seconds",
            seconds,
        )
        raise _invalid("TokenRequest", _AUTHENTICATION, [error])
    bucket = store.resolve("serviceaccounts")
    record = bucket.objects.get(f"{namespace}/{name}")
    if record is None:
        raise not_found(bucket.info, name)
    uid = str(record.obj["metadata"].get("uid", ""))
    token = users.mint(namespace, name, uid, seconds)
    now = wall_now()
    answer = {
        "kind": "TokenRequest",
        "apiVersion": f"{_AUTHENTICATION}/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": timestamp(now)},
        "spec": {
            "audiences": spec.get("audiences") or [TOKEN_AUDIENCE],
            "expirationSeconds": seconds,
            "boundObjectRef": spec.get("boundObjectRef"),
        },
        "status": {"token": token, "expirationTimestamp": timestamp(now + seconds)},
    }
    return json_response(ENCODER.encode(answer), 201)


# -- access reviews ---------------------------------------------------------------------------


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _review_attributes(spec: Mapping[str, Any], user: UserInfo) -> Attributes:
    """kube's ``AuthorizationAttributesFrom`` (a spec already validated)."""
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return Attributes(
            user,
            str(resource.get("verb", "")),
            True,
            api_group=str(resource.get("group", "")),
            api_version=str(resource.get("version", "")),
            resource=str(resource.get("resource", "")),
            subresource=str(resource.get("subresource", "")),
            namespace=str(resource.get("namespace", "")),
            name=str(resource.get("name", "")),
        )
    other = spec.get("nonResourceAttributes") or {}
    return Attributes(user, str(other.get("verb", "")), False, path=str(other.get("path", "")))


def _check_attributes(spec: Mapping[str, Any]) -> list[FieldError]:
    resource, other = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    for label, value in (("resourceAttributes", resource), ("nonResourceAttributes", other)):
        if value is not None and not isinstance(value, dict):
            raise bad_request(f"spec.{label} must be an object")
    if resource is not None and other is not None:
        return [
            FieldError(
                "spec.nonResourceAttributes",
                "Invalid",
                "cannot be specified in combination with resourceAttributes",
                other,
            )
        ]
    if resource is None and other is None:
        return [
            FieldError(
                "spec.resourceAttributes",
                "Invalid",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                "null",
            )
        ]
    return []


async def serve_review(
    store: Store, request: web.BaseRequest, info: ServedResource, requester: UserInfo
) -> web.Response:
    """``POST`` of a SubjectAccessReview (about the user its spec names) or a
    SelfSubjectAccessReview (about ``requester``): the object with kube's decision
    in ``status``."""
    body = await _body(request)
    spec = body.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    kind = body.get("kind") if isinstance(body.get("kind"), str) else ""
    errors = _check_attributes(spec)
    if info is SUBJECT_ACCESS_REVIEWS:
        user_name = str(spec.get("user") or "")
        groups = _strings(spec.get("groups"))
        if not user_name and not groups:
            errors.append(
                FieldError(
                    "spec.user", "Invalid", "at least one of user or group must be specified", ""
                )
            )
        user = UserInfo(user_name, groups, str(spec.get("uid", "")))
    else:
        user = requester
        spec = {
            k: v for k, v in spec.items() if k in ("resourceAttributes", "nonResourceAttributes")
        }
    meta = body.get("metadata")
    if isinstance(meta, dict) and any(k != "managedFields" and v for k, v in meta.items()):
        errors.append(FieldError("metadata", "Invalid", "must be empty", meta))
    if errors:
        raise _invalid(str(kind), _AUTHORIZATION, errors)
    decision = authorize(store, _review_attributes(spec, user))
    status: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    answer = {
        "kind": info.kind,
        "apiVersion": info.api_version,
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }
    return json_response(ENCODER.encode(answer), 201)


def install(store: Store) -> None:
    """Serve the access reviews on ``store`` (once per store); they store nothing."""
    for info in REVIEW_RESOURCES:
        store.register(info)
