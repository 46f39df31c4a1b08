"""``x-kubernetes-validations``: the CEL rules of a CRD's structural schema, evaluated
as kube-apiserver 1.28 evaluates them, with cel-python (``celpy``, the ``emulator``
extra) and kube's CEL libraries written on top of it.

Private to :mod:`kubereflector.testing.apiserver`. Pure functions of an object, its
previous state and its CRD's ``openAPIV3Schema``; compiled programs are cached per
rule text (thread-safe: a program is immutable once built). cel-python is imported
on first use, so the emulator runs without it until a CRD has rules.

What follows kube (``apiextensions-apiserver/pkg/apiserver/schema/cel``):

* every rule of every schema node with a value is evaluated with ``self`` (the
  value, typed by its schema: objects, maps, lists, ``date-time`` strings as
  timestamps, ``duration`` strings as durations, ``byte`` strings as bytes; the root
  and embedded resources with ``apiVersion``, ``kind`` and ``metadata.name`` and
  ``generateName``; property names escaped as kube escapes them, ``__dash__``,
  ``__dot__``, ...), and ``oldSelf`` on updates where the old value correlates (map
  keys, the items of ``x-kubernetes-list-type: map`` lists by key); transition
  rules (those naming ``oldSelf``) only run then;
* a rule that is false adds the error kube adds: its ``message``, or its
  ``messageExpression`` evaluated, or ``failed rule: <rule>``; with its ``reason``
  (``FieldValueInvalid``, ``Forbidden``, ``Required``, ``Duplicate``) and at its
  ``fieldPath``. kube 1.28 keeps a rule's ``fieldPath`` for the rules after it on
  the same node (fixed in later releases): so does this;
* evaluation errors read as kube's (``no such key: max evaluating rule: ...``,
  ``'no such overload': call arguments did not match ...``).

Libraries: CEL's standard functions and macros (cel-python's), and kube 1.28's
libraries for CRD rules: the strings extension (``charAt``, ``indexOf``,
``lastIndexOf``, ``lowerAscii``, ``upperAscii``, ``replace``, ``split``,
``substring``, ``trim``, ``join``), lists (``isSorted``, ``sum``, ``min``, ``max``,
``indexOf``, ``lastIndexOf``), regex (``find``, ``findAll``) and URLs (``url``,
``isURL``, ``getScheme``, ``getHost``, ``getHostname``, ``getPort``,
``getEscapedPath``, ``getQuery``). Not done: kube's static type checking and cost
estimation when a CRD is created (a rule is only parsed there; a function no library
has fails the CRD as kube's compiler does), the runtime cost budget, and the
optional (``?.``) syntax and ``quantity`` library, which kube 1.28 does not allow in
new CRDs anyway. A rule that calls a function kube has and this does not is an error
naming the rule (:class:`UnsupportedRule`), never a silent pass.
"""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ._gofmt import GoSyntax, go_quote
from ._statuses import FieldError

__all__ = ["RuleError", "UnsupportedRule", "cel_errors", "compile_errors", "has_rules"]

_RESERVED: Final = frozenset(
    {
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    }
)
_IDENTIFIER: Final = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*\Z")
_MACROS: Final = frozenset({"has", "all", "exists", "exists_one", "map", "filter", "size"})
_KUBE_ONLY: Final = frozenset({"quantity", "isQuantity", "authorizer", "optional"})
"""Functions kube has (in later releases, or for other APIs) that this does not."""


class RuleError(Exception):
    """A rule that cannot be compiled (its text and why)."""


class UnsupportedRule(Exception):
    """A rule kube would evaluate that this emulator cannot (it names the rule and why)."""


def _celpy() -> Any:
    try:
        import celpy
    except ImportError:  # pragma: no cover - the emulator extra installs it
        raise UnsupportedRule(
            "x-kubernetes-validations rules need cel-python: install the emulator extra "
            "(pip install 'kubereflector[emulator]')"
        ) from None
    return celpy


# -- compiling --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Program:
    rule: str
    runner: Any  # celpy.Runner
    transition: bool


def _function_names(tree: Any) -> Iterator[str]:
    """The functions a parsed rule calls (``f(x)``, ``x.f(y)``)."""
    for node in tree.iter_subtrees():
        if node.data == "ident_arg" and node.children:
            yield str(node.children[0])
        elif node.data == "member_dot_arg" and len(node.children) > 1:
            yield str(node.children[1])


@functools.lru_cache(maxsize=1024)
def _compile(rule: str) -> _Program:
    env = _environment()
    try:
        tree = env.compile(rule)
    except Exception as exc:  # celpy's CELParseError and lark's errors
        line, column = getattr(exc, "line", 1) or 1, getattr(exc, "column", 1) or 1
        raise RuleError(
            f"compilation failed: ERROR: <input>:{line}:{column}: Syntax error: "
            f"{_first_line(exc)}\n | {rule}\n | {'.' * (int(column) - 1)}^"
        ) from None
    known = _known_functions()
    for name in _function_names(tree):
        if name in known:
            continue
        if name in _KUBE_ONLY:
            raise UnsupportedRule(
                f"rule {rule!r} calls {name}(), which the emulator's CEL library "
                "(cel-python with kube's 1.28 libraries) does not have"
            )
        column = rule.find(name) + len(name)  # cel-go points at the call's '('
        raise RuleError(
            f"compilation failed: ERROR: <input>:1:{column + 1}: undeclared reference to "
            f"'{name}' (in container '')\n | {rule}\n | {'.' * column}^"
        )
    transition = "oldSelf" in {
        str(token) for token in tree.scan_values(lambda t: getattr(t, "type", "") == "IDENT")
    }
    runner = env.program(tree, functions=_library())
    return _Program(rule, runner, transition)


def _first_line(exc: Exception) -> str:
    text = str(exc.args[0] if exc.args else exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    return _celpy().Environment()


@functools.lru_cache(maxsize=1)
def _known_functions() -> frozenset[str]:
    from celpy.evaluation import base_functions

    return frozenset(base_functions) | frozenset(_library()) | _MACROS


def _go_rule(rule: Mapping[str, Any]) -> str:
    """A rule as Go's ``%#v`` prints kube's internal ``apiextensions.ValidationRule``."""
    reason = rule.get("reason")
    shown_reason = (
        f"(*apiextensions.FieldValueErrorReason)({go_quote(reason)})"
        if isinstance(reason, str)
        else "(*apiextensions.FieldValueErrorReason)(nil)"
    )
    return (
        f"apiextensions.ValidationRule{{Rule:{go_quote(str(rule.get('rule') or ''))}, "
        f"Message:{go_quote(str(rule.get('message') or ''))}, "
        f"MessageExpression:{go_quote(str(rule.get('messageExpression') or ''))}, "
        f"Reason:{shown_reason}, FieldPath:{go_quote(str(rule.get('fieldPath') or ''))}}}"
    )


def compile_errors(schema: Mapping[str, Any], path: str) -> list[FieldError]:
    """The rules of ``schema`` (a CRD's ``openAPIV3Schema``, found at ``path``) that do
    not compile, as the CRD's 422 causes (kube's field paths and message shape; the
    compiler's own words are cel-python's)."""
    errors: list[FieldError] = []
    for node, node_path in _schema_nodes(schema, path):
        for index, rule in enumerate(node.get("x-kubernetes-validations") or ()):
            if not isinstance(rule, Mapping):
                continue
            where = f"{node_path}.x-kubernetes-validations[{index}]"
            for field_name in ("rule", "messageExpression"):
                source = rule.get(field_name)
                if not isinstance(source, str) or not source:
                    continue
                try:
                    _compile(source)
                except RuleError as exc:
                    errors.append(
                        FieldError(
                            f"{where}.{field_name}", "Invalid", str(exc), GoSyntax(_go_rule(rule))
                        )
                    )
                except UnsupportedRule:
                    pass  # kube compiles it; evaluating it is what fails here
    return errors


def _schema_nodes(schema: Mapping[str, Any], path: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    yield schema, path
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            if isinstance(sub, Mapping):
                yield from _schema_nodes(sub, f"{path}.properties[{name}]")
    for key in ("items", "additionalProperties"):
        sub = schema.get(key)
        if isinstance(sub, Mapping):
            yield from _schema_nodes(sub, f"{path}.{key}")


def has_rules(schema: Mapping[str, Any] | None) -> bool:
    """Whether ``schema`` has any ``x-kubernetes-validations`` rule."""
    if schema is None:
        return False
    return any(node.get("x-kubernetes-validations") for node, _ in _schema_nodes(schema, ""))


# -- values -----------------------------------------------------------------------------------


def _escape(name: str) -> str | None:
    """kube's CEL escaping of a property name (``None``: it cannot be a field)."""
    if name in _RESERVED:
        return f"__{name}__"
    if not re.fullmatch(r"[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*", name):
        return None
    escaped = (
        name.replace("__", "__underscores__")
        .replace(".", "__dot__")
        .replace("-", "__dash__")
        .replace("/", "__slash__")
    )
    return escaped if _IDENTIFIER.match(escaped) else None


def _types(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    return kind if isinstance(kind, str) else ""


def _to_cel(value: Any, schema: Mapping[str, Any] | None, *, resource: bool = False) -> Any:
    """``value`` as kube's ``UnstructuredToVal`` presents it to a rule."""
    types = _types_module()
    if value is None:
        return None
    schema = schema or {}
    if isinstance(value, Mapping):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        embedded = resource or bool(schema.get("x-kubernetes-embedded-resource"))
        out: dict[Any, Any] = {}
        if (isinstance(properties, Mapping) and properties) or embedded:
            for key, child in value.items():
                sub = properties.get(key) if isinstance(properties, Mapping) else None
                if embedded and key in ("apiVersion", "kind"):
                    out[types.StringType(key)] = _to_cel(child, {"type": "string"})
                elif embedded and key == "metadata" and isinstance(child, Mapping):
                    meta = {k: child[k] for k in ("name", "generateName") if k in child}
                    out[types.StringType(key)] = _to_cel(meta, {"type": "object"})
                elif isinstance(sub, Mapping):
                    escaped = _escape(key)
                    if escaped is not None:
                        out[types.StringType(escaped)] = _to_cel(child, sub)
            return types.MapType(out)
        child_schema = additional if isinstance(additional, Mapping) else None
        return types.MapType(
            {types.StringType(k): _to_cel(v, child_schema) for k, v in value.items()}
        )
    if isinstance(value, list):
        items = schema.get("items")
        item_schema = items if isinstance(items, Mapping) else None
        return types.ListType([_to_cel(v, item_schema) for v in value])
    if isinstance(value, bool):
        return types.BoolType(value)
    if isinstance(value, str):
        fmt = schema.get("format")
        if fmt in ("date-time", "datetime", "date"):
            try:
                return types.TimestampType(value if fmt != "date" else f"{value}T00:00:00Z")
            except (ValueError, TypeError):
                return types.StringType(value)
        if fmt == "duration":
            try:
                return types.DurationType(value)
            except (ValueError, TypeError):
                return types.StringType(value)
        if fmt == "byte":
            try:
                return types.BytesType(base64.b64decode(value))
            except (binascii.Error, ValueError):
                return types.StringType(value)
        return types.StringType(value)
    if isinstance(value, int):
        if _types(schema) == "number":
            return types.DoubleType(float(value))
        return types.IntType(value)
    if isinstance(value, float):
        if _types(schema) == "integer" and value.is_integer():
            return types.IntType(int(value))
        return types.DoubleType(value)
    return value


# -- evaluating -------------------------------------------------------------------------------


def _error_text(exc: Any) -> str:
    """cel-python's error as cel-go words it."""
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    text = str(args[0]) if args else str(exc)
    cause = args[1] if len(args) > 1 else None
    if cause is KeyError or text.startswith("no such member"):
        found = re.search(r"'([^']*)'", text)
        return f"no such key: {found.group(1) if found else text}"
    if cause is ZeroDivisionError:
        return (
            "modulus by zero" if "modulus" in text and "divide" not in text else "division by zero"
        )
    if cause is IndexError:
        return "index out of bounds"
    if text.startswith("return error for overflow"):
        return "integer overflow"
    if text.startswith("found no matching overload") or cause is TypeError:
        return "no such overload"
    return text


def _is_error(value: Any) -> bool:
    from celpy.evaluation import CELEvalError

    return isinstance(value, CELEvalError)


def _run(program: _Program, activation: Mapping[str, Any]) -> Any:
    """The program's value, or the cel-python error it ended with (returned, not raised)."""
    from celpy.evaluation import CELEvalError

    try:
        return program.runner.evaluate(dict(activation))
    except CELEvalError as exc:
        text = str(exc.args[0]) if exc.args else ""
        if text.startswith("undeclared reference to"):
            raise UnsupportedRule(
                f"rule {program.rule!r}: the emulator's CEL library cannot evaluate it ({text})"
            ) from None
        return exc


def _message(rule: Mapping[str, Any]) -> str:
    message = str(rule.get("message") or "").strip()
    return message or f"failed rule: {str(rule.get('rule') or '').strip()}"


def _rule_text(rule: Mapping[str, Any]) -> str:
    """kube's ``ruleErrorString``: the message, else the rule."""
    return str(rule.get("message") or "").strip() or str(rule.get("rule") or "").strip()


def _field_error(path: str, kind: str, detail: str, reason: Any) -> FieldError:
    if reason == "FieldValueForbidden":
        return FieldError(path, "Forbidden", detail)
    if reason == "FieldValueRequired":
        return FieldError(path, "Required", detail)
    if reason == "FieldValueDuplicate":
        return FieldError(path, "Duplicate", "", kind)
    return FieldError(path, "Invalid", detail, kind)


def _join(path: str, child: str) -> str:
    return f"{path}.{child}" if path else child


def _normalized_field_path(field_path: str) -> str:
    """A rule's ``fieldPath`` (``.spec.a``, ``.a['b-c']``) as a field path's child text."""
    parts: list[str] = []
    for match in re.finditer(r"\.([^.\[\]]+)|\['((?:[^'\\]|\\.)*)'\]", field_path):
        if match.group(1) is not None:
            parts.append(("." if parts else "") + match.group(1))
        else:
            parts.append(f"[{match.group(2)}]")
    return "".join(parts)


def _evaluate_node(
    schema: Mapping[str, Any],
    value: Any,
    old: Any,
    path: str,
    *,
    resource: bool,
    errors: list[FieldError],
) -> None:
    rules = [r for r in schema.get("x-kubernetes-validations") or () if isinstance(r, Mapping)]
    if not rules:
        return
    kind = _types(schema)
    activation = {"self": _to_cel(value, schema, resource=resource)}
    if old is not None:
        activation["oldSelf"] = _to_cel(old, schema, resource=resource)
    for rule in rules:
        text = rule.get("rule")
        if not isinstance(text, str) or not text.strip():
            continue
        try:
            program = _compile(text)
        except RuleError as exc:
            errors.append(FieldError(path, "Invalid", f"rule compile error: {exc}", kind))
            continue
        if program.transition and old is None:
            continue
        result = _run(program, activation)
        if _is_error(result):
            cause = _error_text(result)
            if cause == "no such overload":
                detail = (
                    f"'{cause}': call arguments did not match a supported operator, function "
                    f"or macro signature for rule: {_rule_text(rule)}"
                )
            else:
                detail = f"{cause} evaluating rule: {_rule_text(rule)}"
            errors.append(FieldError(path, "Invalid", detail, kind))
            continue
        if result is True or (type(result).__name__ == "BoolType" and bool(result)):
            continue
        field_path = rule.get("fieldPath")
        if isinstance(field_path, str) and field_path:
            path = _join(path, _normalized_field_path(field_path))  # kube 1.28 keeps it
        message = _message(rule)
        expression = rule.get("messageExpression")
        if isinstance(expression, str) and expression:
            try:
                shown = _run(_compile(expression), activation)
            except RuleError:
                shown = None
            if shown is not None and not _is_error(shown) and isinstance(shown, str):
                text_shown = str(shown)
                if text_shown.strip() and "\n" not in text_shown:
                    message = text_shown
        errors.append(_field_error(path, kind, message, rule.get("reason")))


def _correlated_items(schema: Mapping[str, Any], old: Any) -> Callable[[Any], Any]:
    """The old item of a new one: by key for ``x-kubernetes-list-type: map``, else none."""
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list):
        return lambda item: None
    keys = [str(k) for k in schema.get("x-kubernetes-list-map-keys") or ()]

    def key_of(item: Any) -> Any:
        if not isinstance(item, Mapping):
            return None
        return msgspec.json.encode([item.get(k) for k in keys])

    by_key = {key_of(item): item for item in old if isinstance(item, Mapping)}
    return lambda item: by_key.get(key_of(item))


def _walk(
    schema: Mapping[str, Any],
    value: Any,
    old: Any,
    path: str,
    *,
    resource: bool,
    errors: list[FieldError],
) -> None:
    if value is None:
        return
    _evaluate_node(schema, value, old, path, resource=resource, errors=errors)
    if isinstance(value, Mapping):
        correlatable = schema.get("x-kubernetes-map-type") in (None, "granular", "atomic")
        old_map = old if isinstance(old, Mapping) and correlatable else {}
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for key, child in value.items():
                key_path = f"{path}[{key}]" if path else f"[{key}]"
                _walk(additional, child, old_map.get(key), key_path, resource=False, errors=errors)
        for key, child in value.items():
            sub = properties.get(key)
            if isinstance(sub, Mapping):
                _walk(sub, child, old_map.get(key), _join(path, key), resource=False, errors=errors)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            old_item = _correlated_items(schema, old)
            for index, child in enumerate(value):
                _walk(
                    items, child, old_item(child), f"{path}[{index}]", resource=False, errors=errors
                )


def cel_errors(
    schema: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[FieldError]:
    """The errors of the rules in ``schema`` (a CRD's ``openAPIV3Schema``) for ``obj``
    (``old``: its stored state on an update). Raises :class:`UnsupportedRule` for a rule
    the emulator cannot evaluate."""
    if not has_rules(schema):
        return []
    errors: list[FieldError] = []
    _walk(schema, obj, old, "", resource=True, errors=errors)
    return errors


# -- kube's libraries -------------------------------------------------------------------------


def _library() -> dict[str, Callable[..., Any]]:
    return dict(_LIBRARY)


def _types_module() -> Any:
    return _celpy().celtypes


def _string(value: Any) -> Any:
    return _types_module().StringType(value)


def _int(value: int) -> Any:
    return _types_module().IntType(value)


def _char_at(text: str, index: int) -> Any:
    if index < 0 or index > len(text):
        raise IndexError(f"index out of range: {index}")
    return _string(text[index : index + 1])


def _index_of(target: Any, needle: Any, offset: int = 0) -> Any:
    if isinstance(target, str):
        if offset < 0 or offset > len(target):
            raise IndexError(f"index out of range: {offset}")
        return _int(target.find(needle, offset))
    for index, item in enumerate(target):
        if item == needle:
            return _int(index)
    return _int(-1)


def _last_index_of(target: Any, needle: Any, offset: int | None = None) -> Any:
    if isinstance(target, str):
        if offset is None:
            return _int(target.rfind(needle))
        return _int(target.rfind(needle, 0, offset + len(needle)))
    for index in range(len(target) - 1, -1, -1):
        if target[index] == needle:
            return _int(index)
    return _int(-1)


def _replace(text: str, old: str, new: str, limit: int = -1) -> Any:
    return _string(text.replace(old, new, limit if limit >= 0 else -1))


def _split(text: str, separator: str, limit: int = -1) -> Any:
    types = _types_module()
    if limit == 0:
        return types.ListType([])
    if separator == "":
        parts = list(text)
        if limit > 0 and len(parts) > limit:
            parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
    else:
        parts = text.split(separator, limit - 1 if limit > 0 else -1)
    return types.ListType([types.StringType(p) for p in parts])


def _substring(text: str, start: int, end: int | None = None) -> Any:
    end = len(text) if end is None else end
    if start < 0 or end > len(text) or start > end:
        raise IndexError(f"index out of range: {start if start < 0 or start > end else end}")
    return _string(text[start:end])


def _join_list(items: Any, separator: str = "") -> Any:
    return _string(separator.join(str(i) for i in items))


def _is_sorted(items: Any) -> Any:
    return _types_module().BoolType(all(a <= b for a, b in itertools.pairwise(items)))


def _sum(items: Any) -> Any:
    if not items:
        return _int(0)
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


def _min(items: Any) -> Any:
    if not items:
        raise ValueError("min(list) argument must not be empty")
    return min(items)


def _max(items: Any) -> Any:
    if not items:
        raise ValueError("max(list) argument must not be empty")
    return max(items)


def _find(text: str, pattern: str) -> Any:
    found = re.search(pattern, text)
    return _string(found.group(0) if found else "")


def _find_all(text: str, pattern: str, limit: int = -1) -> Any:
    types = _types_module()
    found = [m.group(0) for m in re.finditer(pattern, text)]
    if limit >= 0:
        found = found[:limit]
    return types.ListType([types.StringType(f) for f in found])


class _Url(str):
    """A parsed URL (kube's ``URL`` type), compared by its text."""

    __slots__ = ()


def _parse_url(text: str) -> urllib.parse.SplitResult | None:
    if (
        not text
        or " " in text
        or not (text.startswith("/") or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", text))
    ):
        return None
    try:
        return urllib.parse.urlsplit(text)
    except ValueError:
        return None


def _url(text: str) -> Any:
    if _parse_url(text) is None:
        raise ValueError(f"URL parse error during conversion from string: {text}")
    return _Url(text)


def _is_url(text: str) -> Any:
    return _types_module().BoolType(_parse_url(str(text)) is not None)


def _url_part(part: str) -> Callable[[Any], Any]:
    def get(url: Any) -> Any:
        parsed = _parse_url(str(url))
        if parsed is None:
            return _string("")
        if part == "scheme":
            return _string(parsed.scheme)
        if part == "host":
            return _string(parsed.netloc.rpartition("@")[2])
        if part == "hostname":
            host = parsed.netloc.rpartition("@")[2]
            if host.startswith("["):
                return _string(host[1 : host.index("]")])
            return _string(host.rpartition(":")[0] if ":" in host else host)
        if part == "port":
            host = parsed.netloc.rpartition("@")[2]
            tail = host.rpartition("]")[2] if host.startswith("[") else host
            return _string(tail.rpartition(":")[2] if ":" in tail else "")
        if part == "path":
            return _string(urllib.parse.quote(parsed.path, safe="/:@!$&'()*+,;=-._~"))
        types = _types_module()
        query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
        return types.MapType(
            {
                types.StringType(k): types.ListType([types.StringType(v) for v in vs])
                for k, vs in query.items()
            }
        )

    return get


_LIBRARY: Final[Mapping[str, Callable[..., Any]]] = {
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": lambda s: _string("".join(c.lower() if c.isascii() else c for c in s)),
    "upperAscii": lambda s: _string("".join(c.upper() if c.isascii() else c for c in s)),
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": lambda s: _string(s.strip()),
    "join": _join_list,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _min,
    "max": _max,
    "find": _find,
    "findAll": _find_all,
    "url": _url,
    "isURL": _is_url,
    "getScheme": _url_part("scheme"),
    "getHost": _url_part("host"),
    "getHostname": _url_part("hostname"),
    "getPort": _url_part("port"),
    "getEscapedPath": _url_part("path"),
    "getQuery": _url_part("query"),
}
