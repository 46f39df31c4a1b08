"""Label and field selectors in Kubernetes' syntax: parsed once, matched fast.

One parser for the whole package (the emulator's list and watch filters, the
informers' listers, yours). The grammar and the semantics are those of
``k8s.io/apimachinery/pkg/labels`` and ``.../fields``:

* :class:`LabelSelector` -- ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
  ``a notin (x)``, ``a`` (exists), ``!a`` (does not exist), ``a>1``/``a<1``
  (integer comparisons, as kube accepts them); requirements separated by commas
  are ANDed; whitespace between tokens is ignored. Keys may carry a DNS prefix
  (``app.kubernetes.io/name``); keys and values are validated as kube validates
  them (syntax and length).
* :class:`FieldSelector` -- ``path=value``, ``path==value``, ``path!=value`` on
  dotted field paths (``metadata.name``, ``spec.nodeName``, ``status.phase``),
  with kube's escapes (``\\,``, ``\\=``, ``\\\\``) in values.

The empty string selects everything. A malformed selector raises ``ValueError``
naming the offending part. Selectors are immutable, hashable and thread-safe;
``str()`` gives a canonical form that parses back to an equal selector
(requirements sorted, ``==`` written ``=``, set values sorted).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelRequirement",
    "LabelSelector",
    "label_selector_from_dict",
]

LabelOperator = Literal["=", "!=", "in", "notin", "exists", "!", "gt", "lt"]
FieldOperator = Literal["=", "!="]

_LABEL_OPERATORS: Final = frozenset({"=", "!=", "in", "notin", "exists", "!", "gt", "lt"})
_OPERATOR_ORDER: Final = {op: i for i, op in enumerate(("=", "!=", "in", "notin", "gt", "lt"))}
_OPERATOR_ORDER.update({"exists": 10, "!": 11})

# -- kube's label key and value syntax (k8s.io/apimachinery/pkg/util/validation) --------

_QUALIFIED_NAME_MAX: Final = 63
_PREFIX_MAX: Final = 253
_NAME_RE: Final = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(
    r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*\Z"
)
_NAME_SYNTAX: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character"
)


def _label_key_error(key: str) -> str | None:
    """Why ``key`` is not a valid label key (a qualified name), or ``None``."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return f"prefix part of key {key!r} must be non-empty"
        if len(prefix) > _PREFIX_MAX:
            return f"prefix part of key {key!r} must be no more than {_PREFIX_MAX} characters"
        if "/" in prefix or not _DNS1123_SUBDOMAIN_RE.match(prefix):
            return (
                f"prefix part of key {key!r} must be a lowercase DNS-1123 subdomain "
                "(e.g. 'example.com')"
            )
    if not name:
        return f"name part of key {key!r} must be non-empty"
    if len(name) > _QUALIFIED_NAME_MAX:
        return f"name part of key {key!r} must be no more than {_QUALIFIED_NAME_MAX} characters"
    if not _NAME_RE.match(name):
        return f"name part of key {key!r} {_NAME_SYNTAX}"
    return None


def _label_value_error(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or ``None`` (the empty value is valid)."""
    if not value:
        return None
    if len(value) > _QUALIFIED_NAME_MAX:
        return f"value {value!r} must be no more than {_QUALIFIED_NAME_MAX} characters"
    if not _NAME_RE.match(value):
        return f"value {value!r} {_NAME_SYNTAX}"
    return None


def _parse_int(text: str) -> int | None:
    try:
        return int(text, 10) if text.strip() == text else None
    except ValueError:
        return None


# -- requirements --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One requirement of a :class:`LabelSelector`: ``key``, ``operator``, ``values``.

    ``operator`` is one of ``"="`` (``"=="`` is accepted and normalised to it),
    ``"!="``, ``"in"``, ``"notin"``, ``"exists"``, ``"!"`` (does not exist),
    ``"gt"``, ``"lt"``. ``values`` is stored sorted and deduplicated. Raises
    ``ValueError`` when the key, the values or their count are invalid for the
    operator (kube's ``labels.NewRequirement`` rules).
    """

    key: str
    operator: LabelOperator
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        operator = cast(str, self.operator)
        if operator == "==":
            object.__setattr__(self, "operator", "=")
            operator = "="
        if operator not in _LABEL_OPERATORS:
            raise ValueError(f"{operator!r} is not a valid label selector operator")
        if isinstance(self.values, str):
            raise TypeError("values must be a sequence of strings, not a string")
        values = tuple(sorted(set(self.values)))
        object.__setattr__(self, "values", values)
        error = _label_key_error(self.key)
        if error:
            raise ValueError(error)
        if operator in ("in", "notin"):
            if not values:
                raise ValueError(
                    f"for 'in', 'notin' operators, values set can't be empty: {self.key}"
                )
        elif operator in ("=", "!="):
            if len(values) != 1:
                raise ValueError(f"exact-match compatibility requires one single value: {self.key}")
        elif operator in ("exists", "!"):
            if values:
                raise ValueError(
                    f"values set must be empty for exists and does not exist: {self.key}"
                )
        elif len(values) != 1 or _parse_int(values[0]) is None:
            raise ValueError(
                f"for 'gt', 'lt' operators, exactly one integer value is required: {self.key}"
            )
        if operator not in ("gt", "lt"):
            for value in values:
                error = _label_value_error(value)
                if error:
                    raise ValueError(f"invalid label value for key {self.key!r}: {error}")

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        return _check(labels, self.key, *_compile(self))

    def __str__(self) -> str:
        op = self.operator
        if op == "exists":
            return self.key
        if op == "!":
            return f"!{self.key}"
        if op in ("in", "notin"):
            return f"{self.key} {op} ({','.join(self.values)})"
        symbol = {"=": "=", "!=": "!=", "gt": ">", "lt": "<"}[op]
        return f"{self.key}{symbol}{self.values[0]}"


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """One term of a :class:`FieldSelector`: ``field`` (a dotted path), ``operator``
    (``"="``; ``"=="`` is normalised to it; or ``"!="``) and ``value``."""

    field: str
    operator: FieldOperator
    value: str

    def __post_init__(self) -> None:
        operator = cast(str, self.operator)
        if operator == "==":
            object.__setattr__(self, "operator", "=")
        elif operator not in ("=", "!="):
            raise ValueError(f"{operator!r} is not a valid field selector operator")
        if not self.field:
            raise ValueError("a field selector term needs a field name")
        # Such a name could not be written back: "a!" + "=" reads as "a" + "!=",
        # a backslash would escape the operator, "=" and "," split the term.
        field = self.field
        if field.endswith("!") or any(c in field for c in "\\=,") or field != field.strip():
            raise ValueError(
                f"invalid field name {field!r}: a field name may not end with '!', hold "
                "'\\', '=' or ',', or start or end with whitespace"
            )

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{_escape_field_value(self.value)}"


# Precompiled checks: (opcode, argument). Plain tuples and a single dispatch
# function keep ``matches`` a tight loop over a few locals.
_EQ, _NE, _IN, _NOTIN, _EXISTS, _NOT_EXISTS, _GT, _LT = range(8)


def _compile(req: LabelRequirement) -> tuple[int, Any]:
    op = req.operator
    if op == "=":
        return _EQ, req.values[0]
    if op == "!=":
        return _NE, req.values[0]
    if op == "in":
        return (_EQ, req.values[0]) if len(req.values) == 1 else (_IN, frozenset(req.values))
    if op == "notin":
        return (_NE, req.values[0]) if len(req.values) == 1 else (_NOTIN, frozenset(req.values))
    if op == "exists":
        return _EXISTS, None
    if op == "!":
        return _NOT_EXISTS, None
    return (_GT if op == "gt" else _LT), _parse_int(req.values[0])


def _check(labels: Mapping[str, str], key: str, code: int, arg: Any) -> bool:
    value = labels.get(key)
    if code == _EQ:
        return bool(value == arg)
    if code == _NE:
        return bool(value != arg)
    if code == _IN:
        return value is not None and value in arg
    if code == _NOTIN:
        return value is None or value not in arg
    if code == _EXISTS:
        return key in labels
    if code == _NOT_EXISTS:
        return key not in labels
    if value is None:
        return False
    number = _parse_int(value)
    if number is None:
        return False
    return bool(number > arg) if code == _GT else bool(number < arg)


# -- label selectors -------------------------------------------------------------------------


class LabelSelector:
    """An immutable, precompiled label selector.

    Build one with :meth:`parse` (kube's string syntax), :meth:`from_labels`
    (equality on each pair), :func:`label_selector_from_dict` (a
    ``metav1.LabelSelector``) or from :class:`LabelRequirement` objects. The
    empty selector matches everything. Equal selectors compare equal and hash
    alike whatever the order they were written in.
    """

    __slots__ = ("_checks", "_requirements", "_text")

    _requirements: tuple[LabelRequirement, ...]
    _checks: tuple[tuple[str, int, Any], ...]
    _text: str

    def __init__(self, requirements: Iterable[LabelRequirement] = ()) -> None:
        reqs = tuple(
            sorted(requirements, key=lambda r: (r.key, _OPERATOR_ORDER[r.operator], r.values))
        )
        for req in reqs:
            if not isinstance(req, LabelRequirement):
                raise TypeError(f"expected LabelRequirement, got {type(req).__name__}")
        object.__setattr__(self, "_requirements", reqs)
        object.__setattr__(self, "_checks", tuple((r.key, *_compile(r)) for r in reqs))
        object.__setattr__(self, "_text", ",".join(str(r) for r in reqs))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("LabelSelector is immutable")

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse kube's label selector syntax. Raises ``ValueError`` naming the bad part."""
        if not isinstance(text, str):
            raise TypeError(f"a label selector is a string, got {type(text).__name__}")
        if not text.strip():
            return _EVERYTHING_LABELS
        return cls(_LabelParser(text).parse())

    @classmethod
    def everything(cls) -> LabelSelector:
        """The selector that matches every object (the empty selector)."""
        return _EVERYTHING_LABELS

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> LabelSelector:
        """``k1=v1,k2=v2,...``: objects whose labels include all of ``labels``."""
        return cls(LabelRequirement(k, "=", (v,)) for k, v in labels.items())

    @property
    def requirements(self) -> tuple[LabelRequirement, ...]:
        """The requirements, in canonical order (all must hold)."""
        return self._requirements

    @property
    def empty(self) -> bool:
        """True for the selector that matches everything."""
        return not self._requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` (``None``: no labels) is selected."""
        if labels is None:
            labels = {}
        for key, code, arg in self._checks:
            if code == _EQ:
                if labels.get(key) != arg:
                    return False
            elif not _check(labels, key, code, arg):
                return False
        return True

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"LabelSelector.parse({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self._requirements == other._requirements

    def __hash__(self) -> int:
        return hash(self._requirements)

    def __reduce__(self) -> tuple[Any, ...]:
        return (LabelSelector.parse, (self._text,))


_EVERYTHING_LABELS: Final = LabelSelector()

# Lexer tokens.
_IDENT, _IN_TOK, _NOTIN_TOK, _BANG, _NEQ, _EQ_TOK, _DEQ, _GT_TOK, _LT_TOK = range(9)
_LPAREN, _RPAREN, _COMMA, _END = range(9, 13)
_SYMBOLS: Final = {
    "!=": _NEQ,
    "==": _DEQ,
    "!": _BANG,
    "=": _EQ_TOK,
    ">": _GT_TOK,
    "<": _LT_TOK,
    "(": _LPAREN,
    ")": _RPAREN,
    ",": _COMMA,
}
_SPECIAL_CHARS: Final = frozenset("!=<>(),")
_OPERATOR_TOKENS: Final = {
    _EQ_TOK: "=",
    _DEQ: "=",
    _NEQ: "!=",
    _IN_TOK: "in",
    _NOTIN_TOK: "notin",
    _GT_TOK: "gt",
    _LT_TOK: "lt",
}


def _lex(text: str) -> list[tuple[int, str, int]]:
    """Tokens ``(kind, literal, start)`` of a label selector, ending with ``_END``."""
    tokens: list[tuple[int, str, int]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in _SPECIAL_CHARS:
            two = text[i : i + 2]
            if two in ("!=", "=="):
                tokens.append((_SYMBOLS[two], two, i))
                i += 2
            else:
                tokens.append((_SYMBOLS[ch], ch, i))
                i += 1
            continue
        start = i
        while i < n and not text[i].isspace() and text[i] not in _SPECIAL_CHARS:
            i += 1
        word = text[start:i]
        kind = {"in": _IN_TOK, "notin": _NOTIN_TOK}.get(word, _IDENT)
        tokens.append((kind, word, start))
    tokens.append((_END, "", n))
    return tokens


class _LabelParser:
    """kube's ``labels.Parse`` grammar (selector.go), with errors that name the place."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _lex(text)
        self.pos = 0
        self.req_start = 0

    def fail(self, detail: str) -> ValueError:
        return ValueError(f'invalid label selector "{self.text}": {detail}')

    def peek(self, *, values: bool = False) -> tuple[int, str, int]:
        kind, lit, start = self.tokens[self.pos]
        if values and kind in (_IN_TOK, _NOTIN_TOK):
            kind = _IDENT  # in a value position, "in" and "notin" are plain words
        return kind, lit, start

    def take(self, *, values: bool = False) -> tuple[int, str, int]:
        token = self.peek(values=values)
        if token[0] != _END:
            self.pos += 1
        return token

    def so_far(self) -> str:
        """The current requirement's text up to the last token taken."""
        if self.pos == 0:
            return ""
        _, lit, start = self.tokens[self.pos - 1]
        return self.text[self.req_start : start + len(lit)].strip()

    def unexpected(self, token: tuple[int, str, int], expected: str) -> ValueError:
        kind, lit, start = token
        if kind == _END:
            after = self.so_far()
            where = f" after '{after}'" if after else ""
            return self.fail(f"missing {expected}{where}")
        return self.fail(f"unexpected '{lit}' at position {start}, expected {expected}")

    def parse(self) -> list[LabelRequirement]:
        requirements: list[LabelRequirement] = []
        while True:
            token = self.peek()
            if token[0] in (_IDENT, _BANG):
                requirements.append(self.requirement())
                after = self.take()
                if after[0] == _END:
                    return requirements
                if after[0] != _COMMA:
                    raise self.unexpected(after, "',' or the end of the selector")
                following = self.peek()
                if following[0] not in (_IDENT, _BANG):
                    raise self.unexpected(following, "a label key")
            elif token[0] == _END:
                return requirements
            else:
                raise self.unexpected(token, "'!' or a label key")

    def requirement(self) -> LabelRequirement:
        self.req_start = self.peek()[2]
        token = self.take()
        negated = token[0] == _BANG
        if negated:
            token = self.take(values=True)
        if token[0] != _IDENT:
            raise self.unexpected(token, "a label key")
        key = token[1]
        if negated or self.peek()[0] in (_END, _COMMA):
            if negated and self.peek()[0] not in (_END, _COMMA):
                raise self.unexpected(self.peek(), "',' or the end of the selector")
            return self._make(key, "!" if negated else "exists", ())
        op_token = self.take()
        operator = _OPERATOR_TOKENS.get(op_token[0])
        if operator is None:
            raise self.unexpected(op_token, "an operator (=, ==, !=, in, notin, >, <)")
        values = self.value_set() if operator in ("in", "notin") else self.exact_value()
        return self._make(key, operator, values)

    def _make(self, key: str, operator: str, values: Sequence[str]) -> LabelRequirement:
        try:
            return LabelRequirement(key, cast(LabelOperator, operator), tuple(values))
        except ValueError as exc:
            raise self.fail(f"{exc} (in '{self.so_far()}')") from None

    def exact_value(self) -> list[str]:
        token = self.peek(values=True)
        if token[0] in (_END, _COMMA):
            return [""]  # "a=" selects the empty value, as in kube
        token = self.take(values=True)
        if token[0] != _IDENT:
            raise self.unexpected(token, "a value")
        return [token[1]]

    def value_set(self) -> list[str]:
        token = self.take(values=True)
        if token[0] != _LPAREN:
            raise self.unexpected(token, "'('")
        values: list[str] = []
        expect_value = True
        while True:
            token = self.take(values=True)
            kind = token[0]
            if kind == _END:
                raise self.unexpected(token, "')'")
            if kind == _RPAREN:
                if expect_value:
                    values.append("")  # "()" and "(a,)" hold the empty value, as in kube
                return values
            if kind == _COMMA:
                if expect_value:
                    values.append("")
                expect_value = True
            elif kind == _IDENT and expect_value:
                values.append(token[1])
                expect_value = False
            else:
                raise self.unexpected(token, "',' or ')'" if not expect_value else "')'")


def label_selector_from_dict(
    match_labels: Mapping[str, str] | None = None,
    match_expressions: Iterable[Mapping[str, Any]] | None = None,
) -> LabelSelector:
    """The selector of a ``metav1.LabelSelector`` (``matchLabels`` and ``matchExpressions``).

    Expressions are mappings with ``key``, ``operator`` (``In``, ``NotIn``,
    ``Exists``, ``DoesNotExist``) and ``values``. No labels and no expressions
    select everything. Both usually come from an object (a Deployment's
    ``spec.selector``), so anything is checked: raises ``ValueError`` naming
    what is wrong for labels that are not strings, expressions that are not
    mappings, an unknown operator, keys and values that are not strings or
    do not fit the operator.
    """
    operators = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    if match_labels is not None and not isinstance(match_labels, Mapping):
        raise ValueError(f"matchLabels must be a mapping, not {type(match_labels).__name__}")
    if match_expressions is not None and (
        isinstance(match_expressions, str | bytes | Mapping)
        or not isinstance(match_expressions, Iterable)
    ):
        raise ValueError(f"matchExpressions must be a list, not {type(match_expressions).__name__}")
    requirements = []
    for key, value in (match_labels or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"matchLabels must map strings to strings, not {key!r}: {value!r}")
        requirements.append(LabelRequirement(key, "=", (value,)))
    for expr in match_expressions or ():
        if not isinstance(expr, Mapping):
            raise ValueError(f"a matchExpression must be a mapping, not {type(expr).__name__}")
        operator, key, values = expr.get("operator"), expr.get("key", ""), expr.get("values")
        if not isinstance(operator, str) or operator not in operators:
            raise ValueError(f"{operator!r} is not a valid label selector operator")
        if not isinstance(key, str):
            raise ValueError(f"a matchExpression's key must be a string, not {key!r}")
        if values is not None and (
            not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values)
        ):
            raise ValueError(f"the values of {key!r} must be a list of strings, not {values!r}")
        requirements.append(
            LabelRequirement(key, cast(Any, operators[operator]), tuple(values or ()))
        )
    return LabelSelector(requirements)


# -- field selectors -------------------------------------------------------------------------


def _escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            current.append(ch)
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _unescape_field_value(text: str, selector: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text) or text[i + 1] not in "\\,=":
                bad = text[i : i + 2]
                raise ValueError(
                    f'invalid field selector "{selector}": invalid escape sequence {bad!r} '
                    "(only \\\\, \\, and \\= are allowed)"
                )
            out.append(text[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise ValueError(
                f'invalid field selector "{selector}": unescaped {ch!r} in value {text!r}'
            )
        out.append(ch)
        i += 1
    return "".join(out)


def _split_field_term(term: str) -> tuple[str, str, str] | None:
    """``(field, operator, raw value)`` at the first unescaped operator, or ``None``."""
    i = 0
    while i < len(term):
        ch = term[i]
        if ch == "\\":
            i += 2
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
        i += 1
    return None


def _field_value(obj: Any, path: tuple[str, ...]) -> str:
    """The string form of ``obj`` at ``path`` as kube's field sets hold it ("" if unset)."""
    value = obj
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else getattr(value, part, None)
        if value is None:
            return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return ""


class FieldSelector:
    """An immutable field selector (kube's ``fields.Selector``).

    Terms are ANDed; a field that is absent from an object has the value ``""``
    (so ``spec.nodeName=`` selects unscheduled pods). Which fields a server
    accepts depends on the resource; this class accepts any dotted path.
    """

    __slots__ = ("_checks", "_requirements", "_text")

    _requirements: tuple[FieldRequirement, ...]
    _checks: tuple[tuple[str, tuple[str, ...], bool, str], ...]
    _text: str

    def __init__(self, requirements: Iterable[FieldRequirement] = ()) -> None:
        reqs = tuple(sorted(requirements, key=lambda r: (r.field, r.operator, r.value)))
        for req in reqs:
            if not isinstance(req, FieldRequirement):
                raise TypeError(f"expected FieldRequirement, got {type(req).__name__}")
        checks = tuple(
            (r.field, tuple(r.field.split(".")), r.operator == "=", r.value) for r in reqs
        )
        object.__setattr__(self, "_requirements", reqs)
        object.__setattr__(self, "_checks", checks)
        object.__setattr__(self, "_text", ",".join(str(r) for r in reqs))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("FieldSelector is immutable")

    @classmethod
    def parse(cls, text: str) -> FieldSelector:
        """Parse ``f1=v1,f2!=v2,...``. Raises ``ValueError`` naming the bad term."""
        if not isinstance(text, str):
            raise TypeError(f"a field selector is a string, got {type(text).__name__}")
        if not text.strip():
            return _EVERYTHING_FIELDS
        requirements = []
        for raw in _split_unescaped(text, ","):
            term = raw.strip()
            if not term:
                continue
            split = _split_field_term(term)
            if split is None:
                raise ValueError(
                    f'invalid field selector "{text}": cannot understand {term!r} '
                    "(expected field=value, field==value or field!=value)"
                )
            field, op, value = split
            field = field.strip()
            if not field:
                raise ValueError(f'invalid field selector "{text}": {term!r} has no field name')
            value = _unescape_field_value(value.strip(), text)
            requirements.append(FieldRequirement(field, cast(FieldOperator, op), value))
        return cls(requirements)

    @classmethod
    def everything(cls) -> FieldSelector:
        """The selector that matches every object (the empty selector)."""
        return _EVERYTHING_FIELDS

    @property
    def requirements(self) -> tuple[FieldRequirement, ...]:
        """The terms, in canonical order (all must hold)."""
        return self._requirements

    @property
    def empty(self) -> bool:
        """True for the selector that matches everything."""
        return not self._requirements

    @property
    def fields(self) -> frozenset[str]:
        """The field paths the selector reads."""
        return frozenset(r.field for r in self._requirements)

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether a set of field values (``{"metadata.name": "a", ...}``) is selected."""
        for field, _, equal, value in self._checks:
            if (fields.get(field, "") == value) != equal:
                return False
        return True

    def matches_object(self, obj: Any) -> bool:
        """Whether an object (a dict shaped like Kubernetes JSON, or an object with
        attributes of the JSON names) is selected, reading each dotted path from it."""
        for _, path, equal, value in self._checks:
            if (_field_value(obj, path) == value) != equal:
                return False
        return True

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"FieldSelector.parse({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self._requirements == other._requirements

    def __hash__(self) -> int:
        return hash(self._requirements)

    def __reduce__(self) -> tuple[Any, ...]:
        return (FieldSelector.parse, (self._text,))


_EVERYTHING_FIELDS: Final = FieldSelector()
