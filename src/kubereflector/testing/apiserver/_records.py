"""What the emulator stores: :class:`Record` (one object and its encodings),
:class:`Event` (one history entry), :class:`Bucket` (one resource's objects,
history and open watches).

Private to :mod:`kubereflector.testing.apiserver`. No I/O.

Ownership: a stored :class:`Record` (its ``obj`` dict and its encoded ``body``)
is immutable once stored; a write builds a new dict (copy on write) and a new
Record. Records are shared by list responses, watch events and history, and an
Event's encodings by every watcher.
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Iterator
from typing import Any, Final, Protocol

import msgspec

from ...protobuf._encode import encode_message
from ._resources import ServedResource

__all__ = [
    "ENCODER",
    "Bucket",
    "Event",
    "EventSink",
    "Record",
    "copy_out",
    "decode",
    "event_line",
    "key_range",
]

ENCODER: Final = msgspec.json.Encoder()
decode: Final = msgspec.json.decode

_META_PREFIX: Final = b'{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":'


class Record:
    """One stored object: the dict (with kind/apiVersion) and its JSON without them."""

    __slots__ = ("_protobuf", "body", "key", "name", "namespace", "obj", "prefix")

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
        self._protobuf: bytes | None = None

    @property
    def rv(self) -> int:
        return int(self.obj["metadata"]["resourceVersion"])

    def full(self) -> bytes:
        """The object's JSON with ``kind`` and ``apiVersion`` first."""
        return self.prefix + self.body[1:]

    def protobuf(self, type_name: str) -> bytes:
        """The object as a ``type_name`` protobuf message, without the envelope
        (encoded once, as kube-apiserver's watch cache keeps an object's
        serialization: a record never changes)."""
        data = self._protobuf
        if data is None:
            data = self._protobuf = encode_message(self.obj, type_name)
        return data

    def meta_json(self) -> bytes:
        """The object as a ``PartialObjectMetadata``."""
        return _META_PREFIX + ENCODER.encode(self.obj["metadata"]) + b"}"


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


class EventSink(Protocol):
    """A bucket's open watch, as the store sees it: offered every event of the
    resource, ended when the resource stops being served."""

    def offer(self, event: Event) -> None: ...

    def end(self, *, discard: bool) -> None: ...


class Bucket:
    """The objects, history and open watches of one resource."""

    __slots__ = ("_sorted", "history", "info", "objects", "oldest", "watchers")

    def __init__(self, info: ServedResource, oldest: int) -> None:
        self.info = info
        self.objects: dict[str, Record] = {}
        self.history: collections.deque[Event] = collections.deque()
        self.oldest = oldest  # every event of this resource with rv > oldest is in history
        self.watchers: set[EventSink] = set()
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

    def iter_namespace(self, namespace: str | None) -> Iterator[Record]:
        """The current objects (of ``namespace``, or all), sorted by namespace/name."""
        keys = self.sorted_keys()
        start, end = key_range(keys, namespace if self.info.namespaced else None)
        objects = self.objects
        for key in keys[start:end]:
            yield objects[key]

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


def copy_out(record: Record) -> dict[str, Any]:
    """A private deep copy of a stored object, for the Python API's callers."""
    result: dict[str, Any] = decode(record.full())
    return result
