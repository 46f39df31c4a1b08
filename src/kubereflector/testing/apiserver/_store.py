"""The emulator's storage: objects, one global resourceVersion, history, list/watch plans.

Private to :mod:`kubereflector.testing.apiserver`. No I/O and no awaiting: every
method runs to completion on the event loop, so each write is atomic with
respect to every request and watch.

Ownership: a stored :class:`Record` (its ``obj`` dict and its encoded ``body``)
is immutable once stored; a write builds a new dict (copy on write) and a new
Record. Records are shared by list responses, watch events and history.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import collections
import random
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from ...clock import Clock
from ...errors import failure_status
from ...selectors import FieldSelector, LabelSelector
from ._fields import ApplyConflict, FieldManagers
from ._patch import PatchFailed, json_patch, merge_patch, strategic_merge_patch
from ._resources import BUILTIN_RESOURCES, ServedResource
from ._statuses import (
    FieldError,
    StatusError,
    already_exists,
    bad_request,
    conflict,
    expired,
    invalid,
    invalid_resource_version,
    not_found,
    too_large,
    too_old,
)
from ._timestamps import timestamp
from ._validation import validate_object, validate_update

ENCODER: Final = msgspec.json.Encoder()
decode: Final = msgspec.json.decode

META_PREFIX: Final = b'{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":'
INITIAL_NAMESPACES: Final = ("default", "kube-system", "kube-public")
_CONTINUE_VERSION: Final = "meta.k8s.io/v1"
_SERVER_FIELDS: Final = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
_GENERATE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_CONTINUE_EXPIRED: Final = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token "
    "in this response to retrieve the remainder of the results. Continuing with the "
    "provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may "
    "show up in the list."
)


# -- records and events -----------------------------------------------------------------------


class Record:
    """One stored object: the dict (with kind/apiVersion) and its JSON without them."""

    __slots__ = ("body", "key", "name", "namespace", "obj", "prefix")

    def __init__(self, obj: dict[str, Any], prefix: bytes) -> None:
        meta = obj["metadata"]
        self.obj = obj
        self.name: str = meta["name"]
        self.namespace: str = meta.get("namespace") or ""
        self.key = f"{self.namespace}/{self.name}" if self.namespace else self.name
        self.prefix = prefix
        self.body: bytes = ENCODER.encode(
            {k: v for k, v in obj.items() if k != "kind" and k != "apiVersion"}
        )

    @property
    def rv(self) -> int:
        return int(self.obj["metadata"]["resourceVersion"])

    def full(self) -> bytes:
        """The object's JSON with ``kind`` and ``apiVersion`` first."""
        return self.prefix + self.body[1:]

    def meta_json(self) -> bytes:
        """The object as a ``PartialObjectMetadata``."""
        return META_PREFIX + ENCODER.encode(self.obj["metadata"]) + b"}"


def event_line(event_type: str, obj_json: bytes) -> bytes:
    return b'{"type":"' + event_type.encode() + b'","object":' + obj_json + b"}\n"


class Event:
    """One history entry; its encodings are computed once and shared by every watcher."""

    __slots__ = ("_line", "_meta_line", "prev", "record", "rv", "time", "type")

    def __init__(
        self, rv: int, event_type: str, record: Record, prev: Record | None, time: float
    ) -> None:
        self.rv = rv
        self.type = event_type
        self.record = record
        self.prev = prev
        self.time = time
        self._line: bytes | None = None
        self._meta_line: bytes | None = None

    def line(self) -> bytes:
        if self._line is None:
            self._line = event_line(self.type, self.record.full())
        return self._line

    def meta_line(self) -> bytes:
        if self._meta_line is None:
            self._meta_line = event_line(self.type, self.record.meta_json())
        return self._meta_line


class Bucket:
    """The objects, history and open watches of one resource."""

    __slots__ = ("_sorted", "history", "info", "objects", "oldest", "watchers")

    def __init__(self, info: ServedResource, oldest: int) -> None:
        self.info = info
        self.objects: dict[str, Record] = {}
        self.history: collections.deque[Event] = collections.deque()
        self.oldest = oldest  # every event of this resource with rv > oldest is in history
        self.watchers: set[Any] = set()
        self._sorted: list[str] | None = None

    def sorted_keys(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted

    def put(self, record: Record) -> None:
        if record.key not in self.objects:
            self._sorted = None
        self.objects[record.key] = record

    def remove(self, key: str) -> None:
        del self.objects[key]
        self._sorted = None

    def state_at(self, rv: int, current: int) -> tuple[dict[str, Record], list[str]]:
        """The objects and their sorted keys as they were at ``rv`` (``oldest <= rv``)."""
        if rv >= current:
            return self.objects, self.sorted_keys()
        state = dict(self.objects)
        for event in reversed(self.history):
            if event.rv <= rv:
                break
            if event.type == "ADDED":
                state.pop(event.record.key, None)
            elif event.prev is not None:
                state[event.record.key] = event.prev
        return state, sorted(state)


def key_range(keys: list[str], namespace: str | None) -> tuple[int, int]:
    """The slice of sorted ``keys`` in ``namespace`` (all for ``None``)."""
    if not namespace:
        return 0, len(keys)
    # "ns/" .. "ns0": '0' is the character after '/'.
    return bisect.bisect_left(keys, namespace + "/"), bisect.bisect_left(keys, namespace + "0")


# -- queries ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Query:
    """The options of a list or watch request (``metav1.ListOptions``)."""

    resource_version: str = ""
    resource_version_match: str = ""
    limit: int = 0
    continue_: str = ""
    label_selector: LabelSelector = field(default_factory=LabelSelector.everything)
    field_selector: FieldSelector = field(default_factory=FieldSelector.everything)
    send_initial_events: bool | None = None
    allow_watch_bookmarks: bool = False
    timeout_seconds: int | None = None
    watch: bool = False

    def validate(self, info: ServedResource) -> None:
        """kube's ValidateListOptions (422), and the resource's field-selector support (400)."""
        errors: list[FieldError] = []
        match = self.resource_version_match
        if self.watch:
            if self.send_initial_events is not None and match != "NotOlderThan":
                errors.append(
                    FieldError(
                        "resourceVersionMatch",
                        "Forbidden",
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    )
                )
            if match:
                if self.send_initial_events is None:
                    errors.append(
                        FieldError(
                            "resourceVersionMatch",
                            "Forbidden",
                            "resourceVersionMatch is forbidden for watch unless "
                            "sendInitialEvents is provided",
                        )
                    )
                if match != "NotOlderThan":
                    errors.append(
                        FieldError("resourceVersionMatch", "NotSupported", '"NotOlderThan"', match)
                    )
                if self.continue_:
                    errors.append(
                        FieldError(
                            "resourceVersionMatch",
                            "Forbidden",
                            "resourceVersionMatch is forbidden when continue is provided",
                        )
                    )
        else:
            if match:
                if not self.resource_version:
                    errors.append(
                        FieldError(
                            "resourceVersionMatch",
                            "Forbidden",
                            "resourceVersionMatch is forbidden unless resourceVersion is provided",
                        )
                    )
                if self.continue_:
                    errors.append(
                        FieldError(
                            "resourceVersionMatch",
                            "Forbidden",
                            "resourceVersionMatch is forbidden when continue is provided",
                        )
                    )
                if match not in ("Exact", "NotOlderThan"):
                    errors.append(
                        FieldError(
                            "resourceVersionMatch",
                            "NotSupported",
                            '"Exact", "NotOlderThan", ""',
                            match,
                        )
                    )
                if match == "Exact" and self.resource_version == "0":
                    errors.append(
                        FieldError(
                            "resourceVersionMatch",
                            "Forbidden",
                            'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                        )
                    )
            if self.send_initial_events is not None:
                errors.append(
                    FieldError(
                        "sendInitialEvents", "Forbidden", "sendInitialEvents is forbidden for list"
                    )
                )
        if errors:
            raise invalid("ListOptions", "", errors, "meta.k8s.io")
        for name in self.field_selector.fields:
            if name not in info.field_selectors:
                raise bad_request(f"field label not supported: {name}")

    def matches(self, obj: Mapping[str, Any]) -> bool:
        labels = self.label_selector
        if not labels.empty and not labels.matches((obj.get("metadata") or {}).get("labels")):
            return False
        fields = self.field_selector
        return fields.empty or fields.matches_object(obj)

    @property
    def filtering(self) -> bool:
        return not (self.label_selector.empty and self.field_selector.empty)


def parse_rv(text: str, *, from_etcd: bool = False) -> int | None:
    """``None`` for ``""``/``"0"``, else the number (not one: see
    :func:`invalid_resource_version`)."""
    if text in ("", "0"):
        return None
    if not (text.isascii() and text.isdigit()):
        raise StatusError(invalid_resource_version(text, from_etcd=from_etcd))
    return int(text)


def encode_continue(rv: int, next_key: str) -> str:
    raw = ENCODER.encode({"v": _CONTINUE_VERSION, "rv": rv, "start": next_key})
    return base64.b64encode(raw).decode("ascii")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        data = decode(base64.b64decode(token.encode("ascii"), validate=True))
        if not isinstance(data, dict) or data.get("v") != _CONTINUE_VERSION:
            raise ValueError("unknown token version")
        rv, start = data["rv"], data["start"]
        if type(rv) is not int or rv < -1 or rv == 0 or not isinstance(start, str):
            raise ValueError("malformed token")
    except (ValueError, KeyError, UnicodeError, binascii.Error, msgspec.DecodeError) as exc:
        raise bad_request(f"continue key is not valid: {exc}") from None
    return rv, start


@dataclass(slots=True)
class ListPage:
    records: list[Record]
    rv: int
    continue_: str = ""
    remaining: int | None = None


@dataclass(slots=True)
class WatchPlan:
    """What a new watch sends before live events, and from which resourceVersion on."""

    from_rv: int = 0
    initial: list[Record] = field(default_factory=list)
    replay: list[Event] = field(default_factory=list)
    end_bookmark: bool = False
    error: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class WriteRequest:
    """A write over the API: its field manager, and whether it is a dry run."""

    manager: str
    dry_run: bool = False


# -- the store --------------------------------------------------------------------------------


class Store:
    """Every resource's objects under one resourceVersion counter.

    ``history_limit`` events per resource are retained (and, when
    ``history_seconds`` is set, only those younger than that on ``clock``).
    """

    def __init__(self, *, clock: Clock, history_limit: int, history_seconds: float | None) -> None:
        self.clock = clock
        self.history_limit = history_limit
        self.history_seconds = history_seconds
        self.rv = 0
        self.buckets: dict[str, Bucket] = {}
        self.by_gvr: dict[tuple[str, str, str], Bucket] = {}
        # Hooks of resources with server-side behaviour (testing/_apiserver_crd.py):
        # ``admission[group_resource](obj)`` may amend or refuse (raise StatusError) an
        # object about to be stored; every observer sees each stored change.
        self.admission: dict[str, Callable[[dict[str, Any]], None]] = {}
        self.observers: list[Callable[[Bucket, str, Record], None]] = []
        for info in BUILTIN_RESOURCES:
            self.register(info)
        namespaces = self.buckets["namespaces"]
        for name in INITIAL_NAMESPACES:
            self.create(namespaces, {"metadata": {"name": name}}, None)

    # -- resources ---------------------------------------------------------------------------

    def register(self, info: ServedResource) -> Bucket:
        if info.group_resource in self.buckets:
            raise ValueError(f"resource {info.group_resource!r} is already registered")
        if info.group == "" and not info.builtin:
            raise ValueError("registered resources need a group (the core group is built in)")
        bucket = Bucket(info, self.rv)
        self.buckets[info.group_resource] = bucket
        self.by_gvr[(info.group, info.version, info.plural)] = bucket
        return bucket

    def unregister(self, group_resource: str) -> None:
        """Stop serving a resource: its objects are deleted (watchers see it) and its
        watches end, as when kube-apiserver removes a CRD."""
        bucket = self.buckets[group_resource]
        for record in list(bucket.objects.values()):
            self._remove(bucket, record)
        for watcher in list(bucket.watchers):
            watcher.end(discard=False)
        del self.buckets[group_resource]
        del self.by_gvr[(bucket.info.group, bucket.info.version, bucket.info.plural)]

    def resources(self) -> list[ServedResource]:
        return [b.info for b in self.buckets.values()]

    def resolve(self, resource: str) -> Bucket:
        """A bucket by ``"pods"``, ``"deployments.apps"`` or an unambiguous plural."""
        bucket = self.buckets.get(resource)
        if bucket is not None:
            return bucket
        found = [b for b in self.buckets.values() if b.info.plural == resource]
        if len(found) == 1:
            return found[0]
        if found:
            names = sorted(b.info.group_resource for b in found)
            raise ValueError(f"resource {resource!r} is ambiguous: use one of {names}")
        raise ValueError(f"unknown resource {resource!r} (known: {sorted(self.buckets)})")

    # -- reads -------------------------------------------------------------------------------

    def get(self, bucket: Bucket, namespace: str | None, name: str) -> Record:
        key = f"{namespace}/{name}" if bucket.info.namespaced and namespace else name
        record = bucket.objects.get(key)
        if record is None or (bucket.info.namespaced and not namespace):
            raise not_found(bucket.info, name)
        return record

    def exists(self, bucket: Bucket, namespace: str | None, name: str) -> bool:
        key = f"{namespace}/{name}" if bucket.info.namespaced else name
        return key in bucket.objects

    def iter_namespace(self, bucket: Bucket, namespace: str | None) -> Iterator[Record]:
        keys = bucket.sorted_keys()
        start, end = key_range(keys, namespace if bucket.info.namespaced else None)
        objects = bucket.objects
        for key in keys[start:end]:
            yield objects[key]

    def prune(self, bucket: Bucket) -> None:
        history = bucket.history
        while len(history) > self.history_limit:
            bucket.oldest = history.popleft().rv
        if self.history_seconds is not None and history:
            cutoff = self.clock.now() - self.history_seconds
            while history and history[0].time < cutoff:
                bucket.oldest = history.popleft().rv

    def compact(self) -> None:
        for bucket in self.buckets.values():
            bucket.history.clear()
            bucket.oldest = self.rv

    def list_page(self, bucket: Bucket, namespace: str | None, query: Query) -> ListPage:
        """One page of a list, with kube-apiserver's resourceVersion semantics."""
        query.validate(bucket.info)
        self.prune(bucket)
        current = self.rv
        paging = True
        start_key = ""
        if query.continue_:
            if query.resource_version not in ("", "0"):
                raise bad_request("specifying resource version is not allowed when using continue")
            rv, start_key = decode_continue(query.continue_)
            if rv == -1:
                rv = current
            elif rv > current:
                raise bad_request("continue key is not valid: resourceVersion is in the future")
            elif rv < bucket.oldest:
                raise expired(_CONTINUE_EXPIRED, encode_continue(-1, start_key))
        else:
            match = query.resource_version_match
            requested = parse_rv(
                query.resource_version, from_etcd=query.limit > 0 or match == "Exact"
            )
            if requested is None:
                rv = current
                # "0" is served from the watch cache, which does not page.
                paging = query.resource_version == ""
            elif match == "Exact" or (not match and query.limit > 0):
                if requested > current:
                    raise StatusError(too_large(requested, current))
                if requested < bucket.oldest:
                    raise expired("The resourceVersion for the provided list is too old.")
                rv = requested
            else:  # NotOlderThan (explicit or legacy without limit): the cache, no paging
                if requested > current:
                    raise StatusError(too_large(requested, current))
                rv = current
                paging = False
        objects, keys = bucket.state_at(rv, current)
        start, end = key_range(keys, namespace if bucket.info.namespaced else None)
        if start_key:
            start = max(start, bisect.bisect_left(keys, start_key))
        limit = query.limit if paging and query.limit > 0 else 0
        filtering = query.filtering
        page: list[Record] = []
        index = start
        while index < end:
            record = objects[keys[index]]
            index += 1
            if filtering and not query.matches(record.obj):
                continue
            page.append(record)
            if limit and len(page) >= limit:
                break
        result = ListPage(page, rv)
        if limit and len(page) >= limit:
            if filtering:
                more = any(query.matches(objects[k].obj) for k in keys[index:end])
                remaining = None
            else:
                more = index < end
                remaining = end - index
            if more:
                result.continue_ = encode_continue(rv, page[-1].key + "\x00")
                result.remaining = remaining
        return result

    def plan_watch(self, bucket: Bucket, namespace: str | None, query: Query) -> WatchPlan:
        """Where a watch starts and what it sends first (kube's cacher semantics)."""
        query.validate(bucket.info)
        self.prune(bucket)
        current = self.rv
        send_initial = query.send_initial_events
        if (
            send_initial is None
            and not query.resource_version_match
            and query.resource_version in ("", "0")
        ):
            # SetListOptionsDefaults with the WatchList feature (on by default since 1.32).
            send_initial = True
        requested = parse_rv(query.resource_version)
        plan = WatchPlan(from_rv=current)
        if send_initial:
            if requested is not None and requested > current:
                plan.error = too_large(requested, current)
                return plan
            plan.initial = list(self.iter_namespace(bucket, namespace))
            plan.end_bookmark = query.allow_watch_bookmarks
        elif requested is None:
            pass  # sendInitialEvents=false from "now"
        elif requested > current:
            plan.from_rv = requested  # kube waits for the resourceVersion to come
        elif requested < bucket.oldest:
            plan.error = too_old(requested, bucket.oldest)
        else:
            plan.from_rv = requested
            plan.replay = [e for e in bucket.history if e.rv > requested]
        return plan

    # -- writes ------------------------------------------------------------------------------

    def _emit(self, bucket: Bucket, event_type: str, record: Record, prev: Record | None) -> None:
        event = Event(self.rv, event_type, record, prev, self.clock.now())
        bucket.history.append(event)
        self.prune(bucket)
        for watcher in list(bucket.watchers):
            watcher.offer(event)
        for observer in self.observers:
            observer(bucket, event_type, record)

    def _commit(
        self,
        bucket: Bucket,
        obj: dict[str, Any],
        event_type: str,
        prev: Record | None,
        *,
        dry_run: bool,
    ) -> Record:
        """Store ``obj`` (a new object or a new state of ``prev``) in ``bucket`` at the
        next resourceVersion, written into its metadata, and send the ``event_type``
        event to the bucket's watchers and the observers. Returns the stored record;
        for a ``dry_run``, only the record of ``obj`` as it is (nothing stored, no new
        resourceVersion), as kube answers a dry run."""
        if dry_run:
            return Record(obj, bucket.info.typemeta_prefix)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        record = Record(obj, bucket.info.typemeta_prefix)
        bucket.put(record)
        self._emit(bucket, event_type, record, prev)
        return record

    def _body(self, info: ServedResource, obj: Any, *, strict: bool) -> dict[str, Any]:
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

    def _admit(self, info: ServedResource, obj: dict[str, Any]) -> None:
        """Run the resource's admission hook (if any) on a validated object."""
        admit = self.admission.get(info.group_resource)
        if admit is not None:
            admit(obj)

    def _check_namespace(
        self, info: ServedResource, meta: dict[str, Any], namespace: str | None
    ) -> None:
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

    def create(
        self,
        bucket: Bucket,
        obj: Any,
        namespace: str | None,
        *,
        request: WriteRequest | None = None,
    ) -> Record:
        """POST: a new object, written by ``request`` (``None``: the Python data API,
        which drops server-set fields instead of refusing a ``resourceVersion``, keeps
        ``status`` and records no field manager)."""
        info = bucket.info
        body = self._new_object(bucket, obj, namespace, strict=request is not None)
        if request is not None:
            managers = FieldManagers.decode(body["metadata"].get("managedFields"))
            managers.update(
                _EMPTY,
                body,
                manager=request.manager,
                api_version=info.api_version,
                subresource="",
                now=body["metadata"]["creationTimestamp"],
                schema=info.schema,
            )
            _set_managed(body["metadata"], managers)
        return self._insert(bucket, body, dry_run=request is not None and request.dry_run)

    def _new_object(
        self, bucket: Bucket, obj: Any, namespace: str | None, *, strict: bool
    ) -> dict[str, Any]:
        """A create's object, checked and stamped (not stored)."""
        info = bucket.info
        body = self._body(info, obj, strict=strict)
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
        self._check_namespace(info, meta, namespace)
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
        self._admit(info, body)
        name = meta["name"]
        if info.namespaced:
            ns = meta["namespace"]
            namespaces = self.buckets["namespaces"]
            if ns not in namespaces.objects:
                raise not_found(namespaces.info, ns)
            key = f"{ns}/{name}"
        else:
            key = name
        if key in bucket.objects:
            raise already_exists(info, name)
        meta["uid"] = str(uuid.uuid4())
        if info.generation:
            meta["generation"] = 1
        meta["creationTimestamp"] = timestamp()
        return body

    def _insert(self, bucket: Bucket, body: dict[str, Any], *, dry_run: bool) -> Record:
        """Default and store a new object (a dry run: only answer it, without a
        resourceVersion, as kube does)."""
        info = bucket.info
        _apply_defaults(info, body)
        return self._commit(bucket, body, "ADDED", None, dry_run=dry_run)

    def update(
        self,
        bucket: Bucket,
        namespace: str | None,
        name: str,
        obj: Any,
        *,
        subresource: str | None = None,
        request: WriteRequest | None = None,
    ) -> Record:
        """PUT (of the object or its ``status`` subresource) by ``request``. The main
        resource cannot change ``status`` of a resource with a status subresource
        (kube's strategies), nor the status subresource anything but ``status``;
        ``request=None`` (the Python data API) writes everything given, managedFields
        as given."""
        info = bucket.info
        existing = self.get(bucket, namespace, name)
        body = self._body(info, obj, strict=request is not None)
        new = self._replacement(info, existing, body, name, subresource, request is not None)
        managers = None
        if request is not None:
            managers = self._managers_for(existing, body, subresource)
            managers.update(
                existing.obj,
                new,
                manager=request.manager,
                api_version=info.api_version,
                subresource=subresource or "",
                now=timestamp(),
                schema=info.schema,
            )
        return self._write(
            bucket, existing, new, managers, dry_run=request is not None and request.dry_run
        )

    def _replacement(
        self,
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
        self._check_namespace(info, meta, existing.namespace or None)
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

    @staticmethod
    def _managers_for(
        existing: Record, body: Mapping[str, Any], subresource: str | None
    ) -> FieldManagers:
        """The managers an update starts from: those the body carries, if it carries
        any (kube lets a client rewrite managedFields), else the stored ones."""
        given = body["metadata"].get("managedFields")
        if subresource or not given:
            given = existing.obj["metadata"].get("managedFields")
        return FieldManagers.decode(given)

    def _write(
        self,
        bucket: Bucket,
        existing: Record,
        new: dict[str, Any],
        managers: FieldManagers | None,
        *,
        dry_run: bool,
    ) -> Record:
        """Validate and store the update of ``existing`` to ``new``: nothing for a no-op
        (managedFields timestamps aside), the deletion for an object being deleted
        whose last finalizer goes."""
        info = bucket.info
        old = existing.obj
        if managers is not None:
            _set_managed(new["metadata"], managers)
        validate_update(info, old, new)
        self._admit(info, new)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if _same(new, old):
            return existing  # a no-op update writes nothing, as in kube
        if old["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            # kube deletes instead of writing: watchers see the stored state DELETED, the
            # writer gets its object (at the resourceVersion it read).
            if not dry_run:
                self._remove(bucket, existing)
            return Record(new, info.typemeta_prefix)
        return self._commit(bucket, new, "MODIFIED", existing, dry_run=dry_run)

    def patch(
        self,
        bucket: Bucket,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: Any,
        *,
        subresource: str | None = None,
        request: WriteRequest | None = None,
    ) -> Record:
        """PATCH with ``patch_type`` ``"json"``, ``"merge"`` or ``"strategic"``: the
        patched object is written as :meth:`update` writes it."""
        existing = self.get(bucket, namespace, name)
        doc = decode(existing.full())
        try:
            if patch_type == "json":
                patched = json_patch(doc, patch)
            elif patch_type == "merge":
                patched = merge_patch(doc, patch)
            elif patch_type == "strategic":
                patched = strategic_merge_patch(doc, patch)
            else:
                raise ValueError(f"unknown patch type {patch_type!r}")
        except PatchFailed as exc:
            raise StatusError(
                failure_status(422, "Invalid", f"the patch could not be applied: {exc}")
            ) from None
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise StatusError(failure_status(422, "Invalid", "the patched object has no metadata"))
        return self.update(
            bucket, namespace, name, patched, subresource=subresource, request=request
        )

    def apply(
        self,
        bucket: Bucket,
        namespace: str | None,
        name: str,
        config: Any,
        *,
        request: WriteRequest,
        force: bool,
        subresource: str | None = None,
    ) -> Record:
        """Server-side apply of ``config`` by ``request.manager`` (see
        :mod:`._apiserver_fields`): creates the object if it does not exist; 409 with
        a cause per field when another manager owns a field it changes, unless
        ``force``."""
        info = bucket.info
        if not isinstance(config, dict) or not config.get("kind") or not config.get("apiVersion"):
            given = config if isinstance(config, dict) else {}
            raise bad_request(
                f"invalid object type: {given.get('apiVersion') or '/'}, "
                f"Kind={given.get('kind') or ''}"
            )
        body = self._body(info, config, strict=True)
        meta = body["metadata"]
        if meta.get("name") and meta["name"] != name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        meta["name"] = name
        self._check_namespace(info, meta, namespace)
        if subresource == "status":
            body = {
                k: v for k, v in body.items() if k in ("kind", "apiVersion", "metadata", "status")
            }
            body["metadata"] = {k: v for k, v in meta.items() if k in _IDENTITY}
        elif info.has_status:
            body.pop("status", None)
        key = f"{meta['namespace']}/{name}" if info.namespaced else name
        existing = bucket.objects.get(key)
        if existing is None and subresource:
            raise not_found(info, name)
        live = decode(existing.full()) if existing is not None else _EMPTY
        managers = FieldManagers.decode(live["metadata"].get("managedFields"))
        try:
            new = managers.apply(
                live,
                body,
                manager=request.manager,
                api_version=info.api_version,
                subresource=subresource or "",
                now=timestamp(),
                force=force,
                schema=info.schema,
            )
        except ApplyConflict as exc:
            raise StatusError(
                failure_status(409, "Conflict", exc.message(), {"causes": exc.causes()})
            ) from None
        if existing is None:
            _set_managed(new["metadata"], managers)
            created = self._new_object(bucket, new, namespace, strict=True)
            return self._insert(bucket, created, dry_run=request.dry_run)
        new = self._replacement(info, existing, new, name, subresource, True)
        return self._write(bucket, existing, new, managers, dry_run=request.dry_run)

    def delete(
        self,
        bucket: Bucket,
        namespace: str | None,
        name: str,
        preconditions: Mapping[str, Any] | None = None,
        *,
        dry_run: bool = False,
    ) -> tuple[Record, bool]:
        """DELETE. Returns the final state and whether the object is gone (an object
        with finalizers only gets its deletionTimestamp). ``dry_run``: the same
        answer, nothing changed."""
        info = bucket.info
        existing = self.get(bucket, namespace, name)
        meta = existing.obj["metadata"]
        for field_name, json_name, hint in (
            ("uid", "UID", "deleted and then recreated"),
            ("resourceVersion", "ResourceVersion", "modified"),
        ):
            wanted = (preconditions or {}).get(field_name)
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
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return existing, False
            new = dict(existing.obj)
            new_meta = new["metadata"] = dict(meta)
            new_meta["deletionTimestamp"] = timestamp()
            new_meta["deletionGracePeriodSeconds"] = 0
            if "generation" in new_meta:
                new_meta["generation"] = int(new_meta["generation"]) + 1
            return self._commit(bucket, new, "MODIFIED", existing, dry_run=dry_run), False
        if dry_run:
            return existing, True
        if info.plural == "namespaces" and info.builtin:
            for other in self.buckets.values():
                if other.info.namespaced:
                    for record in list(self.iter_namespace(other, existing.name)):
                        self._remove(other, record)
        return self._remove(bucket, existing), True

    def _remove(self, bucket: Bucket, existing: Record) -> Record:
        """Delete ``existing``: watchers get its stored state, at the deletion's
        resourceVersion."""
        last = dict(existing.obj)
        last["metadata"] = dict(last["metadata"])
        self.rv += 1
        last["metadata"]["resourceVersion"] = str(self.rv)
        record = Record(last, bucket.info.typemeta_prefix)
        bucket.remove(existing.key)
        self._emit(bucket, "DELETED", record, existing)
        return record

    def matching(self, bucket: Bucket, namespace: str | None, query: Query) -> list[Record]:
        query.validate(bucket.info)
        return [r for r in self.iter_namespace(bucket, namespace) if query.matches(r.obj)]


_EMPTY: Final[Mapping[str, Any]] = {"metadata": {}}
"""What a create changes from (kube's is a Go zero value; see _apiserver_fields)."""

_IDENTITY: Final = ("name", "namespace", "resourceVersion")
"""The metadata a status apply keeps (the rest of its metadata is ignored)."""


def _set_managed(meta: dict[str, Any], managers: FieldManagers) -> None:
    encoded = managers.encode()
    if encoded:
        meta["managedFields"] = encoded
    else:
        meta.pop("managedFields", None)


def _same(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
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


def _apply_defaults(info: ServedResource, obj: dict[str, Any]) -> None:
    """The few defaults kube's admission and strategies set that clients notice."""
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


def copy_out(record: Record) -> dict[str, Any]:
    """A private deep copy of a stored object, for the Python API's callers."""
    result: dict[str, Any] = decode(record.full())
    return result
