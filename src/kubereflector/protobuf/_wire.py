"""The protobuf wire format, read: varints and the fields of a message.

Functions over ``bytes`` and offsets, no objects per field, so the hot paths (a
list's items, an object's metadata) stay cheap. Every function raises
:class:`ProtobufError` for bytes that end inside a value or use a wire type
Kubernetes never writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from .._compiled import caused_by

__all__ = [
    "BYTES",
    "FIXED32",
    "FIXED64",
    "VARINT",
    "ProtobufError",
    "fields",
    "read_varint",
    "signed",
]

VARINT: Final = 0
FIXED64: Final = 1
BYTES: Final = 2
FIXED32: Final = 5


class ProtobufError(ValueError):
    """Bytes that are not the protobuf message they should be (what was wrong and where)."""


def read_varint(buf: bytes, i: int) -> tuple[int, int]:
    """The varint at ``buf[i]`` and the offset after it."""
    try:
        b = buf[i]
        if b < 0x80:
            return b, i + 1
        result, shift = b & 0x7F, 7
        while True:
            i += 1
            b = buf[i]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, i + 1
            shift += 7
            if shift > 63:
                raise ProtobufError(f"a varint longer than 10 bytes at offset {i}")
    except IndexError:
        raise caused_by(  # noqa: B904 (the cause is set: mypyc drops `from`)
            ProtobufError(f"the message ends inside a varint at offset {i}"), None
        )


def fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """``(number, wire type, a, b)`` for each field of ``buf[start:end]``, in order:
    a varint's value in ``a`` (``b`` -1), a fixed field's or a length-delimited
    one's bounds in ``a:b``."""
    i = start
    while i < end:
        key, i = read_varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == BYTES:
            n, i = read_varint(buf, i)
            j = i + n
            if j > end:
                raise ProtobufError(
                    f"field {number} at offset {i} runs {j - end} bytes past its message"
                )
            yield number, wire, i, j
            i = j
        elif wire == VARINT:
            value, i = read_varint(buf, i)
            yield number, wire, value, -1
        elif wire in (FIXED64, FIXED32):
            j = i + (8 if wire == FIXED64 else 4)
            if j > end:
                raise ProtobufError(f"field {number} at offset {i} runs past its message")
            yield number, wire, i, j
            i = j
        else:
            raise ProtobufError(f"field {number} at offset {i} has wire type {wire}")
        if number == 0:
            raise ProtobufError(f"a field numbered 0 at offset {i}")


def signed(value: int) -> int:
    """A varint read as Go's int32/int64 (two's complement over 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value
