"""Compact objects: an informer cache at a fraction of the memory (``object_mode="compact"``).

A :class:`CompactObject` holds one Kubernetes object as

* its metadata, decoded (what keys, indexes, selectors and controllers read):
  ``name``, ``generateName``, ``namespace``, ``selfLink``, ``uid``,
  ``resourceVersion``, ``generation``, ``creationTimestamp``,
  ``deletionTimestamp``, ``deletionGracePeriodSeconds``, ``labels``,
  ``annotations``, ``ownerReferences`` and ``finalizers``; plus ``kind`` and
  ``apiVersion``;
* the raw JSON bytes of everything else (``spec``, ``status``, ``data``,
  ``metadata.managedFields``, ...), decoded each time it is read and not kept
  decoded: keep what you read (or :meth:`CompactObject.to_dict`) if you read
  it again and again. An object listed in protobuf (built-in kinds; see
  :mod:`kubereflector.protobuf`) keeps those parts as the server's protobuf
  instead, and reads them as the same JSON-shaped values.

Reads behave like the ``dict`` s of the default mode: ``obj["spec"]["nodeName"]``,
``obj.get("status", {})``, ``"spec" in obj``, iteration, ``len``, ``keys()``/
``items()``/``values()``, and ``==`` against dicts and other compact objects
(by content). Nested values come as :class:`ReadOnlyDict` and
:class:`ReadOnlyList`, which read like ``dict`` and ``list`` and compare equal
to them. Every write (``obj["x"] = ...``, ``del``, ``pop``, ``update``,
``append``, ...) raises :class:`ReadOnlyObjectError`; :meth:`~CompactObject.to_dict`
(or ``copy.deepcopy``) gives a mutable deep copy, :meth:`~CompactObject.to_json`
the JSON bytes; ``copy.copy`` gives the object itself.

What it saves: about a quarter of the memory of a decoded dict (a ~5.5 KB Pod
with managedFields: ~7 KB instead of ~28 KB), and nearly all of the garbage
collector's work over the cache (a compact object is a handful of objects the
collector does not track, a decoded Pod ~60 tracked containers); decoding
into it is several times faster than into dicts. What it costs: reading a lazy
field decodes it again on every access (~ as long as decoding that part of the
JSON), and ``repr`` shows identity only (kind, namespace, name, resourceVersion).

Immutable, hence safe to share between threads.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from typing import Any, Final, Literal, NoReturn

import msgspec
from msgspec import Raw, Struct, field
from msgspec.structs import force_setattr

__all__ = [
    "CompactMetadata",
    "CompactObject",
    "ObjectMode",
    "ReadOnlyDict",
    "ReadOnlyList",
    "ReadOnlyObjectError",
    "decode_compact",
    "to_compact",
]

ObjectMode = Literal["dict", "compact", "compact-protobuf"]
"""How an informer stores objects: ``"dict"`` (decoded JSON, the default),
``"compact"`` (:class:`CompactObject`), or ``"compact-protobuf"``: compact
objects, the built-in kinds' lists read in kube-apiserver's protobuf and kept
as it (see :mod:`kubereflector.protobuf`: smaller and quicker to list, slower
to read ``spec`` and ``status``)."""

_OBJECT_MODES: Final = ("dict", "compact", "compact-protobuf")

_EMPTY: Final = Raw()
_decode: Final = msgspec.json.decode
_encode: Final = msgspec.json.encode


class ReadOnlyObjectError(TypeError):
    """A write to a compact object or to a value read from one (they are the
    informer cache's own, shared by every reader)."""


def _read_only(what: str, copy: str = "to_dict") -> NoReturn:
    raise ReadOnlyObjectError(
        f"{what} is read-only (part of an informer cache in compact mode); "
        f"call .{copy}() on it for a mutable copy"
    )


# -- read-only views of decoded JSON ---------------------------------------------------


def _freeze(value: Any) -> Any:
    """``value`` as it is handed to a reader: dicts and lists wrapped read-only."""
    kind = type(value)
    if kind is dict:
        return ReadOnlyDict(value)
    if kind is list or kind is tuple:
        return ReadOnlyList(value)
    return value


def _thaw(value: Any) -> Any:
    """A mutable deep copy of JSON-shaped ``value`` (views and compact objects included)."""
    kind = type(value)
    if kind is dict:
        return {k: _thaw(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_thaw(v) for v in value]
    if kind is ReadOnlyDict or kind is ReadOnlyList:
        return _thaw(value._data)
    if kind is CompactObject or kind is CompactMetadata:
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    return value


class ReadOnlyDict(Mapping[str, Any]):
    """A ``dict`` read from a compact object: reads like one, compares equal to
    an equal ``dict``; writes raise :class:`ReadOnlyObjectError`;
    :meth:`to_dict` gives a mutable deep copy."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return _freeze(self._data[key])

    def get(self, key: str, default: Any = None) -> Any:
        value = self._data.get(key, default)
        return value if value is default else _freeze(value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return bool(self._data == _thaw(other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._data)

    def to_dict(self) -> dict[str, Any]:
        """A mutable deep copy."""
        result: dict[str, Any] = _thaw(self._data)
        return result

    def __deepcopy__(self, memo: Any) -> dict[str, Any]:
        """A deep copy is for changing: a mutable ``dict`` (as :meth:`to_dict`)."""
        return self.to_dict()

    def __setitem__(self, key: str, value: Any) -> NoReturn:
        _read_only("this mapping")

    def __delitem__(self, key: str) -> NoReturn:
        _read_only("this mapping")

    def _write(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Raises :class:`ReadOnlyObjectError`: the mapping is read-only (use :meth:`to_dict`)."""
        _read_only("this mapping")

    pop = popitem = clear = update = setdefault = __ior__ = _write


class ReadOnlyList(Sequence[Any]):
    """A ``list`` read from a compact object: reads like one, compares equal to
    an equal ``list``; writes raise :class:`ReadOnlyObjectError`;
    :meth:`to_list` gives a mutable deep copy."""

    __slots__ = ("_data",)

    def __init__(self, data: list[Any] | tuple[Any, ...]) -> None:
        self._data = data

    def __getitem__(self, index: Any) -> Any:
        if type(index) is slice:
            return ReadOnlyList(self._data[index])
        return _freeze(self._data[index])

    def __iter__(self) -> Iterator[Any]:
        return map(_freeze, self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, value: object) -> bool:
        return _thaw(value) in self._data

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list | tuple | ReadOnlyList):
            return bool(list(self._data) == _thaw(other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self._data))

    def to_list(self) -> list[Any]:
        """A mutable deep copy."""
        result: list[Any] = _thaw(self._data)
        return result

    def __deepcopy__(self, memo: Any) -> list[Any]:
        """A deep copy is for changing: a mutable ``list`` (as :meth:`to_list`)."""
        return self.to_list()

    def __setitem__(self, index: Any, value: Any) -> NoReturn:
        _read_only("this list", "to_list")

    def __delitem__(self, index: Any) -> NoReturn:
        _read_only("this list", "to_list")

    def _write(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Raises :class:`ReadOnlyObjectError`: the list is read-only (use :meth:`to_list`)."""
        _read_only("this list", "to_list")

    append = extend = insert = remove = pop = clear = sort = reverse = __iadd__ = _write


# -- the mapping protocol, shared by the two structs ----------------------------------


class _MappingMixin:
    """``Mapping`` methods over ``__getitem__``/``__iter__``/``__contains__``/``__len__``
    (the structs cannot inherit ``Mapping`` itself: they are registered with it)."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        raise NotImplementedError

    def __iter__(self) -> Iterator[str]:
        raise NotImplementedError

    def _what(self) -> str:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def get(self, key: str, default: Any = None) -> Any:
        """``self[key]``, or ``default`` when there is no ``key``."""
        try:
            return self[key]
        except KeyError:
            return default

    def keys(self) -> KeysView[str]:
        """The keys present, in JSON order (as ``dict.keys``)."""
        return KeysView(self)  # type: ignore[arg-type]

    def items(self) -> ItemsView[str, Any]:
        """``(key, self[key])`` pairs (as ``dict.items``; raw parts decoded as read)."""
        return ItemsView(self)  # type: ignore[arg-type]

    def values(self) -> ValuesView[Any]:
        """``self[key]`` for each key (as ``dict.values``; raw parts decoded as read)."""
        return ValuesView(self)  # type: ignore[arg-type]

    def __setitem__(self, key: str, value: Any) -> NoReturn:
        _read_only(self._what())

    def __delitem__(self, key: str) -> NoReturn:
        _read_only(self._what())

    def _write(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Raises :class:`ReadOnlyObjectError`: the object is read-only (use ``to_dict()``)."""
        _read_only(self._what())

    pop = popitem = clear = update = setdefault = __ior__ = _write

    def __copy__(self) -> Any:
        return self  # immutable

    def __ne__(self, other: object) -> bool:
        # msgspec's Struct defines its own __ne__ (field by field), which would
        # otherwise answer for these classes' __eq__ (by content, dicts too).
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __reduce__(self) -> tuple[Any, ...]:
        # An unpickled empty Raw is not the default object, so the JSON encoder
        # would write it (as nothing: broken JSON); restore the default instead.
        fields: tuple[str, ...] = self.__struct_fields__  # type: ignore[attr-defined]
        return (_unpickle, (type(self), tuple(getattr(self, name) for name in fields)))

    def __deepcopy__(self, memo: Any) -> Any:
        """A deep copy is for changing: a mutable ``dict`` (as :meth:`to_dict`)."""
        return self.to_dict()


def _unpickle(cls: type[Any], values: tuple[Any, ...]) -> Any:
    """A pickled compact object or metadata, rebuilt with the default empty Raw."""
    return cls(*(_EMPTY if type(value) is Raw and not value else value for value in values))


# -- metadata --------------------------------------------------------------------------


class CompactMetadata(
    _MappingMixin,
    Struct,
    gc=False,
    frozen=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
):
    """The ``metadata`` of a :class:`CompactObject`: a read-only mapping (see the
    module documentation); ``managedFields`` stays raw until read."""

    _name: str | None = field(default=None, name="name")
    _generate_name: str | None = field(default=None, name="generateName")
    _namespace: str | None = field(default=None, name="namespace")
    _self_link: str | None = field(default=None, name="selfLink")
    _uid: str | None = field(default=None, name="uid")
    _resource_version: str | None = field(default=None, name="resourceVersion")
    _generation: int | None = field(default=None, name="generation")
    _creation_timestamp: str | None = field(default=None, name="creationTimestamp")
    _deletion_timestamp: str | None = field(default=None, name="deletionTimestamp")
    _deletion_grace_period_seconds: int | None = field(
        default=None, name="deletionGracePeriodSeconds"
    )
    _labels: dict[str, str] | None = field(default=None, name="labels")
    _annotations: dict[str, str] | None = field(default=None, name="annotations")
    _owner_references: tuple[dict[str, Any], ...] | None = field(
        default=None, name="ownerReferences"
    )
    _finalizers: tuple[str, ...] | None = field(default=None, name="finalizers")
    _managed_fields: Raw = field(default=_EMPTY, name="managedFields")
    # managedFields of metadata decoded from protobuf: its entries' encoded
    # fields (``ObjectMeta`` field 17), decoded when read.
    _protobuf_managed_fields: bytes | None = field(
        default=None, name="kubereflector.dev/protobuf-managedFields"
    )

    def __getitem__(self, key: str) -> Any:
        attribute = _META_ATTRIBUTES.get(key)
        if attribute is None:
            raise KeyError(key)
        value = getattr(self, attribute)
        if type(value) is Raw:
            if not value:
                if self._protobuf_managed_fields is None:
                    raise KeyError(key)
                return _freeze(_protobuf_managed_fields(self._protobuf_managed_fields))
            value = _decode(value)
        elif value is None:
            raise KeyError(key)
        return _freeze(value)

    def __iter__(self) -> Iterator[str]:
        for key, attribute in _META_ATTRIBUTES.items():
            if self._has(attribute):
                yield key

    def __contains__(self, key: object) -> bool:
        attribute = _META_ATTRIBUTES.get(key) if type(key) is str else None
        return attribute is not None and self._has(attribute)

    def _has(self, attribute: str) -> bool:
        value = getattr(self, attribute)
        if type(value) is Raw:
            return bool(value) or self._protobuf_managed_fields is not None
        return value is not None

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __eq__(self, other: object) -> bool:
        if type(other) is CompactMetadata:
            return self is other or self.to_dict() == other.to_dict()
        if isinstance(other, Mapping):
            return bool(self.to_dict() == _thaw(other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"CompactMetadata(namespace={self._namespace!r}, name={self._name!r}, "
            f"resourceVersion={self._resource_version!r})"
        )

    def _what(self) -> str:
        return f"the metadata of {_identity_text(self)}"

    def to_dict(self) -> dict[str, Any]:
        """A mutable deep copy, ``managedFields`` decoded."""
        protobuf = self._protobuf_managed_fields
        if protobuf is None:
            result: dict[str, Any] = _decode(_encode(self))
            return result
        result = _decode(_encode(msgspec.structs.replace(self, _protobuf_managed_fields=None)))
        result["managedFields"] = _protobuf_managed_fields(protobuf)
        return result


_META_ATTRIBUTES: Final = {
    name: attribute
    for name, attribute in zip(
        CompactMetadata.__struct_encode_fields__, CompactMetadata.__struct_fields__, strict=True
    )
    if attribute != "_protobuf_managed_fields"
}
"""JSON name -> attribute, in field order."""


def _protobuf_managed_fields(data: bytes) -> Any:
    """The ``managedFields`` of the encoded ``ObjectMeta`` fields ``data``."""
    from ..protobuf._decode import decode_message

    return decode_message(data, 0, len(data), _OBJECT_META, _MANAGED_FIELDS)["managedFields"]


_OBJECT_META: Final = "meta/v1.ObjectMeta"
_MANAGED_FIELDS: Final = frozenset({"managedFields"})


def _identity_text(meta: Any) -> str:
    if type(meta) is CompactMetadata:
        namespace, name = meta._namespace, meta._name
    elif isinstance(meta, Mapping):
        namespace, name = meta.get("namespace"), meta.get("name")
    else:
        namespace = name = None
    if name is None:
        return "a compact object"
    return f"{namespace}/{name}" if namespace else str(name)


# -- the object --------------------------------------------------------------------------


class CompactObject(
    _MappingMixin,
    Struct,
    gc=False,
    frozen=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
):
    """A Kubernetes object stored compactly: a read-only mapping over its JSON
    (see the module documentation). Build one with :func:`to_compact` or
    :func:`decode_compact`; informers in compact mode store nothing else.
    """

    _api_version: str | None = field(default=None, name="apiVersion")
    _kind: str | None = field(default=None, name="kind")
    _metadata: CompactMetadata | None = field(default=None, name="metadata")
    _spec: Raw = field(default=_EMPTY, name="spec")
    _status: Raw = field(default=_EMPTY, name="status")
    # Any other top-level field (a ConfigMap's data, a Role's rules, ...). Never
    # filled by the typed decode (its JSON name cannot occur in an object the
    # typed decode accepts), only by the generic one.
    _extra: dict[str, Raw] | None = field(default=None, name="kubereflector.dev/extra")
    # An object whose metadata has fields CompactMetadata does not know keeps it
    # as a plain dict (wrapped read-only when read).
    _plain_metadata: dict[str, Any] | None = field(default=None, name="kubereflector.dev/metadata")
    # An object listed in protobuf: the encoded fields of its message other than
    # metadata (``_spec``, ``_status`` and ``_extra`` stay empty), and the type
    # they decode as (a name from kubereflector.protobuf's table).
    _protobuf: bytes | None = field(default=None, name="kubereflector.dev/protobuf")
    _protobuf_type: str | None = field(default=None, name="kubereflector.dev/protobuf-type")

    def __getitem__(self, key: str) -> Any:
        if key == "metadata":
            meta = self._metadata
            if meta is not None:
                return meta
            if self._plain_metadata is not None:
                return ReadOnlyDict(self._plain_metadata)
            raise KeyError(key)
        if self._protobuf is not None:
            if key != "kind" and key != "apiVersion":
                part = self._protobuf_part(frozenset((key,)))
                if key not in part:
                    raise KeyError(key)
                return _freeze(part[key])
        elif key == "spec" or key == "status":
            raw = self._spec if key == "spec" else self._status
            if not raw:
                raise KeyError(key)
            return _freeze(_decode(raw))
        if key == "kind" or key == "apiVersion":
            value = self._kind if key == "kind" else self._api_version
            if value is None:
                raise KeyError(key)
            return value
        extra = self._extra
        if extra is not None and key in extra:
            return _freeze(_decode(extra[key]))
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        if self._api_version is not None:
            yield "apiVersion"
        if self._kind is not None:
            yield "kind"
        if self._metadata is not None or self._plain_metadata is not None:
            yield "metadata"
        if self._protobuf is not None:
            yield from self._protobuf_part()
            return
        if self._spec:
            yield "spec"
        if self._status:
            yield "status"
        if self._extra is not None:
            yield from self._extra

    def __contains__(self, key: object) -> bool:
        if key == "metadata":
            return self._metadata is not None or self._plain_metadata is not None
        if self._protobuf is not None:
            if key == "kind" or key == "apiVersion":
                return (self._kind if key == "kind" else self._api_version) is not None
            return type(key) is str and key in self._protobuf_part(frozenset((key,)))
        if key == "spec":
            return bool(self._spec)
        if key == "status":
            return bool(self._status)
        if key == "kind":
            return self._kind is not None
        if key == "apiVersion":
            return self._api_version is not None
        return self._extra is not None and key in self._extra

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __eq__(self, other: object) -> bool:
        if type(other) is CompactObject:
            return (
                self is other
                or self.to_json() == other.to_json()
                or (self.to_dict() == other.to_dict())
            )
        if isinstance(other, Mapping):
            return self.to_dict() == (other if type(other) is dict else _thaw(other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        meta = self._metadata if self._metadata is not None else self._plain_metadata
        get = meta.get if meta is not None else (lambda _key: None)
        return (
            f"CompactObject(kind={self._kind!r}, namespace={get('namespace')!r}, "
            f"name={get('name')!r}, resourceVersion={get('resourceVersion')!r})"
        )

    def _what(self) -> str:
        meta = self._metadata if self._metadata is not None else self._plain_metadata
        kind = f"{self._kind} " if self._kind else ""
        return f"{kind}{_identity_text(meta)}"

    @property
    def metadata(self) -> Mapping[str, Any] | None:
        """``self["metadata"]``, or ``None`` (the attribute official client models have)."""
        metadata: Mapping[str, Any] | None = self.get("metadata")
        return metadata

    @property
    def kind(self) -> str | None:
        """``self["kind"]``, or ``None``."""
        return self._kind

    @property
    def api_version(self) -> str | None:
        """``self["apiVersion"]``, or ``None``."""
        return self._api_version

    def _protobuf_part(self, keys: frozenset[str] | None = None) -> dict[str, Any]:
        """The top-level fields of an object listed in protobuf but its metadata
        (only ``keys`` of them if given), decoded."""
        from ..protobuf._decode import decode_message

        data = self._protobuf
        assert data is not None
        assert self._protobuf_type is not None
        only = keys if keys is not None else _rest_of(self._protobuf_type)
        part: dict[str, Any] = decode_message(data, 0, len(data), self._protobuf_type, only)
        part.pop("metadata", None)
        return part

    def to_json(self) -> bytes:
        """The object as JSON (its raw parts as they came from the server; an
        object listed in protobuf as the server's JSON would give it)."""
        if self._protobuf is not None:
            return _encode(self.to_dict())
        if self._extra is None and self._plain_metadata is None:
            return _encode(self)
        fields: dict[str, Any] = {}
        if self._api_version is not None:
            fields["apiVersion"] = self._api_version
        if self._kind is not None:
            fields["kind"] = self._kind
        if self._metadata is not None:
            fields["metadata"] = self._metadata
        elif self._plain_metadata is not None:
            fields["metadata"] = self._plain_metadata
        if self._spec:
            fields["spec"] = self._spec
        if self._status:
            fields["status"] = self._status
        if self._extra is not None:
            fields.update(self._extra)
        return _encode(fields)

    def to_dict(self) -> dict[str, Any]:
        """A mutable deep copy: the whole object decoded, as ``object_mode="dict"``
        would have stored it."""
        if self._protobuf is None:
            result: dict[str, Any] = _decode(self.to_json())
            return result
        result = {}
        if self._api_version is not None:
            result["apiVersion"] = self._api_version
        if self._kind is not None:
            result["kind"] = self._kind
        if self._metadata is not None:
            result["metadata"] = self._metadata.to_dict()
        result.update(self._protobuf_part())
        return result

    def without_managed_fields(self) -> CompactObject:
        """This object without ``metadata.managedFields`` (itself if it has none)."""
        meta = self._metadata
        if meta is not None:
            if not meta._managed_fields and meta._protobuf_managed_fields is None:
                return self
            return msgspec.structs.replace(
                self,
                _metadata=msgspec.structs.replace(
                    meta, _managed_fields=_EMPTY, _protobuf_managed_fields=None
                ),
            )
        plain = self._plain_metadata
        if plain is None or "managedFields" not in plain:
            return self
        stripped = {k: v for k, v in plain.items() if k != "managedFields"}
        return msgspec.structs.replace(self, _plain_metadata=stripped)


for _cls in (CompactObject, CompactMetadata):
    Mapping.register(_cls)


@functools.cache
def _rest_of(type_name: str) -> frozenset[str]:
    """The JSON keys of ``type_name``'s fields but ``metadata`` (inline ones as "")."""
    from ..protobuf._schema import message

    return frozenset(f.name for f in message(type_name).fields if f.name != "metadata")


def _compact_identity(obj: CompactObject) -> tuple[str | None, Any]:
    """``(namespace, name)`` of a compact object (the key functions' fast path)."""
    meta = obj._metadata
    if meta is not None:
        return meta._namespace, meta._name
    plain = obj._plain_metadata
    if plain is not None:
        return plain.get("namespace"), plain.get("name")
    return None, None


def _compact_resource_version(meta: CompactMetadata) -> str | None:
    """``meta["resourceVersion"]`` without the mapping protocol (a fast path)."""
    return meta._resource_version


# -- decoding ------------------------------------------------------------------------------


_TYPED: Final = msgspec.json.Decoder(CompactObject)
_FIELDS: Final = msgspec.json.Decoder(dict[str, Raw])
_METADATA: Final = msgspec.json.Decoder(CompactMetadata)
_STRING: Final = msgspec.json.Decoder(str)
_intern: Final = sys.intern


def _detach(obj: CompactObject, kind: str | None = None, api_version: str | None = None) -> None:
    """Finish a freshly decoded object in place: copy its raw parts out of the
    buffer they were decoded from (which they would otherwise keep alive),
    intern ``kind``/``apiVersion``, and fill them from ``kind``/``api_version``
    (a list's item kind) when absent. For the decoders only: objects are
    immutable once handed out."""
    if obj._spec:
        force_setattr(obj, "_spec", obj._spec.copy())
    if obj._status:
        force_setattr(obj, "_status", obj._status.copy())
    meta = obj._metadata
    if meta is not None and meta._managed_fields:
        force_setattr(meta, "_managed_fields", meta._managed_fields.copy())
    value = obj._kind
    if value is not None:
        force_setattr(obj, "_kind", _intern(value))
    elif kind is not None:
        force_setattr(obj, "_kind", kind)
    value = obj._api_version
    if value is not None:
        force_setattr(obj, "_api_version", _intern(value))
    elif api_version is not None:
        force_setattr(obj, "_api_version", api_version)


def _decode_generic(
    data: Any, kind: str | None = None, api_version: str | None = None
) -> CompactObject:
    """A compact object from the JSON of any object (``data``: bytes or a Raw),
    detached (see :func:`_detach` for ``kind`` and ``api_version``). Raises
    ``msgspec.DecodeError`` for what is not a JSON object."""
    fields = _FIELDS.decode(data)
    meta_raw = fields.pop("metadata", None)
    meta: CompactMetadata | None = None
    plain_meta: dict[str, Any] | None = None
    if meta_raw is not None:
        try:
            meta = _METADATA.decode(meta_raw)
        except msgspec.ValidationError:
            decoded = _decode(meta_raw)
            if type(decoded) is dict:
                plain_meta = decoded
            else:  # not an object: keep it as it came
                fields["metadata"] = meta_raw
    strings = {}
    for name in ("apiVersion", "kind"):
        raw = fields.get(name)
        if raw is not None:
            try:
                strings[name] = _STRING.decode(raw)
            except msgspec.ValidationError:
                continue  # not a string: stays a raw field
            del fields[name]
    spec = fields.pop("spec", _EMPTY)
    status = fields.pop("status", _EMPTY)
    obj = CompactObject(
        _api_version=strings.get("apiVersion"),
        _kind=strings.get("kind"),
        _metadata=meta,
        _spec=spec,
        _status=status,
        _extra={k: v.copy() for k, v in fields.items()} or None,
        _plain_metadata=plain_meta,
    )
    _detach(obj, kind, api_version)
    return obj


def decode_compact(data: Any) -> CompactObject:
    """A compact object from the JSON of one Kubernetes object (bytes, a
    bytearray, a memoryview or a ``msgspec.Raw``).

    Raises ``msgspec.DecodeError`` for malformed JSON or JSON that is not an
    object."""
    try:
        obj = _TYPED.decode(data)
    except msgspec.ValidationError:
        return _decode_generic(data)
    _detach(obj)
    return obj


def to_compact(obj: Any) -> Any:
    """``obj`` as a :class:`CompactObject`.

    A compact object is returned as it is; a JSON-shaped mapping (a decoded
    dict, a :class:`ReadOnlyDict`) is encoded and decoded compactly; JSON bytes
    are decoded. Anything else (a
    :class:`~kubereflector.DeletedFinalStateUnknown`, an official client model)
    is returned unchanged. Raises ``TypeError`` for a mapping that is not
    JSON-serializable.
    """
    kind = type(obj)
    if kind is CompactObject:
        return obj
    if kind is dict or isinstance(obj, Mapping):
        try:
            data = _encode(obj if kind is dict else _thaw(obj))
        except (TypeError, msgspec.EncodeError) as err:
            raise TypeError(f"cannot store this object compactly: {err}") from err
        return decode_compact(data)
    if kind is bytes or kind is bytearray or kind is memoryview:
        return decode_compact(obj)
    return obj


# -- informers ----------------------------------------------------------------------------

_log = logging.getLogger("kubereflector.compact")


def _compact_transform(transform: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """The queue transform of an informer in compact mode: each object becomes
    compact (one a ListerWatcher decoded compactly passes through), then
    ``transform`` (if any) runs on it and what it returns is made compact too.

    A ``transform`` that writes to its input (raising
    :class:`ReadOnlyObjectError` on a compact object) gets a decoded copy
    instead, every time: it still works, at the cost of a decode and an
    encode per object (logged once, as a warning: return a new object instead).
    """
    if transform is None:
        return to_compact
    warned = False

    def compact_then_transform(obj: Any) -> Any:
        nonlocal warned
        obj = to_compact(obj)
        try:
            result = transform(obj)
        except ReadOnlyObjectError:
            if type(obj) is not CompactObject:
                raise
            if not warned:
                warned = True
                _log.warning(
                    "transform %s writes to the objects it gets: in compact mode it gets a "
                    "decoded copy of each (slower); return a new object instead",
                    getattr(transform, "__qualname__", type(transform).__name__),
                )
            result = transform(obj.to_dict())
        return to_compact(result)

    return compact_then_transform


def _check_object_mode(object_mode: str) -> ObjectMode:
    """``object_mode`` if it is one (raises ``ValueError`` naming it otherwise)."""
    if object_mode not in _OBJECT_MODES:
        raise ValueError(
            f"object_mode must be 'dict', 'compact' or 'compact-protobuf' (got {object_mode!r})"
        )
    return object_mode  # type: ignore[return-value]
