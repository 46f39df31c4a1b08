"""The verbs on a resource's paths, but watch (:mod:`._watch`): how each request
becomes a store call and its answer. On a collection: list (``GET``), create
(``POST``), deletecollection (``DELETE``); on an object or its subresource: get,
update (``PUT``), patch and server-side apply (``PATCH``), delete.

Private to :mod:`kubereflector.testing.apiserver`. Event loop only. Each function
raises :class:`~._statuses.StatusError` for the handler to answer. Given ``writes``,
writes go through admission and conversion when they need it (:mod:`._writes`), and
reads of a CRD's resource are converted to the version the request addressed (``info``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from ...errors import failure_status
from ...protobuf._encode import encode_list
from ...protobuf._schema import kind_type
from ._negotiation import (
    PATCH_TYPES,
    json_response,
    negotiate,
    not_acceptable,
    patch_type,
    protobuf_response,
    read_body,
    with_warnings,
)
from ._openapi import check_fields, check_patched_fields
from ._queries import matching, parse_bool, parse_query
from ._records import ENCODER, Bucket, Record, decode
from ._resources import ServedResource
from ._statuses import StatusError, bad_request, method_not_allowed
from ._store import Store, WriteRequest
from ._strategy import patched
from ._tables import table
from ._validation import validate_options

if TYPE_CHECKING:
    from ._writes import Writes

__all__ = ["require_verb", "serve_collection", "serve_object"]

_MANAGER_MAX: Final = 128


def require_verb(info: ServedResource, verb: str, method: str) -> None:
    """405 unless ``info`` serves ``verb`` (requested with ``method``)."""
    if verb not in info.verbs:
        raise method_not_allowed(method, info.group_resource)


async def serve_collection(
    store: Store,
    request: web.BaseRequest,
    bucket: Bucket,
    namespace: str | None,
    *,
    writes: Writes | None = None,
    info: ServedResource | None = None,
) -> web.Response:
    """List, create or deletecollection on ``bucket``'s collection (in ``namespace``),
    in ``info``'s version (default: the storage version)."""
    info = info or bucket.info
    method = request.method
    params = request.query
    if method == "GET":
        accept = request.headers.get("Accept", "")
        if writes is not None and writes.converts(bucket):
            return await _converted_list(writes, bucket, info, namespace, params, accept)
        return _list(store, bucket, namespace, params, accept)
    if method == "POST":
        if info.namespaced and namespace is None:
            raise method_not_allowed(method, info.group_resource)
        require_verb(info, "create", method)
        writer = _writer(request, "CreateOptions")
        body = await read_body(request)
        warnings = check_fields(info, body, params.get("fieldValidation", ""))
        if writes is not None and not writes.plain(bucket, info):
            out, more = await writes.create(
                request, bucket, info, body, namespace, writer, _options(request, writer)
            )
            return with_warnings(json_response(out, 201), warnings + more)
        record = store.create(bucket, body, namespace, request=writer)
        return with_warnings(json_response(record.full(), 201), warnings)
    if method == "DELETE":
        require_verb(info, "deletecollection", method)
        return await _delete_collection(store, request, bucket, namespace, writes, info)
    raise method_not_allowed(method, info.group_resource)


async def serve_object(
    store: Store,
    request: web.BaseRequest,
    bucket: Bucket,
    namespace: str | None,
    name: str,
    subresource: str | None,
    *,
    writes: Writes | None = None,
    info: ServedResource | None = None,
) -> web.Response:
    """Get, update, patch (or apply) or delete the object ``name`` of ``bucket`` (in
    ``namespace``), or its ``subresource``, in ``info``'s version (default: the storage
    version)."""
    info = info or bucket.info
    method = request.method
    params = request.query
    if method == "GET":
        require_verb(info, "get", method)
        record = store.get(bucket, namespace, name)
        if writes is not None and record.obj.get("apiVersion") != info.api_version:
            record = Record(await writes.out(info, record), info.typemeta_prefix)
        return _one(record, request.headers.get("Accept", ""), info)
    if method == "PUT":
        require_verb(info, "update", method)
        writer = _writer(request, "UpdateOptions")
        body = await read_body(request)
        warnings = check_fields(info, body, params.get("fieldValidation", ""))
        if writes is not None and not writes.plain(bucket, info):
            out, more = await writes.update(
                request,
                bucket,
                info,
                namespace,
                name,
                body,
                subresource,
                writer,
                _options(request, writer),
            )
            return with_warnings(json_response(out), warnings + more)
        record = store.update(
            bucket, namespace, name, body, subresource=subresource, request=writer
        )
        return with_warnings(json_response(record.full()), warnings)
    if method == "PATCH":
        require_verb(info, "patch", method)
        return await _patch(store, request, bucket, namespace, name, subresource, writes, info)
    if method == "DELETE" and subresource is None:
        require_verb(info, "delete", method)
        return await _delete(store, request, bucket, namespace, name, writes, info)
    raise method_not_allowed(method, info.group_resource)


def _options(request: web.BaseRequest, writer: WriteRequest) -> dict[str, Any]:
    """The write's options as admission webhooks get them (``dryRun``, ``fieldManager``
    as the client gave it, ``fieldValidation``)."""
    params = request.query
    return {
        "dryRun": params.getall("dryRun", []),
        "fieldManager": params.get("fieldManager"),
        "fieldValidation": params.get("fieldValidation"),
    }


async def _converted_list(
    writes: Writes,
    bucket: Bucket,
    info: ServedResource,
    namespace: str | None,
    params: Mapping[str, str],
    accept: str,
) -> web.Response:
    """A list of a CRD's resource, its items converted to ``info``'s version (one
    conversion of every item not in it, as kube converts a list)."""
    store = writes.store
    require_verb(info, "list", "GET")
    mode = negotiate(accept, "list")
    if mode is None:
        raise not_acceptable()
    query = parse_query(params, watch=False)
    page = store.list_page(bucket, namespace, query)
    records = page.records
    if mode != "meta" and writes.conversions.needs([r.obj for r in records], info):
        objs = await writes.conversions.convert(info, [r.obj for r in records])
        records = [Record(obj, info.typemeta_prefix) for obj in objs]
    if mode == "table":
        include = params.get("includeObject", "Metadata")
        return json_response(ENCODER.encode(table(info, records, page.rv, page.continue_, include)))
    meta: dict[str, Any] = {"resourceVersion": str(page.rv)}
    if page.continue_:
        meta["continue"] = page.continue_
    if page.remaining is not None:
        meta["remainingItemCount"] = page.remaining
    if mode == "meta":
        head = b'{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":'
        items = b",".join([r.meta_json() for r in records])
    else:
        head = _list_head(info)
        items = b",".join([r.full() for r in records])
    return json_response(head + ENCODER.encode(meta) + b',"items":[' + items + b"]}")


def _one(record: Record, accept: str, info: ServedResource) -> web.Response:
    mode = negotiate(accept, "object", protobuf=_has_protobuf(info))
    if mode is None:
        raise not_acceptable()
    if mode == "json":
        return json_response(record.full())
    if mode == "protobuf":
        message = record.protobuf(_protobuf_type(info, info.kind))
        return protobuf_response(info.api_version, info.kind, message)
    if mode == "meta":
        return json_response(record.meta_json())
    return json_response(ENCODER.encode(table(info, [record], record.rv, "", "Metadata")))


def _list(
    store: Store, bucket: Bucket, namespace: str | None, params: Mapping[str, str], accept: str
) -> web.Response:
    info = bucket.info
    require_verb(info, "list", "GET")
    mode = negotiate(accept, "list", protobuf=_has_protobuf(info))
    if mode is None:
        raise not_acceptable()
    query = parse_query(params, watch=False, sharding=store.sharded_list_watch)
    page = store.list_page(bucket, namespace, query)
    if mode == "table":
        include = params.get("includeObject", "Metadata")
        return json_response(
            ENCODER.encode(table(info, page.records, page.rv, page.continue_, include))
        )
    meta: dict[str, Any] = {"resourceVersion": str(page.rv)}
    if page.continue_:
        meta["continue"] = page.continue_
    if page.remaining is not None:
        meta["remainingItemCount"] = page.remaining
    if query.shard_selector is not None:
        meta["shardInfo"] = {"selector": str(query.shard_selector)}
    if mode == "protobuf":
        item_type = _protobuf_type(info, info.kind)
        messages = [r.protobuf(item_type) for r in page.records]
        message = encode_list(_protobuf_type(info, info.list_kind), meta, messages)
        return protobuf_response(info.api_version, info.list_kind, message)
    if mode == "meta":
        head = b'{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":'
        items = b",".join([r.meta_json() for r in page.records])
    else:
        head = _list_head(info)
        if info.builtin:  # kube-apiserver sends built-in list items without kind/apiVersion
            items = b",".join([r.body for r in page.records])
        else:
            items = b",".join([r.full() for r in page.records])
    return json_response(head + ENCODER.encode(meta) + b',"items":[' + items + b"]}")


async def _patch(
    store: Store,
    request: web.BaseRequest,
    bucket: Bucket,
    namespace: str | None,
    name: str,
    subresource: str | None,
    writes: Writes | None,
    info: ServedResource,
) -> web.Response:
    params = request.query
    kind = patch_type(request)
    if kind is None or (kind == "strategic" and not info.builtin):
        raise StatusError(
            failure_status(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media "
                f"types include: {', '.join(PATCH_TYPES)}",
            )
        )
    force = parse_bool("force", params["force"]) if "force" in params else None
    writer = _writer(request, "PatchOptions", apply=kind == "apply", force=force)
    patch = await read_body(request, raw_json=kind != "apply")
    warnings = []
    directive = params.get("fieldValidation", "")
    if not info.builtin and kind in ("merge", "json"):
        # kube checks the fields of a custom resource's patched object
        existing = store.get(bucket, namespace, name)
        result = patched(info, decode(existing.full()), kind, patch)
        warnings = check_patched_fields(info, result, directive)
    elif not info.builtin and kind == "apply":
        check_fields(info, {}, directive)  # unknown fields fail the apply itself (500)
    elif kind != "json":  # merge, strategic and apply bodies have the object's shape
        warnings = check_fields(info, patch, directive)
    if writes is not None and not writes.plain(bucket, info):
        options = _options(request, writer)
        if kind == "apply":
            options["force"] = force
            out, more, created = await writes.apply(
                request,
                bucket,
                info,
                namespace,
                name,
                patch,
                subresource,
                writer,
                bool(force),
                options,
            )
            return with_warnings(json_response(out, 201 if created else 200), warnings + more)
        out, more = await writes.patch(
            request, bucket, info, namespace, name, kind, patch, subresource, writer, options
        )
        return with_warnings(json_response(out), warnings + more)
    if kind == "apply":
        existed = store.exists(bucket, namespace, name)
        record = store.apply(
            bucket,
            namespace,
            name,
            patch,
            request=writer,
            force=bool(force),
            subresource=subresource,
        )
        return with_warnings(json_response(record.full(), 200 if existed else 201), warnings)
    record = store.patch(
        bucket, namespace, name, kind, patch, subresource=subresource, request=writer
    )
    return with_warnings(json_response(record.full()), warnings)


async def _delete(
    store: Store,
    request: web.BaseRequest,
    bucket: Bucket,
    namespace: str | None,
    name: str,
    writes: Writes | None,
    info: ServedResource,
) -> web.Response:
    options = await _delete_options(request)
    warnings: list[str] = []
    if writes is not None and not writes.plain(bucket, info):
        record, gone, warnings = await writes.delete(
            request,
            bucket,
            info,
            namespace,
            name,
            options.get("preconditions"),
            bool(options.get("dryRun")),
            options,
        )
    else:
        record, gone = store.delete(
            bucket,
            namespace,
            name,
            options.get("preconditions"),
            dry_run=bool(options.get("dryRun")),
        )
    if not gone or info.return_deleted_object:
        out = record.full() if writes is None else await writes.encoded(info, record)
        return with_warnings(json_response(out), warnings)
    details: dict[str, Any] = {"name": name}
    if info.group:
        details["group"] = info.group
    details["kind"] = info.plural
    details["uid"] = record.obj["metadata"].get("uid", "")
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }
    return with_warnings(json_response(ENCODER.encode(status)), warnings)


async def _delete_collection(
    store: Store,
    request: web.BaseRequest,
    bucket: Bucket,
    namespace: str | None,
    writes: Writes | None,
    info: ServedResource,
) -> web.Response:
    query = parse_query(request.query, watch=False, sharding=store.sharded_list_watch)
    options = await _delete_options(request)
    deleted = []
    warnings: list[str] = []
    admitted = writes is not None and not writes.plain(bucket, info)
    for record in matching(bucket, namespace, query):
        if admitted:
            assert writes is not None
            final, _, more = await writes.delete(
                request,
                bucket,
                info,
                record.namespace or None,
                record.name,
                options.get("preconditions"),
                bool(options["dryRun"]),
                options,
            )
            warnings += [w for w in more if w not in warnings]
        else:
            final, _ = store.delete(
                bucket,
                record.namespace or None,
                record.name,
                options.get("preconditions"),
                dry_run=bool(options["dryRun"]),
            )
        deleted.append(final)
    head = _list_head(info)
    meta = {"resourceVersion": str(store.rv)}
    if writes is not None and writes.conversions.needs([r.obj for r in deleted], info):
        objs = await writes.conversions.convert(info, [r.obj for r in deleted])
        deleted = [Record(obj, info.typemeta_prefix) for obj in objs]
    items = b",".join([r.body if info.builtin else r.full() for r in deleted])
    return with_warnings(
        json_response(head + ENCODER.encode(meta) + b',"items":[' + items + b"]}"), warnings
    )


async def _delete_options(request: web.BaseRequest) -> dict[str, Any]:
    """The request's ``DeleteOptions`` (body and query), checked."""
    options = await read_body(request, optional=True)
    if not isinstance(options, dict):
        raise bad_request("the body of a delete is a DeleteOptions object")
    params = request.query
    dry_run = options.get("dryRun") or params.getall("dryRun", [])
    if not isinstance(dry_run, list) or not all(isinstance(v, str) for v in dry_run):
        raise bad_request("dryRun is a list of strings")
    options["dryRun"] = dry_run
    policy = options.get("propagationPolicy", params.get("propagationPolicy"))
    validate_options("DeleteOptions", dry_run=dry_run, propagation_policy=policy)
    preconditions = options.get("preconditions")
    if preconditions is not None and not isinstance(preconditions, dict):
        raise bad_request("preconditions must be an object")
    return options


def _writer(
    request: web.BaseRequest, kind: str, *, apply: bool = False, force: bool | None = None
) -> WriteRequest:
    """The field manager and dry-run of a write (``kind``: its options' kind), checked:
    ``fieldManager``, else the first word of the ``User-Agent`` (as kube does)."""
    params = request.query
    dry_run = params.getall("dryRun", [])
    manager = params.get("fieldManager")
    validate_options(kind, dry_run=dry_run, field_manager=manager, apply=apply, force=force)
    if not manager:
        agent = request.headers.get("User-Agent", "")
        manager = agent.split("/", 1)[0][:_MANAGER_MAX] or "unknown"
    return WriteRequest(manager, dry_run=bool(dry_run))


def _has_protobuf(info: ServedResource) -> bool:
    """Whether kube-apiserver answers ``info``'s objects in protobuf when asked
    (its built-in kinds the protobuf table knows; never a custom resource)."""
    return info.builtin and kind_type(info.api_version, info.kind) is not None


def _protobuf_type(info: ServedResource, kind: str) -> str:
    """The protobuf type of ``kind`` in ``info``'s version (one :func:`_has_protobuf` allows)."""
    type_name = kind_type(info.api_version, kind)
    assert type_name is not None, kind
    return type_name


def _list_head(info: ServedResource) -> bytes:
    kind, api_version = info.list_kind, info.api_version
    return f'{{"kind":"{kind}","apiVersion":"{api_version}","metadata":'.encode()
