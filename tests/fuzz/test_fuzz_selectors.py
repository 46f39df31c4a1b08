"""Fuzzing the selector parsers: any text parses into a selector that prints
back to an equal one, or raises ValueError; any structure a
``metav1.LabelSelector`` could hold gives a selector or ValueError."""

from __future__ import annotations

from typing import Any

from fuzzing import FUZZ, json_values
from hypothesis import given
from hypothesis import strategies as st

from kubereflector import FieldSelector, LabelSelector, label_selector_from_dict

# Text made mostly of the characters selectors are made of, so that the
# parsers get past their first token.
selector_text = st.lists(
    st.sampled_from([*"ab.-_/=!,()<>\\ ", " in ", " notin ", "x", "1"]) | st.characters(),
    max_size=30,
).map("".join)


@FUZZ
@given(text=selector_text)
def test_label_selectors(text: str) -> None:
    try:
        selector = LabelSelector.parse(text)
    except ValueError:
        return
    assert LabelSelector.parse(str(selector)) == selector
    selector.matches({"a": "b", "x": "1"})
    selector.matches({})


@FUZZ
@given(text=selector_text)
def test_field_selectors(text: str) -> None:
    try:
        selector = FieldSelector.parse(text)
    except ValueError:
        return
    assert FieldSelector.parse(str(selector)) == selector
    selector.matches({"metadata.name": "x"})
    selector.matches_object({"metadata": {"name": "x", "namespace": "y"}})


expression = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "key": st.sampled_from(["app", "a/b", "", "-x"]) | json_values,
            "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]) | json_values,
            "values": st.lists(st.sampled_from(["x", "y", ""]) | json_values, max_size=3)
            | json_values,
        },
    ),
)


@FUZZ
@given(
    match_labels=st.none()
    | st.dictionaries(st.text(max_size=8), st.text(max_size=8))
    | json_values,
    match_expressions=st.none() | st.lists(expression, max_size=3) | json_values,
)
def test_label_selectors_from_structures(match_labels: Any, match_expressions: Any) -> None:
    try:
        selector = label_selector_from_dict(match_labels, match_expressions)
    except ValueError:
        return
    assert LabelSelector.parse(str(selector)) == selector
