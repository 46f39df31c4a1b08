"""kube's defaulting and validation of RBAC objects (``pkg/apis/rbac/v1/defaults.go``,
``pkg/apis/rbac/validation``): a binding's ``roleRef.apiGroup`` and its ``User`` and
``Group`` subjects' ``apiGroup`` default to ``rbac.authorization.k8s.io``; names,
rules, role references and subjects are checked, and a binding's ``roleRef`` may not
change.

Private to :mod:`kubereflector.testing.apiserver`. Pure functions: the checks return
the :class:`~._statuses.FieldError` entries of kube's 422 Invalid for the object as
defaulted (kube defaults before it validates; the emulator validates first, then
:func:`default_binding` amends the object it stores).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._statuses import FieldError

__all__ = ["RBAC_CHECKS", "RBAC_GROUP", "default_binding", "path_segment_errors"]

RBAC_GROUP: Final = "rbac.authorization.k8s.io"
_SUBJECT_KINDS: Final = ("ServiceAccount", "User", "Group")


@dataclass(frozen=True, slots=True)
class _GoInvalid(FieldError):
    """An Invalid whose value kube prints with Go's ``%#v`` (a slice, a struct)."""

    go_value: str = ""

    def text(self) -> str:
        return f"Invalid value: {self.go_value}: {self.detail}"


def _go_strings(values: list[Any]) -> str:
    return "[]string{" + ", ".join(json.dumps(str(v), ensure_ascii=False) for v in values) + "}"


def _go_role_ref(ref: Mapping[str, Any]) -> str:
    fields = (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name"))
    inner = ", ".join(
        f"{go}:{json.dumps(str(ref.get(key) or ''), ensure_ascii=False)}" for go, key in fields
    )
    return f"rbac.RoleRef{{{inner}}}"


def path_segment_errors(name: str) -> list[str]:
    """What makes ``name`` no path segment (kube's ``IsValidPathSegmentName``): RBAC
    objects may be named ``system:discovery``, but not ``a/b``."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in name]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _supported(values: tuple[str, ...]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def _rule_errors(rules: Any, *, namespaced: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, rule in enumerate(_list(rules)):
        rule = _mapping(rule)
        path = f"rules[{i}]"
        if not _list(rule.get("verbs")):
            errors.append(
                FieldError(f"{path}.verbs", "Required", "verbs must contain at least one value")
            )
        urls = _list(rule.get("nonResourceURLs"))
        if urls:
            if namespaced:
                errors.append(
                    _GoInvalid(
                        f"{path}.nonResourceURLs",
                        "Invalid",
                        "namespaced rules cannot apply to non-resource URLs",
                        go_value=_go_strings(urls),
                    )
                )
            if any(_list(rule.get(k)) for k in ("apiGroups", "resources", "resourceNames")):
                errors.append(
                    _GoInvalid(
                        f"{path}.nonResourceURLs",
                        "Invalid",
                        "rules cannot apply to both regular resources and non-resource URLs",
                        go_value=_go_strings(urls),
                    )
                )
            continue
        if not _list(rule.get("apiGroups")):
            errors.append(
                FieldError(
                    f"{path}.apiGroups",
                    "Required",
                    "resource rules must supply at least one api group",
                )
            )
        if not _list(rule.get("resources")):
            errors.append(
                FieldError(
                    f"{path}.resources",
                    "Required",
                    "resource rules must supply at least one resource",
                )
            )
    return errors


def default_binding(obj: dict[str, Any]) -> None:
    """Set the defaults of a RoleBinding or ClusterRoleBinding (``obj`` is modified)."""
    ref = obj.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = RBAC_GROUP
    for subject in _list(obj.get("subjects")):
        kind = subject.get("kind") if isinstance(subject, dict) else None
        if kind in ("User", "Group") and not subject.get("apiGroup"):
            subject["apiGroup"] = RBAC_GROUP


def _defaulted(obj: Mapping[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = {
        "roleRef": dict(_mapping(obj.get("roleRef"))),
        "subjects": [dict(s) if isinstance(s, Mapping) else s for s in _list(obj.get("subjects"))],
    }
    default_binding(copied)
    return copied


def _role_errors(namespaced: bool) -> Callable[[Mapping[str, Any], Any], list[FieldError]]:
    def check(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
        return _rule_errors(obj.get("rules"), namespaced=namespaced)

    return check


def _binding_errors(namespaced: bool) -> Callable[[Mapping[str, Any], Any], list[FieldError]]:
    kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)

    def check(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
        errors: list[FieldError] = []
        obj = _defaulted(obj)
        ref = _mapping(obj.get("roleRef"))
        group, kind, name = ref.get("apiGroup", ""), ref.get("kind", ""), ref.get("name", "")
        if group != RBAC_GROUP:
            errors.append(FieldError("roleRef.apiGroup", "NotSupported", f'"{RBAC_GROUP}"', group))
        if kind not in kinds:
            errors.append(FieldError("roleRef.kind", "NotSupported", _supported(kinds), kind))
        if not name:
            errors.append(FieldError("roleRef.name", "Required", ""))
        else:
            errors.extend(
                FieldError("roleRef.name", "Invalid", why, name)
                for why in path_segment_errors(str(name))
            )
        for i, subject in enumerate(_list(obj.get("subjects"))):
            errors.extend(_subject_errors(_mapping(subject), f"subjects[{i}]", namespaced))
        if old is not None and _defaulted(old)["roleRef"] != ref:
            errors.append(
                _GoInvalid(
                    "roleRef", "Invalid", "cannot change roleRef", go_value=_go_role_ref(ref)
                )
            )
        return errors

    return check


def _subject_errors(subject: Mapping[str, Any], path: str, namespaced: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    kind, group = subject.get("kind", ""), subject.get("apiGroup", "")
    if not subject.get("name"):
        errors.append(FieldError(f"{path}.name", "Required", ""))
    if kind == "ServiceAccount":
        if group:
            errors.append(FieldError(f"{path}.apiGroup", "NotSupported", '""', group))
        if not namespaced and not subject.get("namespace"):
            errors.append(FieldError(f"{path}.namespace", "Required", ""))
    elif kind in ("User", "Group"):
        if group != RBAC_GROUP:
            errors.append(FieldError(f"{path}.apiGroup", "NotSupported", f'"{RBAC_GROUP}"', group))
    else:
        errors.append(FieldError(f"{path}.kind", "NotSupported", _supported(_SUBJECT_KINDS), kind))
    return errors


RBAC_CHECKS: Final = {
    f"roles.{RBAC_GROUP}": _role_errors(True),
    f"clusterroles.{RBAC_GROUP}": _role_errors(False),
    f"rolebindings.{RBAC_GROUP}": _binding_errors(True),
    f"clusterrolebindings.{RBAC_GROUP}": _binding_errors(False),
}
"""group_resource -> its checks, for :mod:`._validation` (``(obj, old or None)``)."""
