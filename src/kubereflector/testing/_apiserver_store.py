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
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from ..backoff import Clock
from ..errors import failure_status
from ..selectors import FieldSelector, LabelSelector, _label_key_error, _label_value_error
from ._apiserver_patch import PatchFailed, json_patch, merge_patch, strategic_merge_patch
from ._apiserver_resources import BUILTIN_RESOURCES, ResourceInfo, timestamp

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
_DNS1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
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


# -- Status objects ---------------------------------------------------------------------------


class StatusError(Exception):
    """A request failed with the Kubernetes ``Status`` object ``status``."""

    def __init__(self, status: dict[str, Any]) -> None:
        self.status = status
        super().__init__(f"{status.get('code')} {status.get('reason')}: {status.get('message')}")


def _details(info: ResourceInfo, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if info.group:
        details["group"] = info.group
    details["kind"] = info.plural
    return details


def not_found(info: ResourceInfo, name: str) -> StatusError:
    return StatusError(
        failure_status(
            404, "NotFound", f'{info.group_resource} "{name}" not found', _details(info, name)
        )
    )


def bad_request(message: str) -> StatusError:
    return StatusError(failure_status(400, "BadRequest", message))


def conflict(info: ResourceInfo, name: str, why: str) -> StatusError:
    return StatusError(
        failure_status(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {info.group_resource} "{name}": {why}',
            _details(info, name),
        )
    )


def expired(message: str, continue_: str | None = None) -> StatusError:
    status = failure_status(410, "Expired", message)
    if continue_:
        status["metadata"] = {"continue": continue_}
    return StatusError(status)


def too_large(requested: int, current: int) -> dict[str, Any]:
    return failure_status(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {requested}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


@dataclass(frozen=True, slots=True)
class FieldError:
    """One entry of a 422 Invalid (``field.Error``)."""

    field: str
    type: str  # "Forbidden" | "Required" | "Invalid" | "NotSupported"
    detail: str
    value: Any = None

    def text(self) -> str:
        if self.type == "Forbidden":
            return f"Forbidden: {self.detail}"
        if self.type == "Required":
            return f"Required value: {self.detail}"
        if self.type == "NotSupported":
            return f'Unsupported value: "{self.value}": supported values: {self.detail}'
        return f"Invalid value: {ENCODER.encode(self.value).decode()}: {self.detail}"

    def cause(self) -> dict[str, Any]:
        reason = {
            "Forbidden": "FieldValueForbidden",
            "Required": "FieldValueRequired",
            "NotSupported": "FieldValueNotSupported",
        }.get(self.type, "FieldValueInvalid")
        return {"reason": reason, "message": self.text(), "field": self.field}


def invalid(kind: str, name: str, errors: list[FieldError], group: str = "") -> StatusError:
    texts = [f"{e.field}: {e.text()}" for e in errors]
    joined = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
    subject = f"{kind}.{group}" if group else kind
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [e.cause() for e in errors]
    return StatusError(
        failure_status(422, "Invalid", f'{subject} "{name}" is invalid: {joined}', details)
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

    def __init__(self, info: ResourceInfo, oldest: int) -> None:
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

    def validate(self, info: ResourceInfo) -> None:
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


def invalid_resource_version(text: str, *, from_etcd: bool) -> dict[str, Any]:
    """kube-apiserver's answer (v1.28) to a resourceVersion that is not a number: a
    400 BadRequest for a list it sends to etcd (``from_etcd``: one with a
    ``limit`` or ``resourceVersionMatch=Exact``), else (watches, lists from the
    watch cache) a 500 with no reason."""
    quoted = ENCODER.encode(text).decode()
    invalid = (
        f"resourceVersion: Invalid value: {quoted}: "
        f"strconv.ParseUint: parsing {quoted}: invalid syntax"
    )
    if from_etcd:
        return failure_status(400, "BadRequest", f"invalid resource version: {invalid}")
    status = failure_status(500, "", invalid)
    del status["reason"]  # kube sends none
    return status


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
        for info in BUILTIN_RESOURCES:
            self.register(info)
        namespaces = self.buckets["namespaces"]
        for name in INITIAL_NAMESPACES:
            self.create(namespaces, {"metadata": {"name": name}}, None)

    # -- resources ---------------------------------------------------------------------------

    def register(self, info: ResourceInfo) -> Bucket:
        if info.group_resource in self.buckets:
            raise ValueError(f"resource {info.group_resource!r} is already registered")
        if info.group == "" and not info.builtin:
            raise ValueError("registered resources need a group (the core group is built in)")
        bucket = Bucket(info, self.rv)
        self.buckets[info.group_resource] = bucket
        self.by_gvr[(info.group, info.version, info.plural)] = bucket
        return bucket

    def resources(self) -> list[ResourceInfo]:
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
            plan.error = failure_status(
                410, "Expired", f"too old resource version: {requested} ({bucket.oldest})"
            )
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

    def _body(self, info: ResourceInfo, obj: Any) -> dict[str, Any]:
        """A request body as a fresh top-level dict with its own metadata dict."""
        if not isinstance(obj, dict):
            raise bad_request(f"the body of the request is not a {info.kind} object")
        api_version = obj.get("apiVersion")
        if api_version and api_version != info.api_version:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({info.api_version})"
            )
        kind = obj.get("kind")
        if kind and kind != info.kind:
            raise bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({info.kind})"
            )
        meta = obj.get("metadata")
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        body: dict[str, Any] = {"kind": info.kind, "apiVersion": info.api_version}
        body.update((k, v) for k, v in obj.items() if k not in ("kind", "apiVersion"))
        body["metadata"] = dict(meta)
        return body

    def _validate(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        name = meta.get("name") or ""
        errors: list[FieldError] = []
        pattern = _DNS1123_LABEL if info.plural == "namespaces" and info.builtin else None
        limit = 63 if pattern is not None else 253
        pattern = pattern or _DNS1123_SUBDOMAIN
        if len(name) > limit or not pattern.match(name):
            errors.append(
                FieldError(
                    "metadata.name",
                    "Invalid",
                    f"a lowercase RFC 1123 {'label' if limit == 63 else 'subdomain'} must "
                    "consist of lower case alphanumeric characters, '-' or '.', and must "
                    f"start and end with an alphanumeric character (at most {limit} characters)",
                    name,
                )
            )
        labels = meta.get("labels")
        if labels is not None and not isinstance(labels, dict):
            errors.append(FieldError("metadata.labels", "Invalid", "must be a map", labels))
        for key, value in (labels or {}).items():
            problem = _label_key_error(key) if isinstance(key, str) else "keys are strings"
            if problem:
                errors.append(FieldError("metadata.labels", "Invalid", problem, key))
            elif not isinstance(value, str) or _label_value_error(value):
                why = _label_value_error(value) if isinstance(value, str) else "must be a string"
                errors.append(FieldError(f"metadata.labels[{key}]", "Invalid", str(why), value))
        if errors:
            raise invalid(info.kind, name, errors, info.group)

    def _check_namespace(
        self, info: ResourceInfo, meta: dict[str, Any], namespace: str | None
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
        strict: bool = True,
    ) -> Record:
        """POST: a new object. ``strict=False`` (the Python API) drops server-set fields
        instead of refusing a ``resourceVersion``."""
        info = bucket.info
        body = self._body(info, obj)
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
        self._validate(info, body)
        name = meta["name"]
        if info.namespaced:
            ns = meta["namespace"]
            if ns not in self.buckets["namespaces"].objects:
                raise StatusError(
                    failure_status(
                        404,
                        "NotFound",
                        f'namespaces "{ns}" not found',
                        {"name": ns, "kind": "namespaces"},
                    )
                )
            key = f"{ns}/{name}"
        else:
            key = name
        if key in bucket.objects:
            raise StatusError(
                failure_status(
                    409,
                    "AlreadyExists",
                    f'{info.group_resource} "{name}" already exists',
                    _details(info, name),
                )
            )
        self.rv += 1
        meta["uid"] = str(uuid.uuid4())
        meta["resourceVersion"] = str(self.rv)
        meta["generation"] = 1
        meta["creationTimestamp"] = timestamp()
        _apply_defaults(info, body)
        record = Record(body, info.typemeta_prefix)
        bucket.put(record)
        self._emit(bucket, "ADDED", record, None)
        return record

    def update(
        self,
        bucket: Bucket,
        namespace: str | None,
        name: str,
        obj: Any,
        *,
        subresource: str | None = None,
        keep_status: bool = True,
    ) -> Record:
        """PUT. ``keep_status``: the main resource cannot change ``status`` (kube's
        strategies for resources with a status subresource); the Python API passes False."""
        info = bucket.info
        existing = self.get(bucket, namespace, name)
        body = self._body(info, obj)
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
        else:
            new = body
            for key in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ):
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            meta["generation"] = old_meta.get("generation", 1)
            if keep_status and info.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            if _spec_of(new) != _spec_of(old):
                meta["generation"] = int(meta["generation"]) + 1
            self._validate(info, new)
        new["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
        if new == old:
            return existing  # a no-op update writes nothing, as in kube
        if old_meta.get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            return self._remove(bucket, existing, final=new)
        self.rv += 1
        new["metadata"]["resourceVersion"] = str(self.rv)
        record = Record(new, info.typemeta_prefix)
        bucket.put(record)
        self._emit(bucket, "MODIFIED", record, existing)
        return record

    def patch(
        self,
        bucket: Bucket,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: Any,
        *,
        subresource: str | None = None,
        keep_status: bool = True,
    ) -> Record:
        """PATCH with ``patch_type`` ``"json"``, ``"merge"`` or ``"strategic"``."""
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
            bucket, namespace, name, patched, subresource=subresource, keep_status=keep_status
        )

    def delete(
        self,
        bucket: Bucket,
        namespace: str | None,
        name: str,
        preconditions: Mapping[str, Any] | None = None,
    ) -> tuple[Record, bool]:
        """DELETE. Returns the final state and whether the object is gone (an object
        with finalizers only gets its deletionTimestamp)."""
        info = bucket.info
        existing = self.get(bucket, namespace, name)
        meta = existing.obj["metadata"]
        for field_name, json_name in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted = (preconditions or {}).get(field_name)
            if wanted is not None and str(wanted) != str(meta.get(field_name)):
                raise conflict(
                    info,
                    name,
                    f"Precondition failed: {json_name} in precondition: {wanted}, "
                    f"{json_name} in object meta: {meta.get(field_name)}",
                )
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return existing, False
            new = dict(existing.obj)
            new_meta = new["metadata"] = dict(meta)
            new_meta["deletionTimestamp"] = timestamp()
            new_meta["deletionGracePeriodSeconds"] = 0
            new_meta["generation"] = int(new_meta.get("generation", 1)) + 1
            self.rv += 1
            new_meta["resourceVersion"] = str(self.rv)
            record = Record(new, info.typemeta_prefix)
            bucket.put(record)
            self._emit(bucket, "MODIFIED", record, existing)
            return record, False
        if info.plural == "namespaces" and info.builtin:
            for other in self.buckets.values():
                if other.info.namespaced:
                    for record in list(self.iter_namespace(other, existing.name)):
                        self._remove(other, record)
        return self._remove(bucket, existing), True

    def _remove(
        self, bucket: Bucket, existing: Record, *, final: dict[str, Any] | None = None
    ) -> Record:
        last = dict(final if final is not None else existing.obj)
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


def _spec_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def _apply_defaults(info: ResourceInfo, obj: dict[str, Any]) -> None:
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
