"""kube-apiserver's protobuf envelope.

A protobuf body is ``k8s\\x00`` and a ``runtime.Unknown``: ``{typeMeta =
1 {apiVersion = 1, kind = 2}, raw = 2, contentEncoding = 3, contentType = 4}``,
``raw`` being the object's own message.

Pure functions over bytes; thread-safe. Raise :class:`~._wire.ProtobufError`
naming what is wrong.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from ._wire import BYTES, ProtobufError, fields

__all__ = ["MAGIC", "Envelope", "open_envelope", "wrap"]

MAGIC: Final = b"k8s\x00"


class Envelope(NamedTuple):
    """What ``runtime.Unknown`` says, and where its ``raw`` message lies in the body."""

    api_version: str
    kind: str
    start: int
    end: int


def open_envelope(buf: bytes, start: int = 0, end: int | None = None) -> Envelope:
    """The envelope of the body ``buf[start:end]``. Raises ``ProtobufError`` for
    bytes without the magic prefix, or with a content encoding (none is defined)."""
    end = len(buf) if end is None else end
    if buf[start : start + 4] != MAGIC:
        raise ProtobufError("the body does not start with kube-apiserver's protobuf prefix")
    api_version = kind = ""
    raw_start = raw_end = start + 4
    for number, wire, a, b in fields(buf, start + 4, end):
        if wire != BYTES:
            continue
        if number == 1:
            for inner, inner_wire, c, d in fields(buf, a, b):
                if inner_wire == BYTES and inner in (1, 2):
                    text = buf[c:d].decode(errors="replace")
                    if inner == 1:
                        api_version = text
                    else:
                        kind = text
        elif number == 2:
            raw_start, raw_end = a, b
        elif number == 3 and b > a:
            raise ProtobufError(
                f"the body has content encoding {buf[a:b].decode(errors='replace')!r}"
            )
    return Envelope(api_version, kind, raw_start, raw_end)


def wrap(api_version: str, kind: str, raw: bytes) -> bytes:
    """A body as kube-apiserver writes it: the prefix and the envelope around
    ``raw``, the message of ``kind`` in ``api_version``."""
    type_meta = _string(1, api_version) + _string(2, kind)
    return MAGIC + _bytes(1, type_meta) + _bytes(2, raw) + _string(3, "") + _string(4, "")


def _bytes(number: int, data: bytes) -> bytes:
    return _varint_bytes(number << 3 | BYTES) + _varint_bytes(len(data)) + data


def _string(number: int, text: str) -> bytes:
    return _bytes(number, text.encode())


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
