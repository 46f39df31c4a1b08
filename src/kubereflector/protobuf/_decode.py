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
import functools
import time
from collections.abc import Callable, Collection
from typing import Any, Final, NamedTuple

import msgspec

from .._compiled import caused_by
from ._schema import INLINE, OMIT_EMPTY, POINTER, Shape, message
from ._wire import BYTES, VARINT, ProtobufError, fields, read_varint, signed

__all__ = ["decode_message", "format_time", "is_items"]

# What a field holds, as a small int the decode loop branches on.
_STRING, _BOOL, _INT, _BYTES, _MESSAGE, _LIST, _MAP, _INLINE, _SPECIAL_VALUE = range(9)
_json_decode: Final = msgspec.json.decode


class _FieldPlan(NamedTuple):
    name: str
    code: int
    arg: Any
    """The message type (``_MESSAGE``, ``_INLINE``), the element's ``(code, arg)``
    (``_LIST``, ``_MAP``), the decoder (``_SPECIAL_VALUE``), or None."""
    drop_zero: bool
    """omitempty on a value Go never leaves nil: a zero one is left out."""


class _Plan(NamedTuple):
    """How to decode one message type, worked out once from the table."""

    type_name: str
    by_number: dict[int, _FieldPlan]
    absent: tuple[tuple[int, _FieldPlan, Any], ...]
    """``(number, field, zero)`` of the fields Go's JSON has even when the message
    lacks them; ``zero`` is a value, or ``_MAKE`` for a zero message to build."""
    items: tuple[int, Any] | None
    """A named slice's element ``(code, arg)``, or None for a struct."""


_MAKE: Final[Any] = object()


@functools.cache
def _plan(type_name: str) -> _Plan:
    msg = message(type_name)
    if msg.items is not None:
        return _Plan(type_name, {}, (), _element(msg.items))
    by_number: dict[int, _FieldPlan] = {}
    absent: list[tuple[int, _FieldPlan, Any]] = []
    for field in msg.fields:
        shape, flags = field.shape, field.flags
        head = shape if isinstance(shape, str) else shape[0]
        omit_empty, pointer = bool(flags & OMIT_EMPTY), bool(flags & POINTER)
        if flags & INLINE:
            plan = _FieldPlan("", _INLINE, str(shape[1]), False)
            if not pointer:
                absent.append((field.number, plan, _MAKE))
        elif head == "list" or head == "map":
            code, arg = _element(shape[1])
            plan = _FieldPlan(field.name, _LIST if head == "list" else _MAP, (code, arg), False)
            if not omit_empty:
                absent.append((field.number, plan, None))
        else:
            code, arg = _element(shape)
            nilable = pointer or head == "bytes" or (code == _MESSAGE and is_items(shape))
            scalar = code in (_STRING, _BOOL, _INT, _BYTES)
            plan = _FieldPlan(field.name, code, arg, omit_empty and scalar and not pointer)
            if nilable:
                if not omit_empty:
                    absent.append((field.number, plan, None))
            elif not (omit_empty and scalar):
                zero = _MAKE if code == _MESSAGE else _ZEROS[str(shape)]
                absent.append((field.number, plan, zero))
        by_number[field.number] = plan
    return _Plan(type_name, by_number, tuple(absent), None)


def _element(shape: Shape) -> tuple[int, Any]:
    """``(code, arg)`` of one value of ``shape`` (not a list or a map)."""
    if not isinstance(shape, str):
        return _MESSAGE, str(shape[1])
    code = _CODES.get(shape)
    if code is not None:
        return code, None
    return _SPECIAL_VALUE, _SCALARS[shape]


def decode_message(
    buf: bytes, start: int, end: int, type_name: str, only: Collection[str] | None = None
) -> Any:
    """``buf[start:end]`` decoded as ``type_name``: a dict (a list for a named
    slice type). ``only``: decode just these JSON keys (the others are left out,
    not even zero-filled)."""
    plan = _plan(type_name)
    if plan.items is not None:
        code, arg = plan.items
        out: list[Any] = []
        for number, wire, a, b in fields(buf, start, end):
            if number == 1:
                _append(out, code, arg, buf, wire, a, b, type_name)
        return out
    result: dict[str, Any] = {}
    inlined: set[int] | None = None
    by_number = plan.by_number
    i = start
    while i < end:
        key = buf[i]
        if key < 0x80:
            i += 1
        else:
            key, i = read_varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == BYTES:
            n = buf[i] if i < end else 0
            if n < 0x80:
                i += 1
            else:
                n, i = read_varint(buf, i)
            j = i + n
            if j > end:
                raise ProtobufError(f"{type_name}: field {number} runs past the message")
        elif wire == VARINT:
            j = -1
            n, i = read_varint(buf, i)
        else:
            raise ProtobufError(f"{type_name}: field {number} has wire type {wire}")
        field = by_number.get(number)
        if field is None or (only is not None and field.name not in only):
            # A field this release does not know (Go drops it too), or one not asked for.
            if j >= 0:
                i = j
            continue
        code = field.code
        if code == _STRING:
            value: Any = _string(buf, wire, i, j, f"{type_name}.{field.name}")
        elif code == _MESSAGE:
            _expect(wire, BYTES, f"{type_name}.{field.name}")
            value = decode_message(buf, i, j, field.arg)
        elif code == _LIST:
            values = result.get(field.name)
            if values is None:
                values = result[field.name] = []
            _append(values, field.arg[0], field.arg[1], buf, wire, i if j >= 0 else n, j, type_name)
            i = j if j >= 0 else i
            continue
        elif code == _MAP:
            _expect(wire, BYTES, f"{type_name}.{field.name}")
            entries = result.get(field.name)
            if entries is None:
                entries = result[field.name] = {}
            _map_entry(entries, field.arg, buf, i, j, type_name)
            i = j
            continue
        elif code == _INLINE:
            _expect(wire, BYTES, f"{type_name}.{field.name}")
            result.update(decode_message(buf, i, j, field.arg))
            if inlined is None:
                inlined = set()
            inlined.add(number)
            i = j
            continue
        else:
            value = _scalar(code, field.arg, buf, wire, i if j >= 0 else n, j, type_name)
        if j >= 0:
            i = j
        if field.drop_zero and not value:
            continue
        result[field.name] = value
    for number, field, zero in plan.absent:
        name = field.name
        if field.code == _INLINE:
            if inlined is None or number not in inlined:
                result.update(decode_message(b"", 0, 0, field.arg))
        elif name not in result and (only is None or name in only):
            result[name] = decode_message(b"", 0, 0, field.arg) if zero is _MAKE else zero
    nested = _NESTED_TYPE_META.get(type_name)
    if nested is not None:
        templates, type_meta = nested
        for item in result.get(templates) or ():
            for name, value in type_meta.items():
                item.setdefault(name, value)
    return result


def _expect(wire: int, expected: int, where: str) -> None:
    if wire != expected:
        raise ProtobufError(f"{where}: a field has wire type {wire}, the schema says {expected}")


def _scalar(code: int, arg: Any, buf: bytes, wire: int, a: int, b: int, where: str) -> Any:
    """One value that is not a message, a list or a map (``a``: a varint's value)."""
    if code == _BOOL:
        if wire != VARINT:
            raise ProtobufError(f"{where}: a bool with wire type {wire}")
        return a != 0
    if code == _INT:
        if wire != VARINT:
            raise ProtobufError(f"{where}: an integer with wire type {wire}")
        return signed(a)
    if code == _STRING:
        return _string(buf, wire, a, b, where)
    if code == _BYTES:
        return _bytes(buf, wire, a, b, where)
    decoded: Any = arg(buf, wire, a, b, where)
    return decoded


def _append(
    out: list[Any], code: int, arg: Any, buf: bytes, wire: int, a: int, b: int, where: str
) -> None:
    """Add one occurrence of a repeated field (a packed run of numbers is several)."""
    if code == _MESSAGE:
        if wire != BYTES:
            raise ProtobufError(f"{where}: a message with wire type {wire}")
        out.append(decode_message(buf, a, b, arg))
    elif wire == BYTES and code in (_INT, _BOOL):
        i = a
        while i < b:
            value, i = read_varint(buf, i)
            out.append(_scalar(code, arg, buf, VARINT, value, -1, where))
    else:
        out.append(_scalar(code, arg, buf, wire, a, b, where))


def _map_entry(
    out: dict[str, Any], element: tuple[int, Any], buf: bytes, a: int, b: int, where: str
) -> None:
    """Add one map entry (a message ``{key = 1, value = 2}``)."""
    code, arg = element
    key = ""
    value: Any = _MAKE
    for number, wire, c, d in fields(buf, a, b):
        if number == 1:
            key = _string(buf, wire, c, d, where)
        elif number == 2:
            if code == _MESSAGE:
                if wire != BYTES:
                    raise ProtobufError(f"{where}: a message with wire type {wire}")
                value = decode_message(buf, c, d, arg)
            else:
                value = _scalar(code, arg, buf, wire, c, d, where)
    if value is _MAKE:
        if code == _MESSAGE:
            value = decode_message(b"", 0, 0, arg)
        elif code == _SPECIAL_VALUE:
            value = arg(buf, BYTES, 0, 0, where)
        else:
            value = "" if code == _BYTES else _CODE_ZEROS[code]
    out[key] = value


def is_items(shape: Shape) -> bool:
    """Whether ``shape`` is a named slice type (its JSON a list, its protobuf a message)."""
    return type(shape) is tuple and shape[0] == "message" and message(shape[1]).items is not None


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


# -- scalars and Kubernetes' special types ---------------------------------------------------


def _string(buf: bytes, wire: int, a: int, b: int, where: str) -> str:
    _expect(wire, BYTES, where)
    try:
        return buf[a:b].decode()
    except UnicodeDecodeError as err:
        raise caused_by(  # noqa: B904 (the cause is set: mypyc drops `from`)
            ProtobufError(f"{where}: a string that is not UTF-8 ({err.reason})"), None
        )


def _bytes(buf: bytes, wire: int, a: int, b: int, where: str) -> str:
    _expect(wire, BYTES, where)
    return base64.b64encode(buf[a:b]).decode("ascii")


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
        raise caused_by(  # noqa: B904 (the cause is set: mypyc drops `from`)
            ProtobufError(f"{where}: embedded bytes that are not JSON ({err})"), None
        )


_Scalar = Callable[[bytes, int, int, int, str], Any]
_SCALARS: Final[dict[str, _Scalar]] = {  # the special types: their own JSON
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
_CODES: Final = {"string": _STRING, "bool": _BOOL, "int32": _INT, "int64": _INT, "bytes": _BYTES}
_CODE_ZEROS: Final = {_STRING: "", _BOOL: False, _INT: 0}
