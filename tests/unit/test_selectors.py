"""Label and field selectors (``kubereflector.selectors``): kube's grammar and semantics."""

from __future__ import annotations

import pickle
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubereflector import (
    FieldRequirement,
    FieldSelector,
    LabelRequirement,
    LabelSelector,
    label_selector_from_dict,
)

# -- label selectors: matching ----------------------------------------------------------------

MATCH_CASES: list[tuple[str, dict[str, str], bool]] = [
    ("", {}, True),
    ("   ", {"a": "b"}, True),
    ("a=b", {"a": "b"}, True),
    ("a=b", {"a": "c"}, False),
    ("a=b", {}, False),
    ("a==b", {"a": "b"}, True),
    ("a!=b", {"a": "b"}, False),
    ("a!=b", {"a": "c"}, True),
    ("a!=b", {}, True),  # absent satisfies !=
    ("a in (x,y)", {"a": "y"}, True),
    ("a in (x,y)", {"a": "z"}, False),
    ("a in (x,y)", {}, False),
    ("a in (x)", {"a": "x"}, True),
    ("a notin (x,y)", {"a": "x"}, False),
    ("a notin (x,y)", {"a": "z"}, True),
    ("a notin (x,y)", {}, True),  # absent satisfies notin
    ("a notin (x)", {"a": "x"}, False),
    ("a", {"a": ""}, True),
    ("a", {"b": "a"}, False),
    ("!a", {"b": "1"}, True),
    ("!a", {"a": ""}, False),
    ("a=", {"a": ""}, True),  # kube: an empty value after = is the empty value
    ("a=", {}, False),
    ("a in ()", {"a": ""}, True),  # kube: () holds the empty value
    ("a in (x,)", {"a": ""}, True),
    ("a>5", {"a": "6"}, True),
    ("a>5", {"a": "5"}, False),
    ("a>5", {"a": "six"}, False),
    ("a>5", {}, False),
    ("a<5", {"a": "-1"}, True),
    ("a=b,c!=d", {"a": "b", "c": "e"}, True),
    ("a=b,c!=d", {"a": "b", "c": "d"}, False),
    ("  a = b ,  c  in ( x , y ) , ! d  ", {"a": "b", "c": "y"}, True),
    ("app.kubernetes.io/name=web", {"app.kubernetes.io/name": "web"}, True),
    ("app.kubernetes.io/name=web", {"name": "web"}, False),
    ("a notin (in,notin)", {"a": "in"}, False),  # keywords are plain words in value sets
    ("a=in", {"a": "in"}, True),
]


@pytest.mark.parametrize(("text", "labels", "expected"), MATCH_CASES)
def test_label_selector_matches_like_kube(
    text: str, labels: dict[str, str], expected: bool
) -> None:
    selector = LabelSelector.parse(text)
    assert selector.matches(labels) is expected
    # Each requirement agrees with the whole when it stands alone.
    for req in selector.requirements:
        assert LabelSelector([req]).matches(labels) is req.matches(labels)


def test_matches_accepts_none_for_no_labels() -> None:
    assert LabelSelector.parse("!a").matches(None)
    assert not LabelSelector.parse("a").matches(None)


# -- label selectors: canonical form ----------------------------------------------------------

CANONICAL_CASES = [
    ("", ""),
    ("a==b", "a=b"),
    ("b=1,a=2", "a=2,b=1"),
    ("a in (y, x, x)", "a in (x,y)"),
    ("  !c , a notin (z) ", "a notin (z),!c"),
    ("a>3", "a>3"),
    ("x.io/k=v,k", "k,x.io/k=v"),
    ("a in (x,)", "a in (,x)"),
    ("a=", "a="),
]


@pytest.mark.parametrize(("text", "canonical"), CANONICAL_CASES)
def test_str_is_canonical_and_round_trips(text: str, canonical: str) -> None:
    selector = LabelSelector.parse(text)
    assert str(selector) == canonical
    again = LabelSelector.parse(str(selector))
    assert again == selector
    assert hash(again) == hash(selector)
    assert repr(selector) == f"LabelSelector.parse({canonical!r})"


def test_order_does_not_matter_for_equality() -> None:
    assert LabelSelector.parse("a=1,b!=2,c") == LabelSelector.parse("c, b!=2, a==1")
    assert LabelSelector.parse("a=1") != LabelSelector.parse("a=2")
    assert LabelSelector.parse("a=1") != "a=1"


def test_requirements_are_exposed_in_canonical_order() -> None:
    selector = LabelSelector.parse("b in (2,1), a")
    assert selector.requirements == (
        LabelRequirement("a", "exists"),
        LabelRequirement("b", "in", ("1", "2")),
    )
    assert not selector.empty
    assert LabelSelector.parse("").empty
    assert LabelSelector.everything().empty


def test_selectors_are_immutable_and_picklable() -> None:
    selector = LabelSelector.parse("a=1,!b")
    with pytest.raises(AttributeError):
        selector._text = "x"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(selector)) == selector
    fields = FieldSelector.parse("metadata.name=a")
    with pytest.raises(AttributeError):
        fields._text = "x"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(fields)) == fields


def test_from_labels_is_an_equality_selector() -> None:
    selector = LabelSelector.from_labels({"b": "2", "a": "1"})
    assert str(selector) == "a=1,b=2"
    assert selector.matches({"a": "1", "b": "2", "c": "3"})
    assert not selector.matches({"a": "1"})


# -- label selectors: errors ------------------------------------------------------------------

ERROR_CASES = [
    ("a in (x", "missing ')' after 'a in (x'"),
    ("a in (x,y", "missing ')'"),
    ("a in x", "unexpected 'x' at position 5, expected '('"),
    ("a=b c", "unexpected 'c'"),
    ("a=b=c", "unexpected '='"),
    ("a=b,", "missing a label key after 'a=b,'"),
    (",a", "unexpected ','"),
    ("!a=b", "unexpected '='"),
    ("!", "missing a label key"),
    ("a notin", "missing '('"),
    ("in=a", "unexpected 'in'"),
    ("a in (x y)", "unexpected 'y'"),
    ("a (x)", "unexpected '('"),
    ("a>b", "exactly one integer value"),
    ("a<", "exactly one integer value"),
    ("-a=b", "name part of key '-a'"),
    ("A_/b=c", "prefix part of key 'A_/b'"),
    ("/b=c", "prefix part of key '/b' must be non-empty"),
    ("p/=c", "name part of key 'p/' must be non-empty"),
    ("k=-v", "invalid label value for key 'k'"),
    ("k=" + "v" * 64, "must be no more than 63 characters"),
    ("k" * 64 + "=v", "must be no more than 63 characters"),
    ("a" * 254 + "/k=v", "must be no more than 253 characters"),
]


@pytest.mark.parametrize(("text", "fragment"), ERROR_CASES)
def test_malformed_label_selectors_name_the_offending_part(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match="invalid label selector") as info:
        LabelSelector.parse(text)
    message = str(info.value)
    assert message.startswith(f'invalid label selector "{text}": ')
    assert fragment in message


def test_the_message_of_the_issue() -> None:
    with pytest.raises(ValueError, match="missing") as info:
        LabelSelector.parse("a in (x")
    assert str(info.value) == "invalid label selector \"a in (x\": missing ')' after 'a in (x'"


def test_longest_valid_keys_and_values_are_accepted() -> None:
    key = "a" * 253 + "/" + "b" * 63
    selector = LabelSelector.parse(f"{key}={'c' * 63}")
    assert selector.matches({key: "c" * 63})


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        LabelSelector.parse(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        FieldSelector.parse(1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "operator", "values", "fragment"),
    [
        ("a", "in", (), "can't be empty"),
        ("a", "=", ("x", "y"), "one single value"),
        ("a", "exists", ("x",), "must be empty"),
        ("a", "~", ("x",), "not a valid label selector operator"),
        ("a", "gt", ("1.5",), "integer"),
    ],
)
def test_requirement_validation(key: str, operator: Any, values: Any, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        LabelRequirement(key, operator, values)


def test_requirement_normalises_double_equals_and_values() -> None:
    req = LabelRequirement("a", "==", ("x",))  # type: ignore[arg-type]
    assert req.operator == "="
    assert LabelRequirement("a", "in", ("y", "x", "y")).values == ("x", "y")
    with pytest.raises(TypeError):
        LabelRequirement("a", "in", "xy")  # type: ignore[arg-type]


# -- metav1.LabelSelector -----------------------------------------------------------------------


def test_label_selector_from_dict() -> None:
    selector = label_selector_from_dict(
        {"app": "web"},
        [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "owner", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist", "values": []},
        ],
    )
    assert str(selector) == "app=web,env notin (prod),!legacy,owner,tier in (a,b)"
    assert selector.matches({"app": "web", "tier": "a", "owner": "me"})
    assert not selector.matches({"app": "web", "tier": "a", "owner": "me", "legacy": "1"})
    assert not selector.matches({"app": "web", "tier": "a", "owner": "me", "env": "prod"})
    assert label_selector_from_dict() == LabelSelector.everything()
    assert label_selector_from_dict({}, []).empty


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        (
            {"key": "a", "operator": "Equals", "values": ["x"]},
            "not a valid label selector operator",
        ),
        ({"key": "a", "operator": "In", "values": []}, "can't be empty"),
        ({"key": "a", "operator": "Exists", "values": ["x"]}, "must be empty"),
        ({"key": "-a", "operator": "Exists"}, "name part of key"),
    ],
)
def test_label_selector_from_dict_rejects_bad_expressions(
    expression: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        label_selector_from_dict(None, [expression])


@pytest.mark.parametrize(
    ("labels", "expressions", "fragment"),
    [
        # Shapes an object's spec.selector may have, found by tests/fuzz.
        (1, None, "matchLabels must be a mapping, not int"),
        ({"": []}, None, "matchLabels must map strings to strings"),
        (None, "0", "matchExpressions must be a list, not str"),
        (None, ["x"], "a matchExpression must be a mapping, not str"),
        (None, [{"operator": []}], "not a valid label selector operator"),
        (None, [{"key": 1, "operator": "Exists"}], "key must be a string"),
        (None, [{"key": "a", "operator": "In", "values": "xy"}], "must be a list of strings"),
    ],
)
def test_label_selector_from_dict_rejects_any_shape_with_value_error(
    labels: Any, expressions: Any, fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        label_selector_from_dict(labels, expressions)


# -- field selectors --------------------------------------------------------------------------

POD: dict[str, Any] = {
    "metadata": {"name": "web-1", "namespace": "prod"},
    "spec": {"nodeName": "node-a", "hostNetwork": False, "priority": 7},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("metadata.name=web-1", True),
        ("metadata.name==web-1", True),
        ("metadata.name!=web-1", False),
        ("metadata.name=web-2", False),
        ("metadata.namespace=prod,status.phase=Running", True),
        ("metadata.namespace=prod,status.phase!=Running", False),
        ("spec.nodeName=node-a", True),
        ("spec.schedulerName=", True),  # an absent field is ""
        ("spec.schedulerName!=", False),
        ("spec.hostNetwork=false", True),
        ("spec.priority=7", True),
        ("spec.nodeName.deeper=x", False),
        (" metadata.name = web-1 , ", True),
    ],
)
def test_field_selector_matches_objects(text: str, expected: bool) -> None:
    assert FieldSelector.parse(text).matches_object(POD) is expected


def test_field_selector_matches_field_sets() -> None:
    selector = FieldSelector.parse("metadata.name=a,spec.nodeName!=n1")
    assert selector.matches({"metadata.name": "a", "spec.nodeName": "n2"})
    assert selector.matches({"metadata.name": "a"})
    assert not selector.matches({"metadata.name": "a", "spec.nodeName": "n1"})
    assert selector.fields == frozenset({"metadata.name", "spec.nodeName"})


def test_field_selector_escapes_and_canonical_form() -> None:
    selector = FieldSelector.parse(r"metadata.name=a\,b\=c\\d,metadata.namespace==ns")
    assert selector.requirements == (
        FieldRequirement("metadata.name", "=", "a,b=c\\d"),
        FieldRequirement("metadata.namespace", "=", "ns"),
    )
    assert str(selector) == r"metadata.name=a\,b\=c\\d,metadata.namespace=ns"
    assert FieldSelector.parse(str(selector)) == selector
    assert selector.matches_object({"metadata": {"name": "a,b=c\\d", "namespace": "ns"}})
    assert repr(FieldSelector.parse("b=1,a!=2")) == "FieldSelector.parse('a!=2,b=1')"
    assert FieldSelector.parse("").empty
    assert FieldSelector.everything() == FieldSelector.parse(" ")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("metadata.name", "cannot understand 'metadata.name'"),
        ("=x", "has no field name"),
        (r"a=b\x", "invalid escape sequence"),
        ("a=b=c", "unescaped '='"),
        ("a=b,c", "cannot understand 'c'"),
    ],
)
def test_malformed_field_selectors(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match="invalid field selector") as info:
        FieldSelector.parse(text)
    assert fragment in str(info.value)


def test_field_requirement_validation() -> None:
    with pytest.raises(ValueError, match="not a valid field selector operator"):
        FieldRequirement("a", "in", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a field name"):
        FieldRequirement("", "=", "x")
    assert FieldRequirement("a", "==", "x").operator == "="  # type: ignore[arg-type]


# -- property: any selector built from parts round-trips through its text ---------------------

_name = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8)
_value = st.one_of(st.just(""), _name)
_key = st.one_of(_name, st.builds(lambda p, n: f"{p}.io/{n}", _name, _name))


@st.composite
def _requirement(draw: st.DrawFn) -> LabelRequirement:
    key = draw(_key)
    op = draw(st.sampled_from(["=", "!=", "in", "notin", "exists", "!", "gt", "lt"]))
    if op in ("exists", "!"):
        return LabelRequirement(key, op)
    if op in ("gt", "lt"):
        return LabelRequirement(key, op, (str(draw(st.integers(-100, 100))),))
    if op in ("in", "notin"):
        return LabelRequirement(key, op, tuple(draw(st.lists(_value, min_size=1, max_size=3))))
    return LabelRequirement(key, op, (draw(_value),))


@given(st.lists(_requirement(), max_size=5), st.dictionaries(_key, _value, max_size=4))
def test_round_trip_and_semantics_property(
    requirements: list[LabelRequirement], labels: dict[str, str]
) -> None:
    selector = LabelSelector(requirements)
    parsed = LabelSelector.parse(str(selector))
    assert parsed == selector
    assert str(parsed) == str(selector)
    assert parsed.matches(labels) == all(r.matches(labels) for r in requirements)


@pytest.mark.parametrize("field", ["a!", "\\", "a=b", "a,b", " a"])
def test_a_field_name_that_could_not_be_written_back_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match="invalid field name"):
        FieldRequirement(field, "=", "x")


@pytest.mark.parametrize("text", ["a! =x", "\\ =x", "! =x"])
def test_field_selectors_found_by_fuzzing_are_refused(text: str) -> None:
    # "a! =x" parsed as field "a!", printed "a!=x", and read back as "a" != "x".
    with pytest.raises(ValueError, match="invalid field name"):
        FieldSelector.parse(text)
