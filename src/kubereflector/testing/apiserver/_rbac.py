"""What a user may do (authorization): kube-apiserver's RBAC authorizer over the
emulator's Roles, ClusterRoles, RoleBindings and ClusterRoleBindings.

Private to :mod:`kubereflector.testing.apiserver`. Pure functions over the store:
no I/O, no awaiting (each decision reads the objects as they are at that moment;
kube-apiserver reads them from an informer, so its decisions lag a write by a few
milliseconds). Ported from kube v1.28:

* :func:`request_attributes`: ``RequestInfoFactory.NewRequestInfo`` (the verb from
  the method and path, ``list``/``watch`` for a collection ``GET``, a
  ``metadata.name`` field selector naming the object, ``deletecollection``, the
  namespace of ``/api/v1/namespaces/{name}`` being ``name``);
* :func:`authorize`: the ``system:masters`` group first (allowed before RBAC, as
  kube's privileged-group authorizer), then ``DefaultRuleResolver.VisitRulesFor``:
  every ClusterRoleBinding, then the RoleBindings of the request's namespace, each
  that names the user (``User``), one of its groups (``Group``) or its
  ServiceAccount (``ServiceAccount``, whose namespace defaults to the binding's)
  contributes the rules of its Role or ClusterRole; the first rule that matches
  (verbs, API groups, resources with ``*`` and ``*/subresource``, resourceNames,
  nonResourceURLs with a trailing ``*``) allows, naming its binding in the reason;
  a binding whose role is missing adds ``RBAC: ... not found`` to the reason of a
  denial;
* :func:`forbidden`: the 403 ``Status`` kube answers with, word for word.

Not emulated: aggregated ClusterRoles (kube-controller-manager fills them in; the
real server of the integration suite runs without one either), escalation checks
on writes of roles and bindings (``escalate``/``bind``), impersonation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ...errors import failure_status
from ...selectors import FieldSelector
from ._rbac_validation import RBAC_GROUP, default_binding
from ._records import Bucket
from ._resources import ServedResource
from ._store import Store
from ._users import AUTHENTICATED, MASTERS, SERVICE_ACCOUNT_PREFIX, UserInfo

__all__ = [
    "BOOTSTRAP_BINDINGS",
    "BOOTSTRAP_CLUSTER_ROLES",
    "RBAC_RESOURCES",
    "Attributes",
    "Decision",
    "authorize",
    "forbidden",
    "forbidden_message",
    "install",
    "request_attributes",
    "rule_allows",
]

GROUP: Final = RBAC_GROUP
_SPECIAL_VERBS: Final = frozenset({"proxy", "watch"})
_NAMESPACE_SUBRESOURCES: Final = frozenset({"status", "finalize"})
_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_METHOD_VERBS: Final = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


def _rbac_resource(plural: str, kind: str, *, namespaced: bool) -> ServedResource:
    return ServedResource(
        GROUP, "v1", plural, kind, namespaced=namespaced, builtin=True, generation=False
    )


ROLES: Final = _rbac_resource("roles", "Role", namespaced=True)
ROLE_BINDINGS: Final = _rbac_resource("rolebindings", "RoleBinding", namespaced=True)
CLUSTER_ROLES: Final = _rbac_resource("clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS: Final = _rbac_resource(
    "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
RBAC_RESOURCES: Final = (ROLES, ROLE_BINDINGS, CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS)


@dataclass(frozen=True, slots=True)
class Attributes:
    """One request as an authorizer sees it (kube's ``authorizer.Attributes``)."""

    user: UserInfo
    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    """Allowed or not, and kube's reason (``""`` when it gives none)."""

    allowed: bool
    reason: str = ""


# -- the request ------------------------------------------------------------------------------


def request_attributes(
    method: str, path: str, query: Mapping[str, str], user: UserInfo
) -> Attributes:
    """The attributes of a request (kube's ``NewRequestInfo``): ``query`` is its
    query string (``watch``, ``fieldSelector`` matter)."""
    verb = method.lower()
    parts = path.strip("/").split("/") if path.strip("/") else []
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return Attributes(user, verb, False, path=path)
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(parts) < 3:
            return Attributes(user, verb, False, path=path)
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]
    if parts[0] in _SPECIAL_VERBS:
        if len(parts) < 2:
            # kube fails to parse such a path and authorizes it as what it made of it
            return Attributes(user, verb, True, path=path, api_group=group, api_version=version)
        verb, parts = parts[0], parts[1:]
    else:
        verb = _METHOD_VERBS.get(method.upper(), "")
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        verb = "watch" if _watching(query) else "list"
        name = _name_from_field_selector(query.get("fieldSelector"))
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(
        user,
        verb,
        True,
        path=path,
        api_group=group,
        api_version=version,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
    )


def _watching(query: Mapping[str, str]) -> bool:
    value = query.get("watch")
    if value is None:
        return False
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return value.lower() not in ("false", "0")  # kube's fallback for an unparsable value


def _name_from_field_selector(text: str | None) -> str:
    if not text:
        return ""
    try:
        selector = FieldSelector.parse(text)
    except ValueError:
        return ""
    for requirement in selector.requirements:
        if requirement.field == "metadata.name" and requirement.operator == "=":
            name = requirement.value
            if name in (".", "..") or "/" in name or "%" in name:
                return ""
            return name
    return ""


# -- the rules --------------------------------------------------------------------------------


def _strings(rule: Mapping[str, Any], key: str) -> Sequence[str]:
    values = rule.get(key)
    return [v for v in values if isinstance(v, str)] if isinstance(values, list) else ()


def rule_allows(attrs: Attributes, rule: Mapping[str, Any]) -> bool:
    """Whether the PolicyRule ``rule`` (a dict as stored) allows the request
    (kube's ``RuleAllows``)."""
    verbs = _strings(rule, "verbs")
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        path = attrs.path
        for url in _strings(rule, "nonResourceURLs"):
            if url in ("*", path) or (url.endswith("*") and path.startswith(url.rstrip("*"))):
                return True
        return False
    groups = _strings(rule, "apiGroups")
    if "*" not in groups and attrs.api_group not in groups:
        return False
    sub = attrs.subresource
    combined = f"{attrs.resource}/{sub}" if sub else attrs.resource
    if not any(
        r in ("*", combined) or (sub and len(r) == len(sub) + 2 and r == f"*/{sub}")
        for r in _strings(rule, "resources")
    ):
        return False
    names = _strings(rule, "resourceNames")
    return not names or attrs.name in names


def _subject_applies(user: UserInfo, subject: Mapping[str, Any], namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(user.name == name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and user.name == f"{SERVICE_ACCOUNT_PREFIX}{sa_namespace}:{name}"
    return False


def _describe_subject(subject: Mapping[str, Any], namespace: str) -> str:
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or namespace}"'
    return f'{kind} "{name}"'


def _objects(store: Store, info: ServedResource, namespace: str | None) -> Iterator[Any]:
    bucket: Bucket | None = store.buckets.get(info.group_resource)
    if bucket is not None:
        for record in bucket.iter_namespace(namespace):
            yield record.obj


def _role_rules(
    store: Store, ref: Mapping[str, Any], namespace: str
) -> tuple[Sequence[Any] | None, str | None]:
    """The rules a binding's roleRef points at, or an error as kube words it."""
    kind, name = ref.get("kind"), str(ref.get("name", ""))
    if kind == "Role":
        bucket = store.buckets.get(ROLES.group_resource)
        record = bucket.objects.get(f"{namespace}/{name}") if bucket is not None else None
        if record is None:
            return None, f'role.{GROUP} "{name}" not found'
    elif kind == "ClusterRole":
        bucket = store.buckets.get(CLUSTER_ROLES.group_resource)
        record = bucket.objects.get(name) if bucket is not None else None
        if record is None:
            return None, f'clusterrole.{GROUP} "{name}" not found'
    else:
        return None, f'unsupported role reference kind: "{kind}"'
    rules = record.obj.get("rules")
    return (rules if isinstance(rules, list) else []), None


def authorize(store: Store, attrs: Attributes) -> Decision:
    """Kube's decision on ``attrs``: ``system:masters`` first, then RBAC."""
    user = attrs.user
    if MASTERS in user.groups:
        return Decision(True)
    errors: list[str] = []
    scopes: list[tuple[str, ServedResource, str | None]] = [("", CLUSTER_ROLE_BINDINGS, None)]
    if attrs.namespace:
        scopes.append((attrs.namespace, ROLE_BINDINGS, attrs.namespace))
    for namespace, resource, listed in scopes:
        for binding in _objects(store, resource, listed):
            subjects = binding.get("subjects")
            if not isinstance(subjects, list):
                continue
            subject = next(
                (
                    s
                    for s in subjects
                    if isinstance(s, dict) and _subject_applies(user, s, namespace)
                ),
                None,
            )
            if subject is None:
                continue
            ref = binding.get("roleRef")
            rules, error = _role_rules(store, ref if isinstance(ref, dict) else {}, namespace)
            if rules is None:
                errors.append(error or "")
                continue
            for rule in rules:
                if isinstance(rule, dict) and rule_allows(attrs, rule):
                    return Decision(True, f"RBAC: allowed by {_source(binding, subject, ref)}")
    if not errors:
        return Decision(False)
    distinct = list(dict.fromkeys(errors))
    joined = distinct[0] if len(distinct) == 1 else "[" + ", ".join(distinct) + "]"
    return Decision(False, f"RBAC: {joined}")


def _source(binding: Mapping[str, Any], subject: Mapping[str, Any], ref: Any) -> str:
    meta = binding.get("metadata") or {}
    name, namespace = meta.get("name", ""), meta.get("namespace", "")
    role = f'{ref.get("kind", "")} "{ref.get("name", "")}"'
    if namespace:
        who = _describe_subject(subject, namespace)
        return f'RoleBinding "{name}/{namespace}" of {role} to {who}'
    return f'ClusterRoleBinding "{name}" of {role} to {_describe_subject(subject, "")}'


# -- the answer -------------------------------------------------------------------------------


def _sanitize(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def forbidden_message(attrs: Attributes) -> str:
    """What the user may not do, as kube's ``forbiddenMessage`` words it."""
    who = f'User "{attrs.user.name}"'
    if not attrs.resource_request:
        return f'{who} cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return (
        f'{who} cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" {where}'
    )


def forbidden(attrs: Attributes, reason: str) -> dict[str, Any]:
    """The 403 ``Status`` of a refused request (kube's ``responsewriters.Forbidden``)."""
    message = _sanitize(forbidden_message(attrs))
    if reason:
        message = f"{message}: {reason}"
    group, resource = attrs.api_group, attrs.resource
    if not group and not resource:
        return failure_status(403, "Forbidden", f"forbidden: {message}", {})
    qualified = f"{resource}.{group}" if group else resource
    details: dict[str, Any] = {}
    if attrs.name:
        details["name"] = attrs.name
        text = f'{qualified} "{attrs.name}" is forbidden: {message}'
    else:
        text = f"{qualified} is forbidden: {message}"
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource
    return failure_status(403, "Forbidden", text, details)


# -- the bootstrap policy -----------------------------------------------------------------------

_BOOTSTRAP_META: Final = {
    "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
}
_HEALTH_URLS: Final = ["/livez", "/readyz", "/healthz", "/version", "/version/"]
BOOTSTRAP_CLUSTER_ROLES: Final[dict[str, list[dict[str, Any]]]] = {
    "cluster-admin": [
        {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
        {"verbs": ["*"], "nonResourceURLs": ["*"]},
    ],
    "system:discovery": [
        {
            "verbs": ["get"],
            "nonResourceURLs": sorted(
                [*_HEALTH_URLS, "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*"]
            ),
        }
    ],
    "system:basic-user": [
        {
            "verbs": ["create"],
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        },
        {
            "verbs": ["create"],
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["selfsubjectreviews"],
        },
    ],
    "system:public-info-viewer": [{"verbs": ["get"], "nonResourceURLs": sorted(_HEALTH_URLS)}],
}
"""The ClusterRoles of kube's bootstrap policy the emulator has (kube has ~60, most for
its own components), with kube's rules."""
BOOTSTRAP_BINDINGS: Final[dict[str, tuple[str, ...]]] = {
    "cluster-admin": (MASTERS,),
    "system:discovery": (AUTHENTICATED,),
    "system:basic-user": (AUTHENTICATED,),
    "system:public-info-viewer": (AUTHENTICATED, "system:unauthenticated"),
}
"""ClusterRoleBinding (named as its ClusterRole) -> the groups it binds."""


def install(store: Store) -> None:
    """Serve the RBAC resources on ``store`` and store kube's bootstrap policy (once
    per store)."""
    for info in RBAC_RESOURCES:
        store.register(info)
    for info in (ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS):
        store.admission[info.group_resource] = default_binding
    roles = store.buckets[CLUSTER_ROLES.group_resource]
    bindings = store.buckets[CLUSTER_ROLE_BINDINGS.group_resource]
    for name, rules in BOOTSTRAP_CLUSTER_ROLES.items():
        meta = {"name": name, **_BOOTSTRAP_META}
        store.create(roles, {"metadata": meta, "rules": rules}, None)
    for name, groups in BOOTSTRAP_BINDINGS.items():
        body = {
            "metadata": {"name": name, **_BOOTSTRAP_META},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": g} for g in groups],
        }
        store.create(bindings, body, None)
