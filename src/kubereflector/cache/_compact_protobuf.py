"""Compact objects from kube-apiserver's protobuf: a list body of a built-in kind
decoded into :class:`~.compact.CompactObject` s.

Each item's ``ObjectMeta`` is decoded here, field by field (what keys, indexes,
selectors and controllers read), and the rest of its message is kept as the
server's bytes, decoded by :mod:`kubereflector.protobuf` when read. This is the
hot path of a sync in compact mode, so it walks the wire format inline rather
than through the generic decoder.

Pure functions; thread-safe. Raise :class:`~kubereflector.protobuf.ProtobufError`
for a body that is not the protobuf list it should be.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Final, NamedTuple

from ..protobuf._decode import decode_message, format_time
from ..protobuf._envelope import open_envelope
from ..protobuf._schema import kind_type, message
from ..protobuf._wire import BYTES, FIXED64, VARINT, ProtobufError, fields, read_varint, signed
from .compact import CompactMetadata, CompactObject

__all__ = ["ProtobufList", "decode_protobuf_list"]

_intern: Final = sys.intern
_times: dict[int, str] = {}
_TIMES_KEPT: Final = 4096


class ProtobufList(NamedTuple):
    """A decoded list body."""

    kind: str
    resource_version: str
    continue_: str
    remaining_item_count: int | None
    items: list[CompactObject]


def decode_protobuf_list(data: bytes) -> ProtobufList:
    """The list body ``data`` (``k8s\\x00`` and its envelope), its items compact.
    Raises ``ProtobufError`` for a kind the table has no protobuf for, or bytes
    that do not match it."""
    envelope = open_envelope(data)
    api_version, kind = envelope.api_version, envelope.kind
    list_type = kind_type(api_version, kind)
    if list_type is None or not kind.endswith("List"):
        raise ProtobufError(f"no protobuf schema for a list of kind {kind!r} in {api_version!r}")
    meta_number, items_number, item_type = _list_fields(list_type)
    item_kind, item_api_version = _intern(kind[:-4]), _intern(api_version)
    meta: dict[str, Any] = {}
    items: list[CompactObject] = []
    for number, wire, a, b in fields(data, envelope.start, envelope.end):
        if wire != BYTES:
            continue
        if number == items_number:
            items.append(_compact(data, a, b, item_type, item_kind, item_api_version))
        elif number == meta_number:
            meta = decode_message(data, a, b, "meta/v1.ListMeta")
    return ProtobufList(
        kind,
        meta.get("resourceVersion", ""),
        meta.get("continue", ""),
        meta.get("remainingItemCount"),
        items,
    )


@functools.cache
def _list_fields(list_type: str) -> tuple[int, int, str]:
    """``(metadata's number, items' number, the item type)`` of a list type."""
    by_name = {f.name: f for f in message(list_type).fields}
    meta, items = by_name.get("metadata"), by_name.get("items")
    shape = items.shape if items is not None else None
    if meta is None or items is None or not (isinstance(shape, tuple) and shape[0] == "list"):
        raise ProtobufError(f"{list_type} is not a list type")
    element = shape[1]
    if not (isinstance(element, tuple) and element[0] == "message"):
        raise ProtobufError(f"the items of {list_type} are not objects")
    return meta.number, items.number, str(element[1])


@functools.cache
def _metadata_number(type_name: str) -> int:
    for f in message(type_name).fields:
        if f.name == "metadata":
            return f.number
    return 0


def _compact(
    buf: bytes, start: int, end: int, type_name: str, kind: str, api_version: str
) -> CompactObject:
    """One item: its metadata decoded, the rest of its fields kept encoded."""
    meta_number = _metadata_number(type_name)
    meta: CompactMetadata | None = None
    spans: list[tuple[int, int]] = []
    i = start
    while i < end:
        field_start = i
        key = buf[i]
        if key < 0x80:
            i += 1
        else:
            key, i = read_varint(buf, i)
        if key & 7 == BYTES:
            n = buf[i]
            if n < 0x80:
                i += 1
            else:
                n, i = read_varint(buf, i)
            j = i + n
            if j > end:
                raise ProtobufError(f"{type_name} field {key >> 3} runs past its message")
            if key >> 3 == meta_number:
                meta = _metadata(buf, i, j)
                i = j
                continue
        else:
            j = _field_end(buf, i, key & 7, end)
        if spans and spans[-1][1] == field_start:
            spans[-1] = (spans[-1][0], j)
        else:
            spans.append((field_start, j))
        i = j
    rest = (
        buf[spans[0][0] : spans[0][1]] if len(spans) == 1 else b"".join(buf[a:b] for a, b in spans)
    )
    return CompactObject(
        _api_version=api_version,
        _kind=kind,
        _metadata=meta,
        _protobuf=rest,
        _protobuf_type=type_name,
    )


def _field_end(buf: bytes, i: int, wire: int, end: int) -> int:
    """Where the field whose value starts at ``i`` ends."""
    if wire == BYTES:
        n = buf[i]
        if n < 0x80:
            j = i + 1 + n
        else:
            n, i = read_varint(buf, i)
            j = i + n
    elif wire == VARINT:
        j = read_varint(buf, i)[1]
    elif wire == FIXED64:
        j = i + 8
    elif wire == 5:
        j = i + 4
    else:
        raise ProtobufError(f"a field with wire type {wire} at offset {i}")
    if j > end:
        raise ProtobufError(f"a field at offset {i} runs {j - end} bytes past its message")
    return j


def _metadata(buf: bytes, start: int, end: int) -> CompactMetadata:
    """``ObjectMeta`` as :class:`CompactMetadata` (its ``managedFields`` kept encoded),
    with Go's JSON rules: empty strings, a zero generation and a zero time are absent."""
    strings: list[str | None] = [None] * 7
    generation: int | None = None
    created: str | None = None
    deleted: str | None = None
    grace: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owners: list[dict[str, Any]] | None = None
    finalizers: list[str] | None = None
    managed: list[tuple[int, int]] = []
    i = start
    while i < end:
        field_start = i
        key = buf[i]
        if key < 0x80:
            i += 1
        else:
            key, i = read_varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, i = read_varint(buf, i)
            if number == 7:
                generation = signed(value) or None
            elif number == 10:
                grace = signed(value)
            continue
        if wire != BYTES:
            i = _field_end(buf, i, wire, end)
            continue
        b = buf[i]
        if b < 0x80:
            a = i + 1
            b += a
        else:
            b, a = read_varint(buf, i)
            b += a
        if b > end:
            raise ProtobufError(f"ObjectMeta field {number} runs {b - end} bytes past its message")
        i = b
        if number <= 6:
            strings[number] = buf[a:b].decode() or None
        elif number == 11 or number == 12:
            entry_key, entry_value = _string_entry(buf, a, b)
            if number == 11:
                if labels is None:
                    labels = {}
                labels[_intern(entry_key)] = entry_value
            else:
                if annotations is None:
                    annotations = {}
                annotations[entry_key] = entry_value
        elif number == 8:
            created = _time(buf, a, b)
        elif number == 9:
            deleted = _time(buf, a, b)
        elif number == 13:
            if owners is None:
                owners = []
            owners.append(_owner_reference(buf, a, b))
        elif number == 14:
            if finalizers is None:
                finalizers = []
            finalizers.append(buf[a:b].decode())
        elif number == 17:
            if managed and managed[-1][1] == field_start:
                managed[-1] = (managed[-1][0], b)
            else:
                managed.append((field_start, b))
    namespace = strings[3]
    return CompactMetadata(
        _name=strings[1],
        _generate_name=strings[2],
        _namespace=_intern(namespace) if namespace is not None else None,
        _self_link=strings[4],
        _uid=strings[5],
        _resource_version=strings[6],
        _generation=generation,
        _creation_timestamp=created,
        _deletion_timestamp=deleted,
        _deletion_grace_period_seconds=grace,
        _labels=labels,
        _annotations=annotations,
        _owner_references=tuple(owners) if owners is not None else None,
        _finalizers=tuple(finalizers) if finalizers is not None else None,
        _protobuf_managed_fields=b"".join(buf[a:b] for a, b in managed) if managed else None,
    )


def _string_entry(buf: bytes, start: int, end: int) -> tuple[str, str]:
    """A ``map<string, string>`` entry: ``(key, value)``."""
    # The common shape first: the key then the value, each shorter than 128 bytes.
    if end - start >= 4 and buf[start] == 0x0A and buf[start + 1] < 0x80:
        middle = start + 2 + buf[start + 1]
        if middle == end:
            return buf[start + 2 : middle].decode(), ""
        if middle + 2 <= end and buf[middle] == 0x12 and middle + 2 + buf[middle + 1] == end:
            return buf[start + 2 : middle].decode(), buf[middle + 2 : end].decode()
    key = value = ""
    for number, wire, a, b in fields(buf, start, end):
        if wire == BYTES:
            if number == 1:
                key = buf[a:b].decode()
            elif number == 2:
                value = buf[a:b].decode()
    return key, value


_OWNER_STRINGS: Final = {5: "apiVersion", 1: "kind", 3: "name", 4: "uid"}
_OWNER_FLAGS: Final = {6: "controller", 7: "blockOwnerDeletion"}


def _owner_reference(buf: bytes, start: int, end: int) -> dict[str, Any]:
    """A ``metav1.OwnerReference`` as Go's JSON has it: the four strings always,
    the two ``*bool`` when set (``decode_message`` gives the same, slower)."""
    owner: dict[str, Any] = {"apiVersion": "", "kind": "", "name": "", "uid": ""}
    i = start
    while i < end:
        key = buf[i]
        if key >= 0x80:
            break  # not the short keys Go writes: the general loop below
        number, wire = key >> 3, key & 7
        n = buf[i + 1] if i + 1 < end else 0x80
        if wire == BYTES and n < 0x80 and i + 2 + n <= end:
            name = _OWNER_STRINGS.get(number)
            if name is not None:
                owner[name] = buf[i + 2 : i + 2 + n].decode()
            i += 2 + n
        elif wire == VARINT and n < 0x80:
            name = _OWNER_FLAGS.get(number)
            if name is not None:
                owner[name] = n != 0
            i += 2
        else:
            break
    else:
        return owner
    for number, wire, a, b in fields(buf, start, end):
        if wire == BYTES:
            name = _OWNER_STRINGS.get(number)
            if name is not None:
                owner[name] = buf[a:b].decode()
        elif wire == VARINT:
            name = _OWNER_FLAGS.get(number)
            if name is not None:
                owner[name] = a != 0
    return owner


def _time(buf: bytes, start: int, end: int) -> str | None:
    """A ``metav1.Time`` (seconds only, as Go keeps it); None for the zero time."""
    if start == end:
        return None
    if buf[start] == 0x08:  # seconds first, as Go writes it
        seconds = signed(read_varint(buf, start + 1)[0])
    else:
        seconds = 0
        for number, wire, a, _b in fields(buf, start, end):
            if number == 1 and wire == VARINT:
                seconds = signed(a)
    text = _times.get(seconds)
    if text is None:
        if len(_times) >= _TIMES_KEPT:
            _times.clear()
        text = _times[seconds] = format_time(seconds)
    return text
