"""The emulator's CEL rules: kube's libraries on cel-python, and what happens to rules
it cannot evaluate (pure functions)."""

from __future__ import annotations

from typing import Any

import pytest

from kubereflector.testing.apiserver._cel import (
    UnsupportedRule,
    cel_errors,
    compile_errors,
    has_rules,
)


def rules(*rules: Any, **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    r if isinstance(r, dict) else {"rule": r} for r in rules
                ],
                "properties": properties
                or {
                    "s": {"type": "string"},
                    "l": {"type": "array", "items": {"type": "integer"}},
                    "when": {"type": "string", "format": "date-time"},
                    "my-field": {"type": "integer"},
                    "in": {"type": "integer"},
                },
            }
        },
    }


def messages(schema: dict[str, Any], spec: dict[str, Any], old: Any = None) -> list[str]:
    old_obj = None if old is None else {"spec": old}
    return [e.text() for e in cel_errors(schema, {"spec": spec}, old_obj)]


@pytest.mark.parametrize(
    "rule",
    [
        "self.s.lowerAscii() == 'a,b'",
        "self.s.upperAscii() == 'A,B'",
        "self.s.split(',') == ['a', 'B']",
        "self.s.indexOf(',') == 1 && self.s.lastIndexOf('B') == 2",
        "self.s.charAt(2) == 'B' && self.s.substring(2) == 'B'",
        "self.s.replace(',', ';') == 'a;B'",
        "'  x '.trim() == 'x' && ['a', 'b'].join('-') == 'a-b'",
        "self.l.isSorted() && self.l.sum() == 6 && self.l.min() == 1 && self.l.max() == 3",
        "self.l.indexOf(2) == 1",
        "'x12y345'.find('[0-9]+') == '12' && 'x12y345'.findAll('[0-9]+') == ['12', '345']",
        "isURL('https://a.b:8080/p?q=1') && url('https://a.b:8080/p').getHostname() == 'a.b'",
        "url('https://a.b:8080/p').getPort() == '8080' && url('https://a.b/p').getScheme() == "
        "'https'",
        "self.when < timestamp('2030-01-01T00:00:00Z')",
        "self.my__dash__field == 1 && self.__in__ == 2",
        "has(self.s) && !has(self.missing)",
    ],
)
def test_kubes_libraries(rule: str) -> None:
    spec = {
        "s": "a,B",
        "l": [1, 2, 3],
        "when": "2024-01-01T00:00:00Z",
        "my-field": 1,
        "in": 2,
    }
    assert messages(rules(rule), spec) == []


def test_failures_read_as_kubes() -> None:
    schema = rules(
        "self.s == 'x'",
        {"rule": "self.s.size() > 5", "message": " too short "},
        {"rule": "1 / self.l[0] == 1", "message": "div"},
        {"rule": "self.s + 1 == 'x'"},
        {"rule": "self.s == oldSelf.s", "reason": "FieldValueForbidden", "message": "immutable"},
        {"rule": "false", "messageExpression": "'s is ' + self.s"},
    )
    assert messages(schema, {"s": "ab", "l": [0]}) == [
        "Invalid value: \"object\": failed rule: self.s == 'x'",
        'Invalid value: "object": too short',
        'Invalid value: "object": division by zero evaluating rule: div',
        "Invalid value: \"object\": 'no such overload': call arguments did not match a "
        "supported operator, function or macro signature for rule: self.s + 1 == 'x'",
        'Invalid value: "object": s is ab',
    ]
    # A transition rule runs only on an update.
    assert "Forbidden: immutable" in messages(schema, {"s": "ab", "l": [0]}, {"s": "a"})


def test_old_values_correlate_by_map_key_and_list_key() -> None:
    item = {
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.v >= oldSelf.v", "message": "grows"}],
        "properties": {"k": {"type": "string"}, "v": {"type": "integer"}},
    }
    schema = rules(
        "true",
        keyed={
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"],
            "items": item,
        },
        plain={"type": "array", "items": item},
    )
    old = {"keyed": [{"k": "a", "v": 2}], "plain": [{"k": "a", "v": 2}]}
    new = {"keyed": [{"k": "b", "v": 0}, {"k": "a", "v": 1}], "plain": [{"k": "a", "v": 1}]}
    errors = cel_errors(schema, {"spec": new}, {"spec": old})
    # Only the keyed list's items have an old value to compare with.
    assert [e.field for e in errors] == ["spec.keyed[1]"]


def test_rules_that_do_not_compile_and_rules_it_cannot_run() -> None:
    schema = rules("self.s ==", "nofunc(self.s)", "quantity('1') == quantity('1')")
    causes = compile_errors(schema, "spec.validation.openAPIV3Schema")
    where = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations"
    assert [c.field for c in causes] == [f"{where}[0].rule", f"{where}[1].rule"]
    assert causes[1].detail == (
        "compilation failed: ERROR: <input>:1:7: undeclared reference to 'nofunc' "
        "(in container '')\n | nofunc(self.s)\n | ......^"
    )
    with pytest.raises(UnsupportedRule, match=r"quantity\(\)"):
        cel_errors(rules("quantity('1') == quantity('1')"), {"spec": {}}, None)
    assert has_rules(schema)
    assert not has_rules({"type": "object"})
