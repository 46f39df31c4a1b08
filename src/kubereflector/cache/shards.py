"""Shard selectors of KEP-5866: which objects one shard of a list or watch holds.

An API server with sharded list and watch (Kubernetes 1.36+, feature gate
``ShardedListAndWatch``) hashes a metadata field of every object with 64-bit
FNV-1a and sends only the objects whose hash lies in one of the ranges a
request names::

    ?shardSelector=shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')

Ranges are half-open (``start <= hash < end``); bounds are ``0x`` and exactly 16
lowercase hex digits, and an end may be ``'0x10000000000000000'`` (2^64, the end
of the hash space); ``||`` joins ranges over the same field
(``object.metadata.uid`` or ``object.metadata.namespace``). A list the server
filtered says so in ``metadata.shardInfo.selector``; a server without the
feature ignores the parameter and sends everything, which is why a client must
be able to apply the same selector itself.

This module is that selector, pure: :func:`fnv1a_64`, :class:`ShardRange`,
:class:`ShardSelector` (:meth:`~ShardSelector.parse` accepts what
``k8s.io/apiserver/pkg/sharding.Parse`` accepts, ``str()`` writes what
``k8s.io/apimachinery/pkg/sharding``'s ``String()`` writes, and
:meth:`~ShardSelector.matches` decides as its ``Matches`` does). The emulator
serves it, a client filters with it against older servers, and
:mod:`kubereflector.runtime.sharding` splits the hash space with it.

Everything here is immutable and thread-safe.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, NoReturn

from .compact import CompactObject
from .keys import get_metadata

__all__ = [
    "HASH_SPACE",
    "NAMESPACE_FIELD",
    "UID_FIELD",
    "ShardField",
    "ShardRange",
    "ShardSelector",
    "ShardSelectorError",
    "fnv1a_64",
]

HASH_SPACE: Final = 1 << 64
"""The number of hash values (the exclusive end of the last range)."""

UID_FIELD: Final = "object.metadata.uid"
"""The field path that shards by object (the default of every sharded controller)."""
NAMESPACE_FIELD: Final = "object.metadata.namespace"
"""The field path that shards by namespace (every object of a namespace in one shard)."""

ShardField = Literal["object.metadata.uid", "object.metadata.namespace"]
"""The fields KEP-5866 can hash."""

_FIELDS: Final = (UID_FIELD, NAMESPACE_FIELD)
_OFFSET: Final = 0xCBF29CE484222325
_PRIME: Final = 0x100000001B3
_MASK: Final = HASH_SPACE - 1
_END_OF_SPACE: Final = "0x10000000000000000"
_HASH_CACHE: Final = 1 << 17


class ShardSelectorError(ValueError):
    """A shard selector that does not parse or is not valid; the message says where
    and why (as kube-apiserver's answer would)."""


@functools.lru_cache(maxsize=_HASH_CACHE)
def fnv1a_64(value: str) -> int:
    """The 64-bit FNV-1a hash of ``value``'s UTF-8 bytes (Go's ``hash/fnv.New64a``).

    Remembers the last 131,072 values it hashed (an object's uid is hashed again at
    each of its events): about 0.2 µs then, against several µs for a new one.
    """
    h = _OFFSET
    for byte in value.encode():
        h = ((h ^ byte) * _PRIME) & _MASK
    return h


def _field_of(obj: Any, by_uid: bool) -> str | None:
    """``metadata.uid`` (``by_uid``) or ``metadata.namespace`` of any object."""
    meta = get_metadata(obj)
    if meta is None:
        return None
    if isinstance(meta, Mapping):
        value = meta.get("uid" if by_uid else "namespace")
    else:
        value = getattr(meta, "uid" if by_uid else "namespace", None)
    return value if isinstance(value, str) else None


def _hex(bound: int) -> str:
    return _END_OF_SPACE if bound == HASH_SPACE else f"0x{bound:016x}"


@dataclass(frozen=True, slots=True, order=True)
class ShardRange:
    """The hashes ``start <= hash < end`` (``0 <= start < end <= 2**64``).

    Raises :class:`ShardSelectorError` for bounds out of that order or space.
    """

    start: int
    end: int

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ShardSelectorError(f"a shard range's {name} is an int, not {value!r}")
        if not 0 <= self.start < self.end <= HASH_SPACE:
            raise ShardSelectorError(
                f"shard range start {_hex(self.start) if self.start >= 0 else self.start} "
                f"must be less than end {_hex(self.end) if self.end >= 0 else self.end}, "
                "both within 0x0000000000000000..0x10000000000000000"
            )

    def __contains__(self, hash_value: object) -> bool:
        return isinstance(hash_value, int) and self.start <= hash_value < self.end

    def size(self) -> int:
        """How many hash values the range holds."""
        return self.end - self.start

    def text(self, field: str = UID_FIELD) -> str:
        """``shardRange(field, 'start', 'end')`` as the API server writes it."""
        return f"shardRange({field}, '{_hex(self.start)}', '{_hex(self.end)}')"


def _merged(ranges: Iterable[ShardRange]) -> tuple[ShardRange, ...]:
    out: list[ShardRange] = []
    for r in sorted(ranges):
        if out and r.start <= out[-1].end:
            if r.end > out[-1].end:
                out[-1] = ShardRange(out[-1].start, r.end)
        else:
            out.append(r)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ShardSelector:
    """Objects whose ``field`` hashes (:func:`fnv1a_64`) into one of ``ranges``.

    ``str(selector)`` is the ``shardSelector`` query parameter, written as the API
    server writes it (and echoes in ``shardInfo``); :meth:`parse` reads it back.
    Equal selectors select the same objects only if written the same way:
    :meth:`covering` merges adjacent ranges, so selectors built from the same
    hash space compare equal. Raises :class:`ShardSelectorError` for an unknown
    field, no ranges, or something other than :class:`ShardRange` s.
    """

    field: ShardField
    ranges: tuple[ShardRange, ...]

    def __post_init__(self) -> None:
        if self.field not in _FIELDS:
            raise ShardSelectorError(
                f"unsupported field path {self.field!r}; supported: {', '.join(_FIELDS)}"
            )
        if not isinstance(self.ranges, tuple) or not self.ranges:
            raise ShardSelectorError("a shard selector needs at least one range (a tuple)")
        for r in self.ranges:
            if not isinstance(r, ShardRange):
                raise ShardSelectorError(f"shard ranges are ShardRange, not {type(r).__name__}")

    @classmethod
    def covering(cls, ranges: Iterable[ShardRange], field: ShardField = UID_FIELD) -> ShardSelector:
        """The selector of ``ranges`` merged (sorted, adjacent and overlapping ones
        joined): the shortest way to write them. Raises :class:`ShardSelectorError`
        when there are none."""
        return cls(field, _merged(ranges))

    @classmethod
    def even(cls, index: int, total: int, field: ShardField = UID_FIELD) -> ShardSelector:
        """Shard ``index`` of ``total`` equal parts of the hash space (apimachinery's
        ``NewShardRangeSelector``): ``[index * 2^64 // total, (index + 1) * 2^64 // total)``.
        Raises :class:`ShardSelectorError` unless ``0 <= index < total``."""
        if isinstance(total, bool) or not isinstance(total, int) or total < 1:
            raise ShardSelectorError(f"total must be an int >= 1, not {total!r}")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < total:
            raise ShardSelectorError(f"index must be an int in [0, {total}), not {index!r}")
        start = index * HASH_SPACE // total
        end = (index + 1) * HASH_SPACE // total
        return cls(field, (ShardRange(start, end),))

    @classmethod
    def parse(cls, text: str) -> ShardSelector:
        """The selector ``text`` writes (the ``shardSelector`` parameter's syntax: see
        the module documentation). Raises :class:`ShardSelectorError` naming what is
        wrong, for what kube-apiserver refuses: an empty selector, a function other
        than ``shardRange``, an operator other than ``||``, bounds without ``0x`` or
        not 16 lowercase hex digits, a start not below its end, ranges over two
        fields."""
        if not isinstance(text, str):
            raise ShardSelectorError(f"a shard selector is a str, not {type(text).__name__}")
        return _Parser(text).parse()

    def matches(self, obj: Any) -> bool:
        """Whether ``obj`` (a dict, a compact object, or an object with ``metadata``)
        is in this shard. An object without the field hashes its absence as ``""``,
        as the API server does. Quick for dicts and compact objects (a client-side
        filter calls it for every event)."""
        by_uid = self.field == UID_FIELD
        kind = type(obj)
        if kind is dict:
            meta = obj.get("metadata")
            value = meta.get("uid" if by_uid else "namespace") if type(meta) is dict else None
        elif kind is CompactObject:
            compact = obj._metadata
            if compact is not None:
                value = compact._uid if by_uid else compact._namespace
            else:
                value = _field_of(obj, by_uid)
        else:
            value = _field_of(obj, by_uid)
        hash_value = fnv1a_64(value or "")
        for r in self.ranges:  # noqa: SIM110 (a loop: quicker than any() on this path)
            if r.start <= hash_value < r.end:
                return True
        return False

    def matches_hash(self, hash_value: int) -> bool:
        """Whether ``hash_value`` lies in one of the ranges."""
        for r in self.ranges:  # noqa: SIM110 (a loop: quicker than any() on this path)
            if r.start <= hash_value < r.end:
                return True
        return False

    def size(self) -> int:
        """How many hash values the selector holds (ranges may overlap: counted once)."""
        return sum(r.size() for r in _merged(self.ranges))

    def __str__(self) -> str:
        return " || ".join(r.text(self.field) for r in self.ranges)


# -- the parser: a CEL subset, as k8s.io/apiserver/pkg/sharding reads it ---------------------

_TOKEN: Final = re.compile(
    r"""\s*(?:
        (?P<or>\|\|)
      | (?P<and>&&)
      | (?P<punct>[(),.])
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<string>'[^'\\\n]*'|"[^"\\\n]*")
      | (?P<other>\S+?)
    )""",
    re.VERBOSE,
)
_HEX_DIGITS: Final = frozenset("0123456789abcdef")


class _Parser:
    """``expr := term ('||' term)*``; ``term := call | '(' expr ')'``;
    ``call := 'shardRange' '(' path ',' string ',' string ')'``."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens: list[tuple[str, str, int]] = []
        for match in _TOKEN.finditer(text):
            kind = match.lastgroup
            if kind is None:  # trailing blanks
                continue
            self._tokens.append((kind, match.group(kind), match.start(kind)))
        self._at = 0

    def parse(self) -> ShardSelector:
        if not self._tokens:
            raise ShardSelectorError(
                "empty shard selector is not allowed; omit the parameter for unfiltered lists"
            )
        ranges = self._expr()
        if self._at < len(self._tokens):
            self._fail("'||' or the end")
        field = ranges[0][0]
        for other, _ in ranges:
            if other != field:
                raise ShardSelectorError(
                    f"all shard ranges must use the same field, got {field!r} and {other!r}"
                )
        return ShardSelector(field, tuple(r for _, r in ranges))  # type: ignore[arg-type]

    def _peek(self) -> tuple[str, str, int]:
        if self._at < len(self._tokens):
            return self._tokens[self._at]
        return ("end", "", len(self._text))

    def _fail(self, expected: str) -> NoReturn:
        kind, value, pos = self._peek()
        if kind == "and":
            raise ShardSelectorError(
                f"unsupported operator '&&' at position {pos}; only shardRange() and || are allowed"
            )
        found = "the end" if kind == "end" else repr(value)
        raise ShardSelectorError(f"expected {expected} at position {pos}, found {found}")

    def _take(self, kind: str, value: str | None = None, expected: str = "") -> str:
        got_kind, got, _ = self._peek()
        if got_kind != kind or (value is not None and got != value):
            self._fail(expected or repr(value or kind))
        self._at += 1
        return got

    def _expr(self) -> list[tuple[str, ShardRange]]:
        ranges = self._term()
        while self._peek()[0] == "or":
            self._at += 1
            ranges += self._term()
        return ranges

    def _term(self) -> list[tuple[str, ShardRange]]:
        kind, value, pos = self._peek()
        if kind == "punct" and value == "(":
            self._at += 1
            ranges = self._expr()
            self._take("punct", ")")
            return ranges
        if kind != "ident":
            self._fail("shardRange(...)")
        if value != "shardRange":
            raise ShardSelectorError(
                f"unsupported function {value!r} at position {pos}; "
                "only shardRange() and || are allowed"
            )
        self._at += 1
        self._take("punct", "(")
        path = self._path()
        self._take("punct", ",")
        start = self._bound("hexStart")
        self._take("punct", ",")
        end = self._bound("hexEnd")
        if self._peek() != ("end", "", len(self._text)) and self._peek()[1] == ",":
            raise ShardSelectorError("shardRange() requires exactly 3 arguments")
        self._take("punct", ")")
        if path not in _FIELDS:
            raise ShardSelectorError(
                f"unsupported field path {path!r}; supported: {', '.join(_FIELDS)}"
            )
        if not start < end:
            raise ShardSelectorError(
                f"shard range start {_hex(start)} must be less than end {_hex(end)}"
            )
        return [(path, ShardRange(start, end))]

    def _path(self) -> str:
        parts = [self._take("ident", expected="a field path (e.g. object.metadata.uid)")]
        while self._peek()[:2] == ("punct", "."):
            self._at += 1
            parts.append(self._take("ident", expected="a field name"))
        return ".".join(parts)

    def _bound(self, name: str) -> int:
        kind, literal, pos = self._peek()
        if kind != "string":
            raise ShardSelectorError(
                f"{name} must be a string literal (e.g. '0x8000000000000000') at position {pos}"
            )
        self._at += 1
        text = literal[1:-1]
        if not text.startswith("0x"):
            raise ShardSelectorError(f"{name} must have '0x' prefix, got {text!r}")
        digits = text[2:]
        if not digits:
            raise ShardSelectorError(f"{name}: hex value is required after '0x'")
        if len(digits) > 17:
            raise ShardSelectorError(
                f"{name}: hex value too long ({len(digits)} chars, max 17): {digits!r}"
            )
        bad = next((c for c in digits if c not in _HEX_DIGITS), None)
        if bad is not None:
            raise ShardSelectorError(f"{name}: invalid hex character {bad!r} in {text!r}")
        if len(digits) == 17:
            if text != _END_OF_SPACE:
                raise ShardSelectorError(
                    f"{name}: 17-digit hex value must be {_END_OF_SPACE!r} (2^64), got {text!r}"
                )
        elif len(digits) != 16:
            raise ShardSelectorError(
                f"{name} must be a 0x-prefixed 16-digit hex value, got {text!r} "
                f"(did you mean '0x{digits.rjust(16, '0')}'?)"
            )
        return int(digits, 16)


def _same_selector(a: str | None, b: str | None) -> bool:
    """Whether two ``shardSelector`` strings name the same ranges of the same field,
    however spaced (``False`` when either is ``None`` or does not parse)."""
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    if a == b:
        return True
    try:
        return ShardSelector.parse(a) == ShardSelector.parse(b)
    except ShardSelectorError:
        return False
