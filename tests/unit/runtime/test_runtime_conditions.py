"""Status conditions: lastTransitionTime moves only when the status changes,
observedGeneration comes from the object, and the readers find what was set."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from kubereflector.runtime import (
    find_condition,
    is_condition_false,
    is_condition_true,
    remove_condition,
    set_condition,
)

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
T1 = T0 + timedelta(minutes=5)


def foo(generation: int = 3) -> dict[str, Any]:
    return {"metadata": {"name": "foo", "generation": generation}, "spec": {}}


def test_a_new_condition_is_added_with_its_transition_time_and_generation() -> None:
    obj = foo()
    assert set_condition(obj, "Ready", "False", reason="Creating", message="0/3", now=T0)
    assert obj["status"]["conditions"] == [
        {
            "type": "Ready",
            "status": "False",
            "reason": "Creating",
            "message": "0/3",
            "lastTransitionTime": "2024-05-01T12:00:00Z",
            "observedGeneration": 3,
        }
    ]


def test_the_transition_time_moves_only_when_the_status_changes() -> None:
    obj = foo()
    set_condition(obj, "Ready", "False", reason="Creating", message="0/3", now=T0)
    # Same status, new reason and message: changed, but the transition time stays.
    assert set_condition(obj, "Ready", "False", reason="Scaling", message="2/3", now=T1)
    ready = find_condition(obj, "Ready")
    assert ready is not None
    assert (ready["reason"], ready["message"]) == ("Scaling", "2/3")
    assert ready["lastTransitionTime"] == "2024-05-01T12:00:00Z"
    # The same again: nothing changed, nothing to write.
    assert not set_condition(obj, "Ready", "False", reason="Scaling", message="2/3", now=T1)
    # A new status: the time moves.
    assert set_condition(obj, "Ready", "True", reason="Available", message="3/3", now=T1)
    ready = find_condition(obj, "Ready")
    assert ready is not None
    assert ready["lastTransitionTime"] == "2024-05-01T12:05:00Z"


def test_a_new_generation_is_a_change_even_with_the_same_status() -> None:
    obj = foo(generation=3)
    set_condition(obj, "Ready", "True", reason="Available", now=T0)
    obj["metadata"]["generation"] = 4
    assert set_condition(obj, "Ready", "True", reason="Available", now=T1)
    ready = find_condition(obj, "Ready")
    assert ready is not None
    assert ready["observedGeneration"] == 4
    assert ready["lastTransitionTime"] == "2024-05-01T12:00:00Z"


def test_conditions_of_a_list_and_the_readers() -> None:
    conditions: list[Any] = []
    set_condition(conditions, "Ready", "True", reason="Available", now="2024-01-01T00:00:00Z")
    set_condition(conditions, "Degraded", "False", reason="AllGood", observed_generation=7, now=T0)
    assert "observedGeneration" not in conditions[0]  # a list has no generation to take
    assert conditions[1]["observedGeneration"] == 7
    assert conditions[0]["lastTransitionTime"] == "2024-01-01T00:00:00Z"
    assert is_condition_true(conditions, "Ready")
    assert not is_condition_false(conditions, "Ready")
    assert is_condition_false(conditions, "Degraded")
    assert not is_condition_true(conditions, "Missing")
    assert not is_condition_false(conditions, "Missing")
    set_condition(conditions, "Ready", "Unknown", reason="Probing", now=T0)
    assert not is_condition_true(conditions, "Ready")
    assert not is_condition_false(conditions, "Ready")
    assert remove_condition(conditions, "Ready")
    assert not remove_condition(conditions, "Ready")
    assert [c["type"] for c in conditions] == ["Degraded"]


def test_readers_of_an_object_without_status_and_removal_from_it() -> None:
    obj = foo()
    assert find_condition(obj, "Ready") is None
    assert not is_condition_true(obj, "Ready")
    assert not remove_condition(obj, "Ready")
    assert "status" not in obj  # reading made nothing


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"type": "", "status": "True", "reason": "R"}, ValueError, "needs a type"),
        ({"type": "Ready", "status": "true", "reason": "R"}, ValueError, "not 'true'"),
        ({"type": "Ready", "status": "True", "reason": ""}, ValueError, "reason must be"),
    ],
)
def test_conditions_the_api_server_would_refuse_are_refused(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        set_condition(foo(), **kwargs)


def test_a_naive_time_and_a_malformed_status_are_refused() -> None:
    with pytest.raises(ValueError, match="aware datetime"):
        set_condition(foo(), "Ready", "True", reason="R", now=datetime(2024, 1, 1))
    with pytest.raises(TypeError, match="not a list"):
        set_condition({"status": {"conditions": {}}}, "Ready", "True", reason="R")
