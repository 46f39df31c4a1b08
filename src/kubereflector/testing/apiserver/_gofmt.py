"""How Go's ``fmt`` prints JSON values, for messages that must read as kube-apiserver's:
``%v`` of a number, ``%q`` of a string, ``%#v`` of a decoded JSON value (what
``field.Error`` prints for a bad value that is a map or a list), and
``field.Error``'s own rendering of a bad value.

Private to :mod:`kubereflector.testing.apiserver`. Pure functions of JSON values
(``None``, ``bool``, ``int``, ``float``, ``str``, ``list``, ``dict``), as Go's
``encoding/json`` decodes them into ``interface{}`` (integers as ``int64``, other
numbers as ``float64``).
"""

from __future__ import annotations

import math
import unicodedata
from decimal import Decimal
from typing import Any, Final

__all__ = ["GoSyntax", "go_float", "go_quote", "go_sharp_v", "go_v", "json_type_name"]


class GoSyntax(str):
    """Text that is already what Go prints for a value (``%#v`` of a struct): shown as it
    is, not quoted, where a bad value is printed."""

    __slots__ = ()


_ESCAPES: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_float(value: float) -> str:
    """``fmt.Sprintf("%v", value)`` of a float64 (``strconv.FormatFloat(v, 'g', -1, 64)``):
    the shortest digits that read back as ``value``, in ``%e`` form when the decimal
    exponent is below -4 or at least 6 (``1e+06``, ``123456``, ``1.5e-05``, ``-0``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exponent  # the decimal point sits after this many digits
    digits = digits.rstrip("0")
    prefix = "-" if sign else ""
    exp = point - 1
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{prefix}{digits}{'0' * (point - len(digits))}"
    return f"{prefix}{digits[:point]}.{digits[point:]}"


def go_v(value: Any) -> str:
    """``fmt.Sprintf("%v", value)`` of a JSON scalar (``true``, ``3``, ``1.5``, a string
    as it is); maps and lists as Go prints them with ``%v``."""
    if value is None:
        return "<nil>"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + " ".join(go_v(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_v(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def go_quote(text: str) -> str:
    """``strconv.Quote(text)`` (``%q``): double-quoted, with Go's escapes; printable
    characters, non-ASCII ones included, are kept as they are."""
    out = ['"']
    for char in text:
        escaped = _ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char.isprintable() or (char == " "):
            out.append(char)
        else:
            code = ord(char)
            if code < 0x80 and unicodedata.category(char).startswith("C"):
                out.append(f"\\x{code:02x}")
            elif code <= 0xFFFF:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_sharp_v(value: Any) -> str:
    """``fmt.Sprintf("%#v", value)`` of a decoded JSON value:
    ``map[string]interface {}{"a":1, "b":"x"}``, ``[]interface {}{"a", 2}``."""
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, dict):
        items = ", ".join(f"{go_quote(k)}:{go_sharp_v(value[k])}" for k in sorted(value))
        return "map[string]interface {}{" + items + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_sharp_v(v) for v in value) + "}"
    return go_v(value)


def json_type_name(value: Any) -> str:
    """The JSON Schema type of a decoded value, as kube-openapi names it when a value
    has the wrong one (``"integer"``, ``"number"``, ``"string"``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
