"""Content negotiation and encoding over HTTP: which answer a request's ``Accept``
asks for (JSON, PartialObjectMetadata, Table, aggregated discovery), how its body is
decoded (JSON, YAML; protobuf refused), which patch its ``Content-Type`` names, and
the responses (JSON with kube's headers, protobuf for the built-in kinds' lists and
objects, ``Status`` objects, ``Warning`` headers).

Private to :mod:`kubereflector.testing.apiserver`. No state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec
import yaml
from aiohttp import web

from ...errors import failure_status
from ...protobuf import CONTENT_TYPE
from ...protobuf._envelope import wrap
from ._records import ENCODER, decode
from ._statuses import StatusError, bad_request

__all__ = [
    "JSON",
    "PATCH_TYPES",
    "PROTOBUF",
    "accepts_json",
    "json_response",
    "negotiate",
    "not_acceptable",
    "patch_type",
    "protobuf_response",
    "read_body",
    "status_response",
    "wants_aggregated",
    "with_warnings",
]

JSON: Final = "application/json"
PROTOBUF: Final = CONTENT_TYPE
_JSON_RANGES: Final = (JSON, "application/*", "*/*")
_APPLY: Final = "application/apply-patch+yaml"
PATCH_TYPES: Final = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    _APPLY: "apply",
}
"""The patch each PATCH ``Content-Type`` names (``"apply"``: server-side apply)."""
_YAML_TYPES: Final = ("application/yaml", "application/x-yaml", _APPLY)


# -- what a request accepts -------------------------------------------------------------------


def _media_ranges(header: str) -> list[tuple[str, dict[str, str]]]:
    ranges: list[tuple[str, dict[str, str]]] = []
    for part in header.split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        params: dict[str, str] = {}
        for piece in pieces[1:]:
            key, _, value = piece.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        ranges.append((pieces[0].lower(), params))
    return ranges or [("*/*", {})]


def negotiate(header: str, target: str, *, protobuf: bool = False) -> str | None:
    """``"json"``, ``"meta"`` (PartialObjectMetadata), ``"table"`` or ``"protobuf"``
    for a request whose answer is an ``target`` (``"object"``, ``"list"`` or
    ``"watch"``); ``None``: 406. ``protobuf``: whether the answer can be protobuf (a
    built-in kind; kube-apiserver has none for custom resources, and skips it)."""
    for media_type, params in _media_ranges(header):
        if media_type == PROTOBUF and protobuf and not params.get("as"):
            return "protobuf"
        if media_type not in _JSON_RANGES:
            continue
        as_ = params.get("as")
        if not as_:
            return "json"
        if params.get("g") != "meta.k8s.io" or params.get("v") != "v1":
            continue
        if as_ == "Table":
            return "table"
        if as_ == "PartialObjectMetadata" and target in ("object", "watch"):
            return "meta"
        if as_ == "PartialObjectMetadataList" and target == "list":
            return "meta"
    return None


def wants_aggregated(header: str) -> bool:
    """Whether ``header`` asks for aggregated discovery (``apidiscovery.k8s.io/v2``)
    before plain JSON."""
    for media_type, params in _media_ranges(header):
        if media_type not in _JSON_RANGES:
            continue
        if (
            params.get("as") == "APIGroupDiscoveryList"
            and params.get("g") == "apidiscovery.k8s.io"
            and params.get("v") == "v2"
        ):
            return True
        if not params.get("as"):
            return False
    return False


def accepts_json(header: str) -> bool:
    """Whether ``header`` accepts JSON at all (an empty header does)."""
    return any(media_type in _JSON_RANGES for media_type, _ in _media_ranges(header))


def not_acceptable() -> StatusError:
    """406 for an ``Accept`` header :func:`negotiate` finds nothing in."""
    return StatusError(
        failure_status(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, "
            "application/vnd.kubernetes.protobuf (built-in kinds), "
            "application/json;as=Table;g=meta.k8s.io;v=v1, "
            "application/json;as=PartialObjectMetadata(List);g=meta.k8s.io;v=v1",
        )
    )


# -- what a request sends ---------------------------------------------------------------------


def _content_type(request: web.BaseRequest, default: str = "") -> str:
    return request.headers.get("Content-Type", default).split(";")[0].strip().lower()


def patch_type(request: web.BaseRequest) -> str | None:
    """The patch a PATCH request's ``Content-Type`` names (see :data:`PATCH_TYPES`)."""
    return PATCH_TYPES.get(_content_type(request))


async def read_body(
    request: web.BaseRequest, *, raw_json: bool = False, optional: bool = False
) -> Any:
    """The request's body, decoded by its ``Content-Type``: JSON, or YAML (unless
    ``raw_json``: the body of a JSON, merge or strategic patch is JSON whatever the
    header says). 400 for an empty body (``optional``: ``{}``) or one that does not
    decode; 415 for protobuf."""
    data = await request.read()
    if not data.strip():
        if optional:
            return {}
        raise bad_request("the request body is empty")
    content_type = _content_type(request, JSON)
    try:
        if content_type in _YAML_TYPES and not raw_json:
            return yaml.safe_load(data)
        if content_type == "application/vnd.kubernetes.protobuf":
            raise StatusError(
                failure_status(
                    415,
                    "UnsupportedMediaType",
                    "the kubereflector emulator accepts JSON and YAML bodies, not protobuf "
                    "(which kubectl's generators such as 'kubectl create configmap' send): "
                    "write the object to a file and use 'kubectl create -f' or "
                    "'kubectl apply -f' (e.g. 'kubectl create configmap x "
                    "--from-literal=k=v --dry-run=client -o yaml | kubectl apply -f -')",
                )
            )
        return decode(data)
    except (msgspec.DecodeError, yaml.YAMLError) as exc:
        raise bad_request(f"the request body could not be decoded: {exc}") from None


# -- responses --------------------------------------------------------------------------------


def protobuf_response(api_version: str, kind: str, message: bytes) -> web.Response:
    """``message``, an object of ``kind`` in ``api_version``, as kube-apiserver
    answers it in protobuf (in its envelope)."""
    return json_response(wrap(api_version, kind, message), content_type=PROTOBUF)


def json_response(body: bytes, status: int = 200, content_type: str = JSON) -> web.Response:
    response = web.Response(body=body, status=status)
    response.headers["Content-Type"] = content_type
    response.headers["Cache-Control"] = "no-cache, private"
    return response


def status_response(status: Mapping[str, Any]) -> web.Response:
    response = json_response(ENCODER.encode(status), int(status.get("code") or 500))
    details = status.get("details") or {}
    retry = details.get("retryAfterSeconds")
    if retry:
        response.headers["Retry-After"] = str(retry)
    return response


def with_warnings(response: web.Response, warnings: list[str]) -> web.Response:
    """Add kube's ``Warning: 299 - "..."`` headers (kubectl prints them)."""
    for text in warnings:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{escaped}"')
    return response
