"""The reads of the emulator with kube-apiserver's semantics: a request's
``ListOptions`` (:class:`Query`, parsed from query parameters and validated),
resourceVersions and continue tokens, and what a list page or a new watch
holds (:func:`list_page`, :func:`plan_watch`).

Private to :mod:`kubereflector.testing.apiserver`. Pure functions of a bucket and
the current resourceVersion: no I/O, no clock (the store prunes history first).
"""

from __future__ import annotations

import base64
import binascii
import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from ...cache.shards import ShardSelector, ShardSelectorError
from ...selectors import FieldSelector, LabelSelector
from ._records import ENCODER, Bucket, Event, Record, decode, key_range
from ._resources import ServedResource
from ._statuses import (
    FieldError,
    StatusError,
    bad_request,
    expired,
    invalid,
    invalid_resource_version,
    too_large,
    too_old,
)

__all__ = [
    "ListPage",
    "Query",
    "WatchPlan",
    "list_page",
    "matching",
    "parse_bool",
    "parse_query",
    "plan_watch",
]

_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_CONTINUE_VERSION: Final = "meta.k8s.io/v1"
_CONTINUE_EXPIRED: Final = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token "
    "in this response to retrieve the remainder of the results. Continuing with the "
    "provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may "
    "show up in the list."
)


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
    shard_selector: ShardSelector | None = None
    """KEP-5866's ``shardSelector`` (``None``: not asked, or the feature is off)."""

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
        shard = self.shard_selector
        if shard is not None and not shard.matches(obj):
            return False
        fields = self.field_selector
        return fields.empty or fields.matches_object(obj)

    @property
    def filtering(self) -> bool:
        return (
            not (self.label_selector.empty and self.field_selector.empty)
            or self.shard_selector is not None
        )


def parse_bool(name: str, value: str) -> bool:
    """A boolean query parameter as kube parses it (strconv.ParseBool); 400 if not one."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise bad_request(f"invalid value for {name}: {value!r} is not a boolean")


def _parse_int(name: str, value: str) -> int:
    try:
        return int(value, 10)
    except ValueError:
        raise bad_request(f"invalid value for {name}: {value!r} is not an integer") from None


def parse_query(params: Mapping[str, str], *, watch: bool, sharding: bool = True) -> Query:
    """The :class:`Query` of a request's query parameters (400 for one that does not
    parse); not yet validated against a resource (:meth:`Query.validate`).
    ``sharding``: the ``ShardedListAndWatch`` feature is on (off: ``shardSelector``
    is ignored, as servers before it do)."""
    query = Query(
        resource_version=params.get("resourceVersion", ""),
        resource_version_match=params.get("resourceVersionMatch", ""),
        continue_=params.get("continue", ""),
        watch=watch,
    )
    if params.get("limit"):
        query.limit = max(0, _parse_int("limit", params["limit"]))
    try:
        if params.get("labelSelector"):
            query.label_selector = LabelSelector.parse(params["labelSelector"])
        if params.get("fieldSelector"):
            query.field_selector = FieldSelector.parse(params["fieldSelector"])
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    if params.get("timeoutSeconds"):
        query.timeout_seconds = _parse_int("timeoutSeconds", params["timeoutSeconds"])
    if params.get("allowWatchBookmarks"):
        query.allow_watch_bookmarks = parse_bool(
            "allowWatchBookmarks", params["allowWatchBookmarks"]
        )
    if params.get("sendInitialEvents"):
        query.send_initial_events = parse_bool("sendInitialEvents", params["sendInitialEvents"])
    if sharding and "shardSelector" in params:
        try:  # kube: converting the parameter fails, a 400 (an empty one included)
            query.shard_selector = ShardSelector.parse(params["shardSelector"])
        except ShardSelectorError as exc:
            raise bad_request(f"invalid shard selector: {exc}") from None
    return query


def matching(bucket: Bucket, namespace: str | None, query: Query) -> list[Record]:
    """The current objects of ``bucket`` (in ``namespace``) that ``query`` selects
    (validated here: 422 or 400)."""
    query.validate(bucket.info)
    return [r for r in bucket.iter_namespace(namespace) if query.matches(r.obj)]


# -- resourceVersions and continue tokens -----------------------------------------------------


def _parse_rv(text: str, *, from_etcd: bool = False) -> int | None:
    """``None`` for ``""``/``"0"``, else the number (not one: see
    :func:`._statuses.invalid_resource_version`)."""
    if text in ("", "0"):
        return None
    if not (text.isascii() and text.isdigit()):
        raise StatusError(invalid_resource_version(text, from_etcd=from_etcd))
    return int(text)


def _encode_continue(rv: int, next_key: str) -> str:
    raw = ENCODER.encode({"v": _CONTINUE_VERSION, "rv": rv, "start": next_key})
    return base64.b64encode(raw).decode("ascii")


def _decode_continue(token: str) -> tuple[int, str]:
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


# -- pages and watches -------------------------------------------------------------------------


@dataclass(slots=True)
class ListPage:
    """One page of a list: its objects, the resourceVersion it shows, the continue
    token for the next page and ``remainingItemCount`` (``None``: not told)."""

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


def list_page(bucket: Bucket, namespace: str | None, query: Query, current: int) -> ListPage:
    """One page of a list of ``bucket`` (whose history is pruned) at the ``current``
    resourceVersion, with kube-apiserver's resourceVersion semantics. ``query`` is
    validated already. Raises :class:`~._statuses.StatusError` (400, 410, 504)."""
    paging = True
    start_key = ""
    if query.continue_:
        if query.resource_version not in ("", "0"):
            raise bad_request("specifying resource version is not allowed when using continue")
        rv, start_key = _decode_continue(query.continue_)
        if rv == -1:
            rv = current
        elif rv > current:
            raise bad_request("continue key is not valid: resourceVersion is in the future")
        elif rv < bucket.oldest:
            raise expired(_CONTINUE_EXPIRED, _encode_continue(-1, start_key))
    else:
        match = query.resource_version_match
        requested = _parse_rv(query.resource_version, from_etcd=query.limit > 0 or match == "Exact")
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
            result.continue_ = _encode_continue(rv, page[-1].key + "\x00")
            result.remaining = remaining
    return result


def plan_watch(bucket: Bucket, namespace: str | None, query: Query, current: int) -> WatchPlan:
    """Where a watch of ``bucket`` (whose history is pruned) starts at the ``current``
    resourceVersion and what it sends first (kube's cacher semantics). ``query`` is
    validated already. A watch that cannot start where asked (410, 504) has the
    Status in the plan's ``error``; a resourceVersion that is not a number raises
    :class:`~._statuses.StatusError`."""
    send_initial = query.send_initial_events
    if (
        send_initial is None
        and not query.resource_version_match
        and query.resource_version in ("", "0")
    ):
        # SetListOptionsDefaults with the WatchList feature (on by default since 1.32).
        send_initial = True
    requested = _parse_rv(query.resource_version)
    plan = WatchPlan(from_rv=current)
    if send_initial:
        if requested is not None and requested > current:
            plan.error = too_large(requested, current)
            return plan
        plan.initial = list(bucket.iter_namespace(namespace))
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
