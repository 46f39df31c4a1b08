"""A protobuf message decoded into the JSON-shaped value Go's ``encoding/json``
makes of the same Go struct.

kube-apiserver's JSON for a built-in object is the Go struct it decoded from
etcd's protobuf, encoded by ``encoding/json``. So the rules here are Go's: a
field absent from the message is its Go zero value; ``omitempty`` drops false,
0, "", and empty or nil slices, maps and pointers, never a struct; a nil slice,
map or pointer without ``omitempty`` is ``null``; and the special types keep
their own JSON (``Time`` as RFC 3339 seconds, ``MicroTime`` with microseconds,
``Quantity`` as a string, ``IntOrString`` as either,
``RawExtension`` and ``FieldsV1`` as the JSON they carry, ``[]byte`` as base64).

Pure functions; thread-safe. Raise :class:`~._wire.ProtobufError` naming the
message and field for bytes that do not match the schema.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Collection
from typing import Any, Final

import msgspec

from ._schema import INLINE, OMIT_EMPTY, POINTER, Field, Shape, message
from ._wire import BYTES, VARINT, ProtobufError, fields, read_varint, signed

__all__ = ["decode_message", "format_time", "is_items"]

_ABSENT: Final[Any] = object()
_NILABLE: Final = frozenset({"bytes", "list", "map"})
_json_decode: Final = msgspec.json.decode


def decode_message(
    buf: bytes, start: int, end: int, type_name: str, only: Collection[str] | None = None
) -> Any:
    """``buf[start:end]`` decoded as ``type_name``: a dict (a list for a named
    slice type). ``only``: decode just these JSON keys (the others are left out,
    not even zero-filled)."""
    msg = message(type_name)
    if msg.items is not None:
        out: list[Any] = []
        for number, wire, a, b in fields(buf, start, end):
            if number == 1:
                _append(out, msg.items, buf, wire, a, b, type_name)
        return out
    found: dict[int, Any] = {}
    by_number = msg.by_number
    for number, wire, a, b in fields(buf, start, end):
        field = by_number.get(number)
        if field is None or (only is not None and field.name not in only):
            continue  # a field this release does not know: Go drops it too
        shape = field.shape
        head = shape if type(shape) is str else shape[0]
        if head == "list":
            values = found.get(number)
            if values is None:
                values = found[number] = []
            _append(values, shape[1], buf, wire, a, b, type_name)
        elif head == "map":
            entries = found.get(number)
            if entries is None:
                entries = found[number] = {}
            _map_entry(entries, shape[1], buf, wire, a, b, type_name)
        else:
            found[number] = _value(shape, buf, wire, a, b, type_name)
    result: dict[str, Any] = {}
    for field in msg.fields:
        if only is not None and field.name not in only:
            continue
        _emit(result, field, found.get(field.number, _ABSENT))
    nested = _NESTED_TYPE_META.get(type_name)
    if nested is not None:
        key, type_meta = nested
        for item in result.get(key) or ():
            for name, value in type_meta.items():
                item.setdefault(name, value)
    return result


_NESTED_TYPE_META: Final = {
    f"apps/{version}.StatefulSetSpec": (
        "volumeClaimTemplates",
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim"},
    )
    for version in ("v1", "v1beta1", "v1beta2")
}
"""Objects nested in others whose kind and apiVersion kube-apiserver's conversion
sets (kubernetes/kubernetes#87583): they reach its JSON, but protobuf has no
TypeMeta for a nested object, so the decoder puts them back."""


def _emit(out: dict[str, Any], field: Field, value: Any) -> None:
    """Put ``field``'s value (``_ABSENT`` when the message lacks it) in ``out`` as
    Go's ``encoding/json`` would."""
    flags, shape = field.flags, field.shape
    head = shape if type(shape) is str else shape[0]
    if flags & INLINE:
        if value is _ABSENT:
            if flags & POINTER:
                return  # a nil embedded pointer contributes nothing
            value = _zero(shape)
        out.update(value)
        return
    omit_empty = flags & OMIT_EMPTY
    if value is _ABSENT:
        if flags & POINTER or head in _NILABLE or is_items(shape):
            if not omit_empty:
                out[field.name] = None
            return
        value = _zero(shape)
    elif flags & POINTER:
        out[field.name] = value
        return
    if omit_empty and _empty(value, head):
        return
    out[field.name] = value


def _empty(value: Any, head: str) -> bool:
    """Go's ``isEmptyValue`` for what ``omitempty`` may drop (never a struct)."""
    if head == "message" or head in _SPECIAL:
        return False
    if head in _NILABLE:
        return len(value) == 0
    return not value


def is_items(shape: Shape) -> bool:
    """Whether ``shape`` is a named slice type (its JSON a list, its protobuf a message)."""
    return type(shape) is tuple and shape[0] == "message" and message(shape[1]).items is not None


def _zero(shape: Shape) -> Any:
    """The JSON of Go's zero value of ``shape``."""
    if type(shape) is str:
        return _ZEROS[shape]
    if shape[0] == "message":
        return decode_message(b"", 0, 0, str(shape[1]))
    return None  # a nil slice or map


def _append(
    out: list[Any], shape: Shape, buf: bytes, wire: int, a: int, b: int, where: str
) -> None:
    """Add one occurrence of a repeated field (a packed run of numbers is several)."""
    if wire == BYTES and type(shape) is str and shape in _PACKABLE:
        i = a
        while i < b:
            value, i = read_varint(buf, i)
            out.append(_SCALARS[shape](buf, VARINT, value, -1, where))
        return
    out.append(_value(shape, buf, wire, a, b, where))


def _map_entry(
    out: dict[str, Any], shape: Shape, buf: bytes, wire: int, a: int, b: int, where: str
) -> None:
    """Add one map entry (a message ``{key = 1, value = 2}``)."""
    _expect(wire, BYTES, where)
    key = ""
    value: Any = _ABSENT
    for number, entry_wire, c, d in fields(buf, a, b):
        if number == 1:
            key = _string(buf, entry_wire, c, d, where)
        elif number == 2:
            value = _value(shape, buf, entry_wire, c, d, where)
    if value is _ABSENT:
        value = "" if shape == "bytes" else _zero(shape)
    out[key] = value


def _value(shape: Shape, buf: bytes, wire: int, a: int, b: int, where: str) -> Any:
    """One value of ``shape`` (not a list or a map)."""
    if type(shape) is str:
        return _SCALARS[shape](buf, wire, a, b, where)
    _expect(wire, BYTES, where)
    return decode_message(buf, a, b, str(shape[1]))


def _expect(wire: int, expected: int, where: str) -> None:
    if wire != expected:
        raise ProtobufError(f"{where}: a field has wire type {wire}, the schema says {expected}")


# -- scalars and Kubernetes' special types ---------------------------------------------------


def _string(buf: bytes, wire: int, a: int, b: int, where: str) -> str:
    _expect(wire, BYTES, where)
    try:
        return buf[a:b].decode()
    except UnicodeDecodeError as err:
        raise ProtobufError(f"{where}: a string that is not UTF-8 ({err.reason})") from None


def _bytes(buf: bytes, wire: int, a: int, b: int, where: str) -> str:
    _expect(wire, BYTES, where)
    return base64.b64encode(buf[a:b]).decode("ascii")


def _bool(buf: bytes, wire: int, a: int, b: int, where: str) -> bool:
    _expect(wire, VARINT, where)
    return a != 0


def _int(buf: bytes, wire: int, a: int, b: int, where: str) -> int:
    _expect(wire, VARINT, where)
    return signed(a)


def _timestamp(buf: bytes, a: int, b: int, where: str) -> tuple[int, int]:
    seconds = nanos = 0
    for number, wire, c, _d in fields(buf, a, b):
        if number == 1:
            seconds = _int(buf, wire, c, -1, where)
        elif number == 2:
            nanos = _int(buf, wire, c, -1, where)
    return seconds, nanos


def format_time(seconds: int, micros: int | None = None) -> str:
    """RFC 3339 in UTC as Go writes ``metav1.Time`` (``micros`` None) or
    ``metav1.MicroTime`` (six digits of fraction)."""
    t = time.gmtime(seconds)
    text = (
        f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T"
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
    )
    return f"{text}Z" if micros is None else f"{text}.{micros:06d}Z"


def _time(buf: bytes, wire: int, a: int, b: int, where: str) -> str | None:
    _expect(wire, BYTES, where)
    if a == b:
        return None  # Go's zero Time: JSON null
    seconds, _nanos = _timestamp(buf, a, b, where)  # metav1.Time keeps seconds only
    return format_time(seconds)


def _micro_time(buf: bytes, wire: int, a: int, b: int, where: str) -> str | None:
    _expect(wire, BYTES, where)
    if a == b:
        return None
    seconds, nanos = _timestamp(buf, a, b, where)
    return format_time(seconds, nanos // 1000)


def _quantity(buf: bytes, wire: int, a: int, b: int, where: str) -> str:
    _expect(wire, BYTES, where)
    text = "0"
    for number, inner, c, d in fields(buf, a, b):
        if number == 1:
            text = _string(buf, inner, c, d, where)
    return text


def _int_or_string(buf: bytes, wire: int, a: int, b: int, where: str) -> int | str:
    _expect(wire, BYTES, where)
    kind = int_value = 0
    str_value = ""
    for number, inner, c, d in fields(buf, a, b):
        if number == 1:
            kind = _int(buf, inner, c, d, where)
        elif number == 2:
            int_value = _int(buf, inner, c, d, where)
        elif number == 3:
            str_value = _string(buf, inner, c, d, where)
    return str_value if kind == 1 else int_value


def _embedded_json(buf: bytes, wire: int, a: int, b: int, where: str) -> Any:
    """A ``RawExtension`` or ``FieldsV1``: ``{raw bytes = 1}`` whose bytes are JSON."""
    _expect(wire, BYTES, where)
    raw = b""
    for number, inner, c, d in fields(buf, a, b):
        if number == 1:
            _expect(inner, BYTES, where)
            raw = buf[c:d]
    if not raw:
        return None
    try:
        return _json_decode(raw)
    except msgspec.DecodeError as err:
        raise ProtobufError(f"{where}: embedded bytes that are not JSON ({err})") from None


_Scalar = Callable[[bytes, int, int, int, str], Any]
_SCALARS: Final[dict[str, _Scalar]] = {
    "string": _string,
    "bytes": _bytes,
    "bool": _bool,
    "int32": _int,
    "int64": _int,
    "time": _time,
    "microtime": _micro_time,
    "quantity": _quantity,
    "intorstring": _int_or_string,
    "rawextension": _embedded_json,
    "fieldsv1": _embedded_json,
}
_ZEROS: Final[dict[str, Any]] = {
    "string": "",
    "bytes": None,
    "bool": False,
    "int32": 0,
    "int64": 0,
    "time": None,
    "microtime": None,
    "quantity": "0",
    "intorstring": 0,
    "rawextension": None,
    "fieldsv1": None,
}
_SPECIAL: Final = frozenset(
    {"time", "microtime", "quantity", "intorstring", "rawextension", "fieldsv1"}
)
_PACKABLE: Final = frozenset({"bool", "int32", "int64"})
