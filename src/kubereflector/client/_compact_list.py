"""List bodies decoded for compact mode, and the list metadata every list has.

JSON lists decode with msgspec straight into compact objects. Lists of the
built-in kinds come in kube-apiserver's protobuf when compact mode asks for it
(:func:`has_protobuf` says which paths), decoded by :mod:`kubereflector.protobuf`;
error bodies in either encoding decode into their Status. Private to
:mod:`kubereflector.client`; pure functions.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Final

import msgspec
from yarl import URL

from ..cache._compact_protobuf import decode_protobuf_list
from ..cache.compact import CompactObject, _decode_generic, _detach
from ..cache.listwatch import ListResult
from ..errors import DecodeError
from ..protobuf import CONTENT_TYPE, ProtobufError, decode
from ..protobuf._envelope import MAGIC
from ..protobuf._schema import list_kind
from ._redact import safe_url

__all__ = [
    "ACCEPT_PROTOBUF",
    "MAGIC",
    "PROTOBUF_ERRORS",
    "CompactListBody",
    "ListMeta",
    "RawListBody",
    "ShardInfo",
    "compact_items",
    "decode_body",
    "decode_compact_list",
    "has_protobuf",
    "not_an_object",
    "protobuf_list",
]

ACCEPT_PROTOBUF: Final = f"{CONTENT_TYPE},application/json"
"""``Accept`` of a list in compact mode of a kind with protobuf: protobuf, else JSON."""
PROTOBUF_ERRORS: Final = (ProtobufError, UnicodeDecodeError, IndexError, RecursionError)
"""What decoding raises for bad protobuf (IndexError: bytes that end inside a field)."""
_ANY: Final = msgspec.json.Decoder()
_DECODE_ERRORS: Final = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


# -- JSON ----------------------------------------------------------------------------------


class ShardInfo(msgspec.Struct):
    selector: str = ""


class ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")
    remainingItemCount: int | None = None
    shardInfo: ShardInfo | None = None


class CompactListBody(msgspec.Struct):
    apiVersion: str = ""
    kind: str = ""
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[CompactObject] | msgspec.UnsetType | None = msgspec.UNSET


class RawListBody(msgspec.Struct):
    apiVersion: str = ""
    kind: str = ""
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[msgspec.Raw] | msgspec.UnsetType | None = msgspec.UNSET


_COMPACT: Final = msgspec.json.Decoder(CompactListBody)
_RAW: Final = msgspec.json.Decoder(RawListBody)


def decode_compact_list(data: bytes) -> CompactListBody | RawListBody:
    """A list body whose items decode compactly: a :class:`CompactListBody`,
    or a :class:`RawListBody` when some item has a field a typed compact
    object has no place for (a ConfigMap's data, ...) or is no object at all;
    :func:`compact_items` finishes either."""
    try:
        return _COMPACT.decode(data)
    except msgspec.ValidationError:
        return _RAW.decode(data)


def compact_items(
    body: CompactListBody | RawListBody, items: list[Any], url: URL
) -> list[CompactObject]:
    """The items of a compactly decoded list, each detached from the body's
    bytes and given the list's item kind and apiVersion when it has none.
    Raises :class:`DecodeError` for an item that is not an object."""
    kind, api_version = _item_kind(body.kind, body.apiVersion)
    if type(body) is CompactListBody:
        for item in items:
            _detach(item, kind, api_version)
        return items
    compact: list[CompactObject] = []
    try:
        for item in items:
            compact.append(_decode_generic(item, kind, api_version))  # noqa: PERF401 (index)
    except _DECODE_ERRORS:
        index = len(compact)
        bad: Any = items[index]
        with contextlib.suppress(*_DECODE_ERRORS):
            bad = _ANY.decode(bad)
        raise not_an_object(index, bad, url) from None
    return compact


def _item_kind(list_kind: str, api_version: str) -> tuple[str | None, str | None]:
    if list_kind.endswith("List"):
        return sys.intern(list_kind[:-4]), sys.intern(api_version) if api_version else None
    return None, None


def not_an_object(index: int, item: Any, url: URL) -> DecodeError:
    return DecodeError(
        f"item {index} of the list response is {type(item).__name__}, not an object",
        url=safe_url(url),
    )


# -- protobuf ------------------------------------------------------------------------------


def has_protobuf(path: str) -> bool:
    """Whether ``path`` lists a resource kube-apiserver answers in protobuf and
    the decoder knows (``/api/v1/namespaces/x/pods``, ``/apis/apps/v1/deployments``)."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 3:
        api_version, rest = parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return False
    if rest[0] == "namespaces" and len(rest) == 3:
        rest = rest[2:]
    return len(rest) == 1 and list_kind(api_version, rest[0]) is not None


def protobuf_list(data: bytes) -> ListResult:
    """A list body in protobuf, its items compact (ProtobufError and the like for bad bytes)."""
    body = decode_protobuf_list(data)
    return ListResult(
        body.items, body.resource_version, body.continue_, body.remaining_item_count, None
    )


def decode_body(data: bytes) -> Any:
    """A body decoded, protobuf or JSON; raises what the decoders raise."""
    if data[:4] == MAGIC:
        return decode(data)
    return _ANY.decode(data)
