"""A JSON-shaped value encoded as kube-apiserver encodes the same Go struct in
protobuf (for the emulator, which answers protobuf as the server does).

The value is read as Go's ``encoding/json`` would read it into the struct (a
missing key or ``null`` is the Go zero value; keys the type does not have are
dropped), and the struct is written as gogo-protobuf's generated ``Marshal``
writes it: fields in number order; scalars, strings and embedded structs
always, even at their zero value; pointers, slices, maps and ``[]byte`` only
when set; map entries in key order. :func:`~._decode.decode_message` of the
result gives back what the server's JSON for the value decodes to.

Pure functions; thread-safe. Raise ``ValueError`` naming the type and field for
a value of the wrong JSON type.
"""

from __future__ import annotations

import base64
import calendar
import re
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from ._decode import is_items
from ._schema import INLINE, POINTER, Field, Shape, message

__all__ = ["encode_list", "encode_message"]

_json_encode: Final = msgspec.json.encode
_TIME: Final = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)"
)


def encode_message(value: Any, type_name: str) -> bytes:
    """``value`` (a dict, or a list for a named slice type) as a ``type_name`` message."""
    msg = message(type_name)
    out = bytearray()
    if msg.items is not None:
        for element in value or ():
            _field(out, 1, msg.items, element, f"{type_name}.items")
        return bytes(out)
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ValueError(f"{type_name}: expected an object, got {type(value).__name__}")
    for field in sorted(msg.fields, key=_number):
        _put(out, field, value, type_name)
    return bytes(out)


def encode_list(list_type: str, metadata: dict[str, Any], items: Iterable[bytes]) -> bytes:
    """A message of ``list_type`` (one with ``metadata`` and ``items``): ``metadata``
    (a ListMeta) encoded, and ``items`` already encoded (each an item's message)."""
    by_name = {f.name: f for f in message(list_type).fields}
    out = bytearray()
    _bytes_field(out, by_name["metadata"].number, encode_message(metadata, "meta/v1.ListMeta"))
    items_number = by_name["items"].number
    for item in items:
        _bytes_field(out, items_number, item)
    return bytes(out)


def _number(field: Field) -> int:
    return field.number


def _put(out: bytearray, field: Field, value: dict[str, Any], type_name: str) -> None:
    where = f"{type_name}.{field.name or field.shape}"
    shape = field.shape
    if field.flags & INLINE:
        _field(out, field.number, shape, value, where)  # the parent's keys are its own
        return
    item = value.get(field.name)
    head = shape if type(shape) is str else shape[0]
    if head == "list":
        for element in item or ():
            _field(out, field.number, shape[1], element, where)
        return
    if head == "map":
        item = item or {}
        for key in sorted(item):
            entry = bytearray()
            _field(entry, 1, "string", key, where)
            _field(entry, 2, shape[1], item[key], where)
            _tag(out, field.number, 2)
            _varint(out, len(entry))
            out += entry
        return
    if item is None and (field.flags & POINTER or head == "bytes" or is_items(shape)):
        return  # nil: not written
    _field(out, field.number, shape, item, where)


def _tag(out: bytearray, number: int, wire: int) -> None:
    _varint(out, number << 3 | wire)


def _varint(out: bytearray, value: int) -> None:
    if value < 0:
        value += 1 << 64
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _bytes_field(out: bytearray, number: int, data: bytes) -> None:
    _tag(out, number, 2)
    _varint(out, len(data))
    out += data


def _field(out: bytearray, number: int, shape: Shape, value: Any, where: str) -> None:
    """One field (one element of a repeated one) of ``shape`` with ``value``."""
    if not isinstance(shape, str):
        _bytes_field(out, number, encode_message(value, str(shape[1])))
        return
    try:
        if shape == "string":
            _bytes_field(out, number, (value or "").encode())
        elif shape == "bytes":
            _bytes_field(out, number, base64.b64decode(value or ""))
        elif shape in ("bool", "int32", "int64"):
            _tag(out, number, 0)
            _varint(out, int(value or 0))
        else:
            _bytes_field(out, number, _SPECIAL[shape](value))
    except (TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"{where}: {value!r} is not a {shape} ({err})") from None


def _timestamp(value: Any, micro: bool) -> bytes:
    if value is None:
        return b""  # Go's zero time: an empty message
    match = _TIME.fullmatch(value)
    if match is None:
        raise ValueError("not an RFC 3339 time")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    zone = match.group(8)
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    nanos = 0
    if micro and match.group(7):
        nanos = int((match.group(7)[1:] + "000000000")[:9]) // 1000 * 1000
    out = bytearray()
    _tag(out, 1, 0)
    _varint(out, seconds)
    _tag(out, 2, 0)
    _varint(out, nanos)
    return bytes(out)


def _quantity(value: Any) -> bytes:
    out = bytearray()
    _bytes_field(out, 1, str(value if value is not None else "0").encode())
    return bytes(out)


def _int_or_string(value: Any) -> bytes:
    out = bytearray()
    is_string = isinstance(value, str)
    _tag(out, 1, 0)
    _varint(out, 1 if is_string else 0)
    _tag(out, 2, 0)
    _varint(out, 0 if is_string else int(value or 0))
    _bytes_field(out, 3, value.encode() if is_string else b"")
    return bytes(out)


def _embedded_json(value: Any) -> bytes:
    out = bytearray()
    if value is not None:
        _bytes_field(out, 1, _json_encode(value))
    return bytes(out)


_SPECIAL: Final = {
    "time": lambda value: _timestamp(value, micro=False),
    "microtime": lambda value: _timestamp(value, micro=True),
    "quantity": _quantity,
    "intorstring": _int_or_string,
    "rawextension": _embedded_json,
    "fieldsv1": _embedded_json,
}
