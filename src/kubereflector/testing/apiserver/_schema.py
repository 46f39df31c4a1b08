"""Structural-schema validation of custom resources, as kube-apiserver does it: a port of
kube-openapi's schema validator (``k8s.io/kube-openapi/pkg/validation/validate``) with
apiextensions-apiserver's translation of its results into field errors, its checks of
``x-kubernetes-list-type`` sets and maps, and of ``x-kubernetes-embedded-resource``
objects.

Private to :mod:`kubereflector.testing.apiserver`. Pure functions of a decoded object
and a CRD's ``openAPIV3Schema`` (a JSON mapping, never modified): no I/O.

What kube-apiserver 1.28 answers, and so what this answers: every failure of the
object's value against its schema (types, ``nullable``, ``enum``, ``minimum`` and
``maximum`` with their exclusive forms, ``multipleOf``, ``pattern``, ``format``,
``minLength``/``maxLength``, ``minItems``/``maxItems``, ``uniqueItems``,
``minProperties``/``maxProperties``, ``required``, ``allOf``/``anyOf``/``oneOf``/``not``,
``x-kubernetes-int-or-string``), with kube's field paths and messages
(``spec.size: Invalid value: 11: spec.size in body should be less than or equal to
10``). kube walks maps in Go's random order, so the order of several causes differs
from one request to the next there; here it is the schema's order. Formats are checked
as kube-openapi's registry does for the formats kube supports (others are ignored,
as kube strips them); ``email``, ``uri`` and ``hostname`` by close approximations of
Go's parsers. Patterns use Python's ``re`` (kube: Go's RE2; the common syntax is the
same).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard

import msgspec

from ._formats import FORMATS, SUPPORTED_FORMATS
from ._gofmt import go_float, go_quote, go_v, json_type_name
from ._statuses import FieldError

__all__ = [
    "BLOCKING_TYPES",
    "NIL_PATH",
    "Schema",
    "embedded_errors",
    "list_errors",
    "schema_errors",
]

Schema = Mapping[str, Any]
"""A node of an ``openAPIV3Schema`` (JSON)."""

BLOCKING_TYPES: Final = frozenset({"Required", "TooLong", "TooMany", "TypeInvalid"})
"""Errors after which kube does not evaluate the CEL rules (``hasBlockingErr``)."""

_EPSILON: Final = 1e-9
NIL_PATH: Final = "<nil>"
"""How Go prints the field path of an error at no path (a nil ``*field.Path``)."""


# -- kube-openapi's results -------------------------------------------------------------------


@dataclass(slots=True)
class _Failure:
    """One kube-openapi error: ``code`` as kube-openapi names its failure codes
    (``""`` for the composite ones, anyOf and the like, that name no field)."""

    code: str
    name: str
    message: str
    value: Any = None
    has_value: bool = False
    valid: Any = None
    values: Sequence[Any] = ()


@dataclass(slots=True)
class _Result:
    errors: list[_Failure] = field(default_factory=list)
    matches: int = 0

    def add(self, *failures: _Failure) -> None:
        for failure in failures:
            if all(f.message != failure.message for f in self.errors):
                self.errors.append(failure)

    def merge(self, *others: _Result | None) -> None:
        for other in others:
            if other is not None:
                self.add(*other.errors)
                self.matches += other.matches

    @property
    def valid(self) -> bool:
        return not self.errors


def _failed(failure: _Failure) -> _Result:
    return _Result([failure])


def _in(name: str, template: str, *args: Any) -> str:
    """kube-openapi's messages: ``"<name> in body <rest>"``."""
    return f"{name} in body {template.format(*args)}"


def _num(value: Any) -> str:
    return go_float(value) if isinstance(value, float) else go_v(value)


# -- the validators, in kube-openapi's order --------------------------------------------------


def _types(schema: Schema) -> list[str]:
    if schema.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    kind = schema.get("type")
    if isinstance(kind, list):
        return [str(k) for k in kind]
    return [kind] if isinstance(kind, str) and kind else []


def _format(schema: Schema) -> str:
    """The schema's format, or ``""`` for one kube does not support (it strips them)."""
    fmt = schema.get("format")
    if not isinstance(fmt, str) or fmt.replace("-", "") not in SUPPORTED_FORMATS:
        return ""
    return fmt


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_integer(value: float) -> bool:
    """go-openapi's ``IsFloat64AJSONInteger``."""
    if math.isnan(value) or math.isinf(value) or abs(value) > 1.7976931348623157e308:
        return False
    whole = float(math.trunc(value))
    if value == whole:
        return True
    diff = abs(value - whole)
    if whole == 0 or diff < 5e-324:
        return diff < _EPSILON * 5e-324
    return diff / min(abs(value) + abs(whole), 1.7976931348623157e308) < _EPSILON


def _type_result(schema: Schema, value: Any, path: str) -> _Result | None:
    types = _types(schema)
    fmt = _format(schema)
    if not types and not fmt:
        return None  # kube-openapi's type validator does not apply
    if value is None:
        if types and "null" not in types and not schema.get("nullable"):
            return _failed(
                _Failure(
                    "InvalidType",
                    path,
                    _in(path, "must be of type {}: {}", ",".join(types), go_quote("null")),
                    "null",
                    True,
                )
            )
        return _Result(matches=1)
    actual = json_type_name(value)
    if isinstance(value, (str, list)) and fmt and not ({"number", "integer"} & set(types)):
        return _Result(matches=1)
    float_int = actual == "number" and "integer" in types and _json_integer(value)
    int_float = actual == "integer" and "number" in types
    if not (actual in types or float_int or int_float):
        return _failed(
            _Failure(
                "InvalidType",
                path,
                _in(path, "must be of type {}: {}", ",".join(types), go_quote(actual)),
                actual,
                True,
            )
        )
    return _Result(matches=1)


def _props_result(schema: Schema, value: Any, path: str) -> _Result:
    """allOf, anyOf, oneOf and not (kube-openapi's ``schemaPropsValidator``)."""
    result = _Result()
    any_of = schema.get("anyOf") or []
    if any_of:
        best: _Result | None = None
        succeeded = False
        first_success: _Result | None = None
        for sub in any_of:
            sub_result = _validate(sub, value, path)
            if sub_result.valid:
                best = None
                succeeded = True
                first_success = first_success or sub_result
                break
            if best is None or sub_result.matches > best.matches:
                best = sub_result
        if not succeeded:
            result.add(
                _Failure("", path, f"{go_quote(path)} must validate at least one schema (anyOf)")
            )
        result.merge(best if best is not None else first_success)
    one_of = schema.get("oneOf") or []
    if one_of:
        best = None
        first_success = None
        validated = 0
        for sub in one_of:
            sub_result = _validate(sub, value, path)
            if sub_result.valid:
                validated += 1
                best = None
                first_success = first_success or sub_result
                continue
            if validated == 0 and (best is None or sub_result.matches > best.matches):
                best = sub_result
        if validated != 1:
            why = "Found none valid" if validated == 0 else f"Found {validated} valid alternatives"
            result.add(
                _Failure(
                    "",
                    path,
                    f"{go_quote(path)} must validate one and only one schema (oneOf). {why}",
                )
            )
            result.merge(best)
        else:
            result.merge(first_success)
    all_of = schema.get("allOf") or []
    if all_of:
        validated = 0
        for sub in all_of:
            sub_result = _validate(sub, value, path)
            validated += sub_result.valid
            result.merge(sub_result)
        if validated != len(all_of):
            why = ". None validated" if validated == 0 else ""
            result.add(
                _Failure("", path, f"{go_quote(path)} must validate all the schemas (allOf){why}")
            )
    not_schema = schema.get("not")
    if isinstance(not_schema, Mapping) and _validate(not_schema, value, path).valid:
        result.add(_Failure("", path, f"{go_quote(path)} must not validate the schema (not)"))
    result.matches += 1
    return result


def _string_result(schema: Schema, value: str, path: str) -> _Result | None:
    max_length = schema.get("maxLength")
    if isinstance(max_length, int) and len(value) > max_length:
        return _failed(
            _Failure(
                "TooLong",
                path,
                _in(path, "should be at most {} chars long", max_length),
                value,
                True,
                max_length,
            )
        )
    min_length = schema.get("minLength")
    if isinstance(min_length, int) and len(value) < min_length:
        return _failed(
            _Failure(
                "TooShort",
                path,
                _in(path, "should be at least {} chars long", min_length),
                value,
                True,
            )
        )
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            matched = re.search(pattern, value) is not None
        except re.error as exc:
            shown = f"{pattern}, but pattern is invalid: {exc}"
            return _failed(
                _Failure("Pattern", path, _in(path, "should match '{}'", shown), value, True)
            )
        if not matched:
            return _failed(
                _Failure("Pattern", path, _in(path, "should match '{}'", pattern), value, True)
            )
    return None


def _format_result(schema: Schema, value: str, path: str) -> _Result | None:
    fmt = _format(schema)
    if not fmt or FORMATS[fmt.replace("-", "")](value):
        return None
    return _failed(
        _Failure(
            "InvalidType",
            path,
            _in(path, "must be of type {}: {}", fmt, go_quote(value)),
            value,
            True,
        )
    )


def _number_result(schema: Schema, value: int | float, path: str) -> _Result:
    result = _Result(matches=1)
    multiple = _Result()
    minimum_result = _Result()
    maximum_result = _Result()
    integral = isinstance(value, int)
    factor = schema.get("multipleOf")
    if _is_number(factor):
        failure = _multiple_of(path, value, factor)
        if failure is not None:
            multiple.add(failure)
    maximum = schema.get("maximum")
    if _is_number(maximum):
        exclusive = bool(schema.get("exclusiveMaximum"))
        bound: int | float = math.trunc(maximum) if integral else float(maximum)
        if value > bound or (exclusive and value >= bound):
            text = "should be less than {}" if exclusive else "should be less than or equal to {}"
            maximum_result.add(_Failure("Max", path, _in(path, text, _num(bound)), value, True))
    minimum = schema.get("minimum")
    if _is_number(minimum):
        exclusive = bool(schema.get("exclusiveMinimum"))
        bound = math.trunc(minimum) if integral else float(minimum)
        if value < bound or (exclusive and value <= bound):
            text = (
                "should be greater than {}"
                if exclusive
                else "should be greater than or equal to {}"
            )
            minimum_result.add(_Failure("Min", path, _in(path, text, _num(bound)), value, True))
    result.merge(multiple, minimum_result, maximum_result)
    return result


def _multiple_of(path: str, value: int | float, factor: int | float) -> _Failure | None:
    if isinstance(value, int):
        whole = math.trunc(factor)
        if whole <= 0:
            return _Failure(
                "MultipleOfMustBePositive",
                path,
                f"factor MultipleOf declared for {path} must be positive: {whole}",
                whole,
                True,
            )
        if value % whole == 0 or (value < 0 and -value % whole == 0):
            return None
        return _Failure(
            "MultipleOf", path, _in(path, "should be a multiple of {}", whole), value, True
        )
    factor = float(factor)
    if factor <= 0:
        return _Failure(
            "MultipleOfMustBePositive",
            path,
            f"factor MultipleOf declared for {path} must be positive: {go_float(factor)}",
            factor,
            True,
        )
    quotient = (1 / factor * value) if factor < 1 else (value / factor)
    if _json_integer(quotient):
        return None
    return _Failure(
        "MultipleOf", path, _in(path, "should be a multiple of {}", go_float(factor)), value, True
    )


def _slice_result(schema: Schema, value: list[Any], path: str) -> _Result:
    result = _Result()
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            result.merge(_validate(items, item, f"{path}[{index}]"))
    size = len(value)
    min_items = schema.get("minItems")
    if isinstance(min_items, int) and size < min_items:
        result.add(
            _Failure(
                "MinItems", path, _in(path, "should have at least {} items", min_items), size, True
            )
        )
    max_items = schema.get("maxItems")
    if isinstance(max_items, int) and size > max_items:
        result.add(
            _Failure(
                "MaxItems",
                path,
                _in(path, "should have at most {} items", max_items),
                size,
                True,
                max_items,
            )
        )
    if schema.get("uniqueItems"):
        seen: list[Any] = []
        for item in value:
            if any(_deep_equal(item, other) for other in seen):
                result.add(_Failure("Unique", path, _in(path, "shouldn't contain duplicates")))
                break
            seen.append(item)
    result.matches += 1
    return result


def _enum_result(schema: Schema, value: Any, path: str) -> _Result | None:
    allowed = schema.get("enum")
    if not isinstance(allowed, list) or not allowed:
        return None
    if value is not None and any(_enum_equal(value, option) for option in allowed):
        return None
    shown = "[" + " ".join(go_v(v) for v in allowed) + "]"
    return _failed(
        _Failure("Enum", path, _in(path, "should be one of {}", shown), value, True, values=allowed)
    )


def _object_result(schema: Schema, value: Mapping[str, Any], path: str) -> _Result:
    result = _Result()
    size = len(value)
    min_props = schema.get("minProperties")
    if isinstance(min_props, int) and size < min_props:
        result.add(
            _Failure(
                "TooFewProperties",
                path,
                _in(path, "should have at least {} properties", min_props),
                size,
                True,
            )
        )
    max_props = schema.get("maxProperties")
    if isinstance(max_props, int) and size > max_props:
        result.add(
            _Failure(
                "TooManyProperties",
                path,
                _in(path, "should have at most {} properties", max_props),
                size,
                True,
                max_props,
            )
        )
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    additional = schema.get("additionalProperties")
    if additional is False:
        for key in value:
            if key not in properties:
                result.add(
                    _Failure(
                        "UnallowedProperty",
                        path,
                        f"{path}.{key} in body is a forbidden property",
                        key,
                        True,
                    )
                )
    elif isinstance(additional, Mapping):
        for key, child in value.items():
            if key not in properties:
                result.merge(_validate(additional, child, f"{path}.{key}"))
    for name, sub in properties.items():
        if name in value and isinstance(sub, Mapping):
            result.merge(_validate(sub, value[name], f"{path}.{name}" if path else name))
    for name in schema.get("required") or ():
        if name not in value:
            result.add(_Failure("Required", f"{path}.{name}", f"{path}.{name} in body is required"))
    return result


def _validate(schema: Schema, value: Any, path: str) -> _Result:
    """kube-openapi's ``SchemaValidator.Validate``."""
    result = _Result()
    if value is None:
        result.merge(_type_result(schema, value, path), _enum_result(schema, value, path))
        return result
    steps: list[_Result | None] = [_type_result(schema, value, path)]
    steps.append(_props_result(schema, value, path))
    if isinstance(value, str):
        steps.append(_string_result(schema, value, path))
        steps.append(_format_result(schema, value, path))
    if _is_number(value):
        steps.append(_number_result(schema, value, path))
    if isinstance(value, list):
        steps.append(_slice_result(schema, value, path))
    steps.append(_enum_result(schema, value, path))
    if isinstance(value, Mapping):
        steps.append(_object_result(schema, value, path))
    for step in steps:
        result.merge(step)
        result.matches += 1
    result.matches += 1
    return result


# -- into field errors ------------------------------------------------------------------------


def _go_json(value: Any) -> str:
    if isinstance(value, float) and _json_integer(value) and abs(value) < 1e21:
        return str(int(value))
    return msgspec.json.encode(value, order="sorted").decode()


def _field_error(failure: _Failure, prefix: str) -> FieldError:
    """apiextensions-apiserver's ``kubeOpenAPIResultToFieldErrors`` for one failure."""
    if not failure.code:
        return FieldError(prefix or NIL_PATH, "Invalid", failure.message, "")
    name = failure.name.lstrip(".")
    path = ".".join(p for p in (prefix, name) if p) if name and name != "." else prefix
    path = path or NIL_PATH
    value = failure.value if failure.has_value and failure.value is not None else ""
    if failure.code == "Required":
        return FieldError(path, "Required", "")
    if failure.code == "Enum":
        supported = ", ".join(
            go_quote(v if isinstance(v, str) else _go_json(v)) for v in failure.values
        )
        return FieldError(path, "NotSupported", supported, failure.value)
    if failure.code == "TooLong":
        return FieldError(path, "TooLong", f"may not be longer than {failure.valid}", value)
    if failure.code in ("MaxItems", "TooManyProperties"):
        return FieldError(
            path, "TooMany", f"must have at most {failure.valid} items", failure.value
        )
    if failure.code == "InvalidType":
        return FieldError(path, "TypeInvalid", failure.message, value)
    return FieldError(path, "Invalid", failure.message, value)


def schema_errors(schema: Schema, value: Any, prefix: str = "") -> list[FieldError]:
    """Every failure of ``value`` against ``schema`` as kube reports it (field paths
    under ``prefix``, as the status subresource reports ``status``'s without one)."""
    return [_field_error(f, prefix) for f in _validate(schema, value, "").errors]


# -- list types -------------------------------------------------------------------------------


def _children(schema: Schema, value: Any, path: str) -> Iterator[tuple[Schema, Any, str]]:
    """The (schema, value, path) of each child of ``value`` that has a schema."""
    if isinstance(value, Mapping):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            if isinstance(properties, Mapping) and isinstance(properties.get(key), Mapping):
                yield properties[key], child, f"{path}.{key}" if path else key
            elif isinstance(additional, Mapping):
                yield additional, child, f"{path}[{key}]" if path else f"[{key}]"
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                yield items, item, f"{path}[{index}]"


def _list_key(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return ("compound", msgspec.json.encode(value, order="sorted"))
    if isinstance(value, bool):
        return ("bool", value)
    return ("scalar", type(value).__name__ if not _is_number(value) else "number", value)


def _duplicates(keys: Sequence[Any]) -> list[int]:
    """The index of each value's second occurrence (kube's ``validateListSet``)."""
    seen: dict[Any, int] = {}
    out = []
    for index, key in enumerate(keys):
        marker = _list_key(key)
        seen[marker] = seen.get(marker, 0) + 1
        if seen[marker] == 2:
            out.append(index)
    return out


def list_errors(schema: Schema, value: Any, path: str = "") -> list[FieldError]:
    """kube's ``ValidateListSetsAndMaps``: duplicates in ``x-kubernetes-list-type: set``
    and ``map`` lists (``spec.ports[1]: Duplicate value: map[string]interface
    {}{"name":"a"}``)."""
    errors: list[FieldError] = []
    for sub, child, child_path in _children(schema, value, path):
        if isinstance(child, list):
            errors.extend(_list_type_errors(sub, child, child_path))
        if isinstance(child, (list, Mapping)):
            errors.extend(list_errors(sub, child, child_path))
    return errors


def _list_type_errors(schema: Schema, items: list[Any], path: str) -> list[FieldError]:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        return [FieldError(f"{path}[{i}]", "Duplicate", "", items[i]) for i in _duplicates(items)]
    if list_type != "map":
        return []
    for index, item in enumerate(items):
        if item is not None and not isinstance(item, Mapping):
            return [
                FieldError(
                    f"{path}[{index}]",
                    "Invalid",
                    "must be an object for an array of list-type map",
                    item,
                )
            ]
    names = [str(k) for k in schema.get("x-kubernetes-list-map-keys") or ()]
    keys: list[dict[str, Any]] = [
        {name: item[name] for name in names if name in item} if isinstance(item, Mapping) else {}
        for item in items
    ]
    return [FieldError(f"{path}[{i}]", "Duplicate", "", keys[i]) for i in _duplicates(keys)]


# -- embedded resources -----------------------------------------------------------------------

_DNS1035: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")


def embedded_errors(schema: Schema, value: Any, path: str = "") -> list[FieldError]:
    """kube's checks of ``x-kubernetes-embedded-resource`` objects: ``apiVersion`` and
    ``kind`` present and well formed, ``metadata.name`` a valid path segment."""
    errors: list[FieldError] = []
    for sub, child, child_path in _children(schema, value, path):
        if isinstance(child, Mapping) and sub.get("x-kubernetes-embedded-resource"):
            errors.extend(_embedded_resource_errors(child, child_path))
        if isinstance(child, (list, Mapping)):
            errors.extend(embedded_errors(sub, child, child_path))
    return errors


def _embedded_resource_errors(obj: Mapping[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if "apiVersion" not in obj:
        errors.append(FieldError(f"{path}.apiVersion", "Required", "must not be empty"))
    if "kind" not in obj:
        errors.append(FieldError(f"{path}.kind", "Required", "must not be empty"))
    for key, child in obj.items():
        if key == "apiVersion":
            if not isinstance(child, str):
                errors.append(
                    FieldError(f"{path}.apiVersion", "Invalid", "must be a string", child)
                )
            elif not child:
                errors.append(
                    FieldError(f"{path}.apiVersion", "Invalid", "must not be empty", child)
                )
            elif child.count("/") > 1:
                errors.append(
                    FieldError(
                        f"{path}.apiVersion",
                        "Invalid",
                        f"unexpected GroupVersion string: {child}",
                        child,
                    )
                )
        elif key == "kind":
            if not isinstance(child, str):
                errors.append(FieldError(f"{path}.kind", "Invalid", "must be a string", child))
            elif not child:
                errors.append(FieldError(f"{path}.kind", "Invalid", "must not be empty", child))
            elif len(child) > 63 or not _DNS1035.match(child.lower()):
                errors.append(
                    FieldError(
                        f"{path}.kind",
                        "Invalid",
                        "may have mixed case, but should otherwise match: a DNS-1035 label must "
                        "consist of lower case alphanumeric characters or '-', start with an "
                        "alphabetic character, and end with an alphanumeric character (e.g. "
                        "'my-name',  or 'abc-123', regex used for validation is "
                        "'[a-z]([-a-z0-9]*[a-z0-9])?')",
                        child,
                    )
                )
        elif key == "metadata" and isinstance(child, Mapping):
            name = child.get("name")
            if isinstance(name, str) and name:
                problem = _path_segment_problem(name)
                if problem:
                    errors.append(FieldError(f"{path}.metadata.name", "Invalid", problem, name))
    return errors


def _path_segment_problem(name: str) -> str:
    if name in (".", ".."):
        return f"may not be '{name}'"
    for bad in ("/", "%"):
        if bad in name:
            return f"may not contain '{bad}'"
    return ""


# -- equality as Go's reflect.DeepEqual sees decoded JSON -------------------------------------


def _deep_equal(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _enum_equal(value: Any, option: Any) -> bool:
    """kube-openapi's enum match: equal, or equal once converted to the option's type
    (numbers to numbers)."""
    if _is_number(value) and _is_number(option):
        return bool(value == option)
    return _deep_equal(value, option)
