"""Status conditions: ``status.conditions`` as Kubernetes API conventions define them
(apimachinery's ``meta.SetStatusCondition`` and friends).

A condition is one aspect of an object's state: ``type`` (``Ready``), ``status``
(``"True"``, ``"False"`` or ``"Unknown"``), a CamelCase ``reason``, a human ``message``,
``lastTransitionTime`` (when ``status`` last changed) and ``observedGeneration`` (the
``metadata.generation`` the condition was computed from: a reader compares it with
the object's generation to tell a current condition from a stale one)::

    foo = copy.deepcopy(cached_foo)
    if set_condition(foo, "Ready", "True", reason="DeploymentAvailable",
                     message="3 of 3 replicas available"):
        await foos.patch(name, {"status": {"conditions": foo["status"]["conditions"]}},
                         subresource="status")

Each function takes either the object (its ``status.conditions``; :func:`set_condition`
makes both if missing and takes ``observedGeneration`` from the object's
``metadata.generation``) or the conditions list itself. The writers change it in
place: give them your own copy, never an object from the cache. Pure functions
otherwise; thread-safe on distinct objects.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from ..models.meta_v1 import Condition

__all__ = [
    "ConditionStatus",
    "Conditions",
    "find_condition",
    "is_condition_false",
    "is_condition_true",
    "remove_condition",
    "set_condition",
]

ConditionStatus: TypeAlias = Literal["True", "False", "Unknown"]
"""A condition's ``status``: the three values the API conventions allow."""

Conditions: TypeAlias = "Mapping[str, Any] | Sequence[Condition]"
"""Where conditions are: an object (its ``status.conditions``) or the list itself."""

_STATUSES = ("True", "False", "Unknown")


def _rfc3339(now: datetime | str | None) -> str:
    """``metav1.Time``: RFC 3339 in UTC, to the second."""
    if isinstance(now, str):
        return now
    moment = now if now is not None else datetime.now(timezone.utc)
    if moment.tzinfo is None:
        raise ValueError("now must be an aware datetime (with a timezone), or a string")
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _list_of(conditions: Conditions, *, create: bool) -> list[Any] | None:
    """The conditions list of an object or the list itself; made (with ``status``)
    when ``create`` and missing; ``None`` when missing and not made."""
    if isinstance(conditions, list):
        return conditions
    if not isinstance(conditions, Mapping):
        raise TypeError(
            f"conditions are an object or a list of conditions, not {type(conditions).__name__}"
        )
    status = conditions.get("status")
    if status is None:
        if not create:
            return None
        if not isinstance(conditions, MutableMapping):
            raise TypeError("the object is read-only: set conditions on a copy of your own")
        status = conditions["status"] = {}
    if not isinstance(status, Mapping):
        raise TypeError(f"the object's status is not a mapping but {type(status).__name__}")
    found = status.get("conditions")
    if found is None:
        if not create:
            return None
        if not isinstance(status, MutableMapping):
            raise TypeError("the object is read-only: set conditions on a copy of your own")
        found = status["conditions"] = []
    if not isinstance(found, list):
        raise TypeError(f"status.conditions is not a list but {type(found).__name__}")
    return found


def find_condition(conditions: Conditions, type: str) -> Condition | None:
    """The condition of ``type`` (``None`` if there is none); the object's own entry."""
    found = _list_of(conditions, create=False)
    for condition in found or ():
        if isinstance(condition, Mapping) and condition.get("type") == type:
            return condition  # type: ignore[return-value]
    return None


def is_condition_true(conditions: Conditions, type: str) -> bool:
    """Whether the condition of ``type`` exists with status ``"True"``."""
    condition = find_condition(conditions, type)
    return condition is not None and condition.get("status") == "True"


def is_condition_false(conditions: Conditions, type: str) -> bool:
    """Whether the condition of ``type`` exists with status ``"False"`` (an absent or
    ``"Unknown"`` condition is neither true nor false)."""
    condition = find_condition(conditions, type)
    return condition is not None and condition.get("status") == "False"


def set_condition(
    conditions: Conditions,
    type: str,
    status: ConditionStatus,
    *,
    reason: str,
    message: str = "",
    observed_generation: int | None = None,
    now: datetime | str | None = None,
) -> bool:
    """Set the condition of ``type``; returns whether anything changed (so whether the
    status needs writing).

    ``lastTransitionTime`` is set to ``now`` (default: the current time, UTC) when the
    condition is new or its ``status`` changes, and kept otherwise: a condition that
    stays ``"True"`` with a new message keeps the time it became true
    (apimachinery's ``SetStatusCondition``). ``reason``, ``message`` and
    ``observedGeneration`` are set as given. ``observed_generation`` defaults to
    ``metadata.generation`` when ``conditions`` is an object (left out when it has
    none) and to leaving the field as it is when it is a list.

    Raises ``ValueError`` for an empty ``type`` or ``reason`` and a ``status`` other
    than ``"True"``, ``"False"`` and ``"Unknown"`` (the API server refuses them on
    kinds that use the standard condition schema), ``TypeError`` for a read-only
    object or a malformed ``status``.
    """
    if not isinstance(type, str) or not type:
        raise ValueError("a condition needs a type (a non-empty string such as 'Ready')")
    if status not in _STATUSES:
        raise ValueError(
            f"condition {type!r}: status must be 'True', 'False' or 'Unknown', not {status!r}"
        )
    if not isinstance(reason, str) or not reason:
        raise ValueError(
            f"condition {type!r}: reason must be a non-empty CamelCase string "
            "(the API server requires one)"
        )
    if not isinstance(message, str):
        raise TypeError(f"condition {type!r}: message must be a string")
    if observed_generation is None and isinstance(conditions, Mapping):
        meta = conditions.get("metadata")
        generation = meta.get("generation") if isinstance(meta, Mapping) else None
        if isinstance(generation, int) and not isinstance(generation, bool):
            observed_generation = generation
    found = _list_of(conditions, create=True)
    assert found is not None
    existing = find_condition(found, type)
    if existing is None:
        condition: dict[str, Any] = {
            "type": type,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": _rfc3339(now),
        }
        if observed_generation is not None:
            condition["observedGeneration"] = observed_generation
        found.append(condition)
        return True
    current: MutableMapping[str, Any] = existing  # type: ignore[assignment]
    changed = False
    if current.get("status") != status:
        current["status"] = status
        current["lastTransitionTime"] = _rfc3339(now)
        changed = True
    for field, value in (("reason", reason), ("message", message)):
        if current.get(field) != value:
            current[field] = value
            changed = True
    if observed_generation is not None and current.get("observedGeneration") != (
        observed_generation
    ):
        current["observedGeneration"] = observed_generation
        changed = True
    return changed


def remove_condition(conditions: Conditions, type: str) -> bool:
    """Remove the condition of ``type``; returns whether there was one."""
    found = _list_of(conditions, create=False)
    if not found:
        return False
    for i, condition in enumerate(found):
        if isinstance(condition, Mapping) and condition.get("type") == type:
            del found[i]
            return True
    return False
