"""The Reflector's decisions, with no I/O and no waiting.

Which resourceVersion to list or watch at, how large a list page is, what a
failed watch means, when internal errors stop being retried: each is a small
pure function (or a tiny state holder fed with the time), tested on its own.
The behaviour follows client-go's newest ``reflector.go``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from ..errors import (
    ApiError,
    ExpiredError,
    TooLargeResourceVersionError,
    TooManyRequestsError,
    TruncatedStreamError,
    is_connection_refused,
)
from .listwatch import INITIAL_EVENTS_END_ANNOTATION

DEFAULT_PAGE_SIZE = 500
"""client-go's pager default."""

VERY_SHORT_WATCH = 1.0
"""A watch that ends sooner than this (seconds) with no event at all is an error."""


class WatchStalledError(Exception):
    """A watch delivered nothing, not even a bookmark, for longer than the idle limit."""


class VeryShortWatchError(Exception):
    """A watch closed in under a second without a single event (the server refuses to stream)."""


class WatchListUnsupportedError(Exception):
    """A watch-list stream ended without the bookmark that closes its initial events."""


class RelistRequiredError(Exception):
    """What a ListerWatcher lists has changed (a shard selector moved, see
    :class:`~kubereflector.cache.sharded_listwatch.ShardedListWatch`): its objects
    must be listed anew. Raised by a ListerWatcher's ``list`` or ``watch``; a
    Reflector then ends its cycle and lists again at once, without backoff."""


def resource_version_of(value: object) -> str:
    """The resourceVersion to record from an object's ``metadata.resourceVersion``:
    ``value`` itself when it is a string, else ``""`` (absent: the last one stays).

    client-go reads a resourceVersion that is not a string as ``""``. Strings are
    opaque and kept as the server gave them; one the server later refuses is
    caught by :func:`is_invalid_resource_version`. A value that is neither a
    string nor ``None`` is malformed (:func:`is_malformed_resource_version`).
    """
    return value if isinstance(value, str) else ""


def is_malformed_resource_version(value: object) -> bool:
    """A resourceVersion present but not a string (an object, a number): a server
    or proxy bug, worth a log line."""
    return value is not None and not isinstance(value, str)


class SyncPoint:
    """Where a Reflector's next list or watch starts: the last resourceVersion it
    synced to, and whether that resourceVersion is still a position to start from.

    Owned by one Reflector, on its event loop; no I/O. Three things make the
    resourceVersion held no good position:

    * the server refused it (expired, too large, invalid): the next sync is at
      ``""``, the current state (:meth:`refused`, until the next full sync);
    * a change came with a malformed resourceVersion and no usable one came after
      it, so the store is ahead of the resourceVersion held
      (:meth:`change_without_resource_version`);
    * a plain watch started at ``""`` or ``"0"``: the server opens such a watch
      with its state as ADDED events whose resourceVersions are objects', not
      positions in the stream, until a bookmark comes (:meth:`watch_opened`,
      :meth:`bookmarked`).

    The last two are taken (and forgotten) by :meth:`take_stale` before the next
    watch: the Reflector then lists instead of replaying from there.
    """

    __slots__ = ("_behind_at", "_unanchored", "rv", "unavailable")

    def __init__(self) -> None:
        self.rv = ""
        """The last resourceVersion synced to (``""``: none yet)."""
        self.unavailable = False
        """The server refused :attr:`rv`: sync at ``""`` next."""
        self._behind_at: str | None = None
        self._unanchored = False

    def list_at(self) -> str:
        """The resourceVersion of the next list (:func:`relist_resource_version`)."""
        return relist_resource_version(self.rv, self.unavailable)

    def watch_list_at(self) -> str:
        """The resourceVersion of the next watch-list (:func:`rewatch_resource_version`)."""
        return rewatch_resource_version(self.rv, self.unavailable)

    def replaced(self, rv: str) -> None:
        """A full sync (list or watch-list) reached ``rv``."""
        self.rv = rv
        self.unavailable = False

    def advanced(self, rv: str) -> None:
        """Watch events up to ``rv`` were applied."""
        self.rv = rv

    def refused(self) -> None:
        """The resourceVersion held cannot be served: the next sync is at ``""``."""
        self.unavailable = True

    def watch_opened(self, watch_list: bool) -> None:
        """A watch (``watch_list``: a watch-list) is about to open from :attr:`rv`."""
        if not watch_list and self.rv in ("", "0"):
            self._unanchored = True

    def bookmarked(self) -> None:
        """A bookmark with a resourceVersion came: the stream has a position again."""
        self._unanchored = False

    def change_without_resource_version(self) -> None:
        """A change was applied whose resourceVersion was malformed."""
        self._behind_at = self.rv

    def take_stale(self) -> bool:
        """Whether :attr:`rv` is no position to watch from again (see the class
        documentation), forgetting why: call once before each watch."""
        stale = self._unanchored or (self._behind_at is not None and self._behind_at == self.rv)
        self._behind_at = None
        self._unanchored = False
        return stale


def relist_resource_version(last_sync: str, unavailable: bool) -> str:
    """RV to list at: ``"0"`` first (watch cache), then the last synced RV, or ``""``
    (a consistent read) once that RV is known to be unavailable."""
    if unavailable:
        return ""
    return last_sync or "0"


def rewatch_resource_version(last_sync: str, unavailable: bool) -> str:
    """RV to start a watch-list at: the last synced RV, or ``""`` (most recent)."""
    return "" if unavailable else last_sync


def list_page_size(
    explicit: int | None, paginated_result: bool, resource_version: str
) -> int | None:
    """The ``limit`` of a list's first page (``None``: ask for everything at once).

    An explicit page size always wins. A server that paginated an RV-``"0"``
    list honours paging for this resource: keep paging. Listing at a specific RV
    sends no limit, so the API server's watch cache can serve it whole; ``"0"``
    and ``""`` keep the default limit.
    """
    if explicit:
        return explicit
    if paginated_result:
        return DEFAULT_PAGE_SIZE
    if resource_version not in ("", "0"):
        return None
    return DEFAULT_PAGE_SIZE


def watch_timeout_seconds(min_watch_timeout: float, random_fraction: float) -> int:
    """Server-side watch timeout, spread in [min, 2*min) to spread reconnects."""
    return max(1, int(min_watch_timeout * (1.0 + random_fraction)))


def is_expired(err: BaseException) -> bool:
    """410 Gone / Expired: the RV or continue token fell out of the server's history."""
    return isinstance(err, ExpiredError) or (
        isinstance(err, ApiError) and (err.status == 410 or err.reason in ("Expired", "Gone"))
    )


def is_too_large_resource_version(err: BaseException) -> bool:
    return isinstance(err, TooLargeResourceVersionError)


_INVALID_RV_MESSAGE = "resourceVersion: Invalid value"


def is_invalid_resource_version(err: BaseException) -> bool:
    """The server refused the resourceVersion it was sent as malformed.

    kube-apiserver (checked on v1.28.7) answers a watch, or a list its watch
    cache serves, with ``500`` and no reason (``resourceVersion: Invalid value:
    "x": strconv.ParseUint: ...``), and a list it sends to etcd (a ``limit``
    with a resourceVersion other than ``"0"``) with ``400 BadRequest`` (``invalid
    resource version: resourceVersion: Invalid value: ...``). A ``422`` whose
    causes name the ``resourceVersion`` field counts too.
    """
    if not isinstance(err, ApiError) or err.status not in (400, 422, 500):
        return False
    if _INVALID_RV_MESSAGE in err.message:
        return True
    causes = err.details.get("causes") if isinstance(err.details, Mapping) else None
    return isinstance(causes, list) and any(
        isinstance(cause, Mapping) and cause.get("field") == "resourceVersion" for cause in causes
    )


def is_resource_version_unavailable(err: BaseException) -> bool:
    """The resourceVersion asked for cannot be served (expired, too large, or
    refused as invalid): sync again at ``""``, the current state."""
    return is_expired(err) or is_too_large_resource_version(err) or is_invalid_resource_version(err)


def is_too_many_requests(err: BaseException) -> bool:
    return isinstance(err, TooManyRequestsError) or (
        isinstance(err, ApiError) and err.status == 429
    )


def is_internal_error(err: BaseException) -> bool:
    return isinstance(err, ApiError) and (err.status == 500 or err.reason == "InternalError")


def is_watch_error_retriable(err: BaseException) -> bool:
    """Errors after which the watch is retried (after backoff) without relisting:
    a refused connection, a 429, a stream cut off mid-event (a watch-list's; a
    watch's is re-opened at once, :func:`classify_watch_error`)."""
    return (
        is_connection_refused(err)
        or is_too_many_requests(err)
        or isinstance(err, TruncatedStreamError)
    )


def retry_after(err: BaseException) -> float:
    """The server's requested wait (Retry-After), or 0."""
    if isinstance(err, TooManyRequestsError) and err.retry_after:
        return err.retry_after
    return 0.0


def refuses_watch_list(err: BaseException) -> bool:
    """The server does not support watch-list at all (remember it; list from now on)."""
    if isinstance(err, WatchListUnsupportedError):
        return True
    return isinstance(err, ApiError) and err.status in (400, 405, 415, 422, 501)


def is_initial_events_end(metadata: Any) -> bool:
    """True for the BOOKMARK that ends a watch-list's initial events."""
    if isinstance(metadata, Mapping):
        annotations = metadata.get("annotations")
    else:
        annotations = getattr(metadata, "annotations", None)
    return isinstance(annotations, Mapping) and (
        annotations.get(INITIAL_EVENTS_END_ANNOTATION) == "true"
    )


class WatchAction(enum.Enum):
    """What the watch loop does after a watch ended with an error."""

    REWATCH = "rewatch"  # at once, from the last RV
    BACKOFF_REWATCH = "backoff-rewatch"  # after backoff (and Retry-After), from the last RV
    END_CYCLE = "end-cycle"  # give up this cycle: relist after backoff
    RELIST_CURRENT = "relist-current"  # the last RV was refused: relist at "" after backoff


def classify_watch_error(err: BaseException, retry_internal: bool) -> WatchAction:
    """Map a watch failure to the loop's next step (client-go's ``watch`` switch).

    ``retry_internal`` is :meth:`InternalErrorRetry.should_retry` for ``err``.
    """
    if isinstance(err, (WatchStalledError, TruncatedStreamError)):
        # A cut stream ends the watch as a close does (client-go's StreamWatcher
        # closes quietly on an unexpected EOF): re-watch at once. (The loop makes
        # one within a second and without an event a very short watch.)
        return WatchAction.REWATCH
    if is_invalid_resource_version(err):  # before the 500s: retrying the same RV is futile
        return WatchAction.RELIST_CURRENT
    if is_watch_error_retriable(err):
        return WatchAction.BACKOFF_REWATCH
    if is_internal_error(err) and retry_internal:
        return WatchAction.BACKOFF_REWATCH
    return WatchAction.END_CYCLE


class InternalErrorRetry:
    """Bounds how long watches failing with internal errors (500) are retried.

    client-go's ``retryWithDeadline``: the window opens at the first internal
    error and closes ``max_duration`` later; an error-free gap of ``reset_after``
    opens a fresh window. ``max_duration <= 0`` never retries.
    """

    __slots__ = ("_first", "_last", "max_duration", "reset_after")

    def __init__(self, max_duration: float, reset_after: float = 60.0) -> None:
        self.max_duration = max_duration
        self.reset_after = reset_after
        self._first: float | None = None
        self._last: float | None = None

    def after(self, err: BaseException | None, now: float) -> None:
        """Record how a watch ended (``None``: it ended cleanly)."""
        if err is None or not is_internal_error(err):
            return
        if self._last is not None and now - self._last >= self.reset_after:
            self._first = None
        if self._first is None:
            self._first = now
        self._last = now

    def should_retry(self, now: float) -> bool:
        if self.max_duration <= 0:
            return False
        if self._first is not None and now - self._first <= self.max_duration:
            return True
        self._first = self._last = None
        return False
