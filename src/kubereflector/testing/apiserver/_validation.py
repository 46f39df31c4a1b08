"""The emulator's validation: the checks kube-apiserver makes on objects and write
options before it stores anything.

Private to :mod:`kubereflector.testing.apiserver`. Pure functions; each raises
:class:`~._statuses.StatusError` with the 422 Invalid kube would answer.

Custom resources whose CRD has a schema get what kube's customresource strategy
checks, in its order: the metadata, the value against the structural schema
(:mod:`._schema`), embedded resources, ``x-kubernetes-list-type`` sets and maps, then
the CEL rules (:mod:`._cel`), which kube skips (with one more error saying so) when
the object already has a type, required, too-long or too-many error. An update of
the ``status`` subresource checks ``status`` against its own schema (field paths
relative to it, as kube reports them). A list whose old value already had
duplicates may keep them (kube's ratcheting of list types).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from ...errors import failure_status
from ...selectors import _label_key_error, _label_value_error
from ._cel import UnsupportedRule, cel_errors, has_rules
from ._rbac_validation import RBAC_CHECKS, RBAC_GROUP, path_segment_errors
from ._resources import ServedResource
from ._schema import BLOCKING_TYPES, NIL_PATH, embedded_errors, list_errors, schema_errors
from ._statuses import FieldError, StatusError, invalid

_encode: Final = msgspec.json.encode

_DNS1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
)
_FIELD_MANAGER_MAX: Final = 128
_EVENT_TEXT_MAX: Final = 128
_EVENT_NOTE_MAX: Final = 1024
_PROPAGATION_POLICIES: Final = ("Foreground", "Background", "Orphan")


# -- write options ------------------------------------------------------------------------------


def validate_options(
    kind: str,
    *,
    dry_run: Sequence[str] = (),
    field_manager: str | None = None,
    apply: bool = False,
    force: bool | None = None,
    propagation_policy: Any = None,
) -> None:
    """kube's checks of ``CreateOptions``/``UpdateOptions``/``PatchOptions``/``DeleteOptions``
    (``kind``): 422 naming the option."""
    errors = [FieldError("dryRun", "NotSupported", '"All"', v) for v in dry_run if v != "All"]
    if field_manager is not None:
        if len(field_manager) > _FIELD_MANAGER_MAX:
            errors.append(
                FieldError(
                    "fieldManager", "TooLong", f"may not be longer than {_FIELD_MANAGER_MAX}"
                )
            )
        elif not field_manager.isprintable():
            errors.append(
                FieldError("fieldManager", "Invalid", "must only contain printable characters")
            )
    if apply and not field_manager:
        errors.append(FieldError("fieldManager", "Required", "is required for apply patch"))
    if force is not None and not apply:
        errors.append(FieldError("force", "Forbidden", "may not be specified for non-apply patch"))
    if propagation_policy is not None and propagation_policy not in _PROPAGATION_POLICIES:
        supported = ", ".join(f'"{p}"' for p in _PROPAGATION_POLICIES)
        errors.append(
            FieldError("propagationPolicy", "NotSupported", supported, propagation_policy)
        )
    if errors:
        raise invalid(kind, "", errors, "meta.k8s.io")


# -- objects ------------------------------------------------------------------------------------


def validate_object(info: ServedResource, obj: Mapping[str, Any]) -> None:
    """kube's create validation of ``obj`` (its metadata, and what the resource
    checks itself); 422 Invalid listing every problem."""
    errors = _meta_errors(info, obj["metadata"])
    errors += _RESOURCE_CHECKS.get(info.group_resource, _no_errors)(obj, None)
    errors += _custom_resource_errors(info, obj, None, status=False)
    if errors:
        raise invalid(info.kind, obj["metadata"].get("name") or "", errors, info.group)


def validate_update(
    info: ServedResource,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    subresource: str | None = None,
) -> None:
    """kube's update validation (what create checks, what may not change, and no new
    finalizers on an object being deleted; of the ``status`` ``subresource``, its own
    rules); 422 Invalid."""
    meta = new["metadata"]
    errors = _meta_errors(info, meta)
    old_meta = old["metadata"]
    if old_meta.get("deletionTimestamp"):
        before = set(old_meta.get("finalizers") or ())
        added = [f for f in meta.get("finalizers") or () if f not in before]
        if added:
            found = "[]string{" + ", ".join(_encode(f).decode() for f in added) + "}"
            errors.append(
                FieldError(
                    "metadata.finalizers",
                    "Forbidden",
                    "no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers {found}",
                )
            )
    errors += _RESOURCE_CHECKS.get(info.group_resource, _no_errors)(new, old)
    errors += _custom_resource_errors(info, new, old, status=subresource == "status")
    if errors:
        raise invalid(info.kind, meta.get("name") or "", errors, info.group)


def _custom_resource_errors(
    info: ServedResource,
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    *,
    status: bool,
) -> list[FieldError]:
    """What kube's customresource strategy adds for a CRD with a schema (see above)."""
    schema = info.openapi_schema
    if info.builtin or not schema:
        return []
    errors: list[FieldError] = []
    if status:
        properties = schema.get("properties")
        status_schema = properties.get("status") if isinstance(properties, Mapping) else None
        if "status" in obj and isinstance(status_schema, Mapping):
            errors += schema_errors(status_schema, obj["status"])
    else:
        errors += schema_errors(schema, obj)
        errors += embedded_errors(schema, obj)
    if old is None or not list_errors(schema, old):
        errors += list_errors(schema, obj)
    if not has_rules(schema):
        return errors
    if any(e.type in BLOCKING_TYPES for e in errors):
        errors.append(
            FieldError(
                NIL_PATH,
                "Invalid",
                "some validation rules were not checked because the object was invalid; "
                "correct the existing errors to complete validation",
            )
        )
        return errors
    try:
        errors += cel_errors(schema, obj, old)
    except UnsupportedRule as exc:
        raise StatusError(
            failure_status(500, "InternalError", f"kubereflector emulator: {exc}")
        ) from None
    return errors


def _meta_errors(info: ServedResource, meta: Mapping[str, Any]) -> list[FieldError]:
    name = meta.get("name") or ""
    errors: list[FieldError] = []
    if info.group == RBAC_GROUP and info.builtin:  # RBAC names are path segments
        errors = [
            FieldError("metadata.name", "Invalid", why, name) for why in path_segment_errors(name)
        ]
        return errors + _label_errors(meta)
    label_name = info.plural == "namespaces" and info.builtin
    pattern = _DNS1123_LABEL if label_name else _DNS1123_SUBDOMAIN
    limit = 63 if label_name else 253
    if len(name) > limit or not pattern.match(name):
        errors.append(
            FieldError(
                "metadata.name",
                "Invalid",
                f"a lowercase RFC 1123 {'label' if label_name else 'subdomain'} must "
                "consist of lower case alphanumeric characters, '-' or '.', and must "
                f"start and end with an alphanumeric character (at most {limit} characters)",
                name,
            )
        )
    return errors + _label_errors(meta)


def _label_errors(meta: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    labels = meta.get("labels")
    if labels is not None and not isinstance(labels, dict):
        errors.append(FieldError("metadata.labels", "Invalid", "must be a map", labels))
    for key, value in (labels or {}).items():
        problem = _label_key_error(key) if isinstance(key, str) else "keys are strings"
        if problem:
            errors.append(FieldError("metadata.labels", "Invalid", problem, key))
        elif not isinstance(value, str) or _label_value_error(value):
            why = _label_value_error(value) if isinstance(value, str) else "must be a string"
            errors.append(FieldError(f"metadata.labels[{key}]", "Invalid", str(why), value))
    return errors


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _no_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    return []


def _event_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    """events.k8s.io/v1 Events (kube's ``ValidateEventCreate``/``ValidateEventUpdate``;
    the field names are the core Event's where kube reports those)."""
    errors: list[FieldError] = []
    namespace = obj["metadata"].get("namespace") or ""
    regarding = _mapping(obj.get("regarding"))
    if not obj.get("eventTime"):
        errors.append(FieldError("eventTime", "Required", ""))
    else:
        if not regarding.get("namespace") and namespace not in ("default", "kube-system"):
            errors.append(
                FieldError(
                    "involvedObject.namespace",
                    "Invalid",
                    "does not match event.namespace",
                    regarding.get("namespace") or "",
                )
            )
        controller = obj.get("reportingController") or ""
        if not controller:
            errors.append(FieldError("reportingController", "Required", ""))
        elif not isinstance(controller, str) or _label_key_error(controller):
            errors.append(
                FieldError(
                    "reportingController",
                    "Invalid",
                    "must be a qualified name (an optional DNS subdomain prefix and '/', "
                    "then at most 63 alphanumerics, '-', '_' or '.')",
                    controller,
                )
            )
        for name in ("reportingInstance", "action", "reason"):
            value = obj.get(name) or ""
            if not value:
                errors.append(FieldError(name, "Required", ""))
            elif len(str(value)) > _EVENT_TEXT_MAX:
                errors.append(
                    FieldError(
                        name, "Invalid", f"can have at most {_EVENT_TEXT_MAX} characters", ""
                    )
                )
        if len(str(obj.get("note") or "")) > _EVENT_NOTE_MAX:
            errors.append(
                FieldError("note", "Invalid", f"can have at most {_EVENT_NOTE_MAX} characters", "")
            )
    event_type = obj.get("type") or ""
    if event_type not in ("Normal", "Warning"):
        errors.append(FieldError("type", "Invalid", f"has invalid value: {event_type}", ""))
    series = obj.get("series")
    if series is not None and (old is None or series != old.get("series")):
        count = series.get("count") if isinstance(series, dict) else None
        if not isinstance(count, int) or count < 2:
            errors.append(FieldError("series.count", "Invalid", "should be at least 2", ""))
        if not isinstance(series, dict) or not series.get("lastObservedTime"):
            errors.append(FieldError("series.lastObservedTime", "Required", ""))
    if old is not None:
        for name, reported in _EVENT_IMMUTABLE.items():
            if obj.get(name) != old.get(name):
                errors.append(FieldError(reported, "Invalid", "field is immutable", obj.get(name)))
    return errors


_EVENT_IMMUTABLE: Final = {
    "regarding": "involvedObject",
    "reason": "reason",
    "note": "message",
    "type": "type",
    "eventTime": "eventTime",
    "action": "action",
    "related": "related",
    "reportingController": "reportingController",
    "reportingInstance": "reportingInstance",
}


def _lease_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    """coordination.k8s.io/v1 Leases (kube's ``ValidateLeaseSpec``)."""
    spec = _mapping(obj.get("spec"))
    errors: list[FieldError] = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        errors.append(
            FieldError("spec.leaseDurationSeconds", "Invalid", "must be greater than 0", duration)
        )
    transitions = spec.get("leaseTransitions")
    if transitions is not None and (not isinstance(transitions, int) or transitions < 0):
        errors.append(
            FieldError(
                "spec.leaseTransitions",
                "Invalid",
                "must be greater than or equal to 0",
                transitions,
            )
        )
    return errors


_RESOURCE_CHECKS: Final = {
    "events.events.k8s.io": _event_errors,
    "leases.coordination.k8s.io": _lease_errors,
    **RBAC_CHECKS,
}
