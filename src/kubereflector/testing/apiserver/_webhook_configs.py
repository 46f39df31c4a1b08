"""``admissionregistration.k8s.io/v1`` ``ValidatingWebhookConfiguration`` and
``MutatingWebhookConfiguration`` as objects: their resources, the defaults kube-apiserver
fills in (``failurePolicy: Fail``, ``matchPolicy: Equivalent``, empty selectors,
``timeoutSeconds: 10``, a rule's ``scope: "*"``, ``reinvocationPolicy: Never``), the
validation it makes (422 Invalid with kube's field paths and messages), and
:class:`HookSource`: the webhooks of the stored configurations, in the order kube
calls them (configurations by name, then each one's webhooks in order).

Private to :mod:`kubereflector.testing.apiserver`. Pure functions but :func:`install`,
which registers the resources on a store, and :class:`HookSource`, which reads it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from ...selectors import LabelSelector, label_selector_from_dict
from ._records import Bucket
from ._resources import ServedResource
from ._statuses import FieldError, invalid
from ._store import Store

__all__ = [
    "MUTATING_RESOURCE",
    "VALIDATING_RESOURCE",
    "Hook",
    "HookSource",
    "install",
]

_GROUP: Final = "admissionregistration.k8s.io"
VALIDATING_RESOURCE: Final = ServedResource(
    _GROUP,
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
    categories=("api-extensions",),
    builtin=True,
)
MUTATING_RESOURCE: Final = ServedResource(
    _GROUP,
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
    categories=("api-extensions",),
    builtin=True,
)

_OPERATIONS: Final = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_SCOPES: Final = ("*", "Cluster", "Namespaced")
_REVIEW_VERSIONS: Final = ("v1", "v1beta1")
_FULLY_QUALIFIED: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
)
_DNS1035: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")


def install(store: Store) -> None:
    """Serve both configuration resources on ``store``, defaulted and validated as kube
    does (once per store)."""
    for info in (VALIDATING_RESOURCE, MUTATING_RESOURCE):
        store.register(info)
        mutating = info is MUTATING_RESOURCE
        store.admission[info.group_resource] = _admit_mutating if mutating else _admit_validating


def _admit_validating(obj: dict[str, Any]) -> None:
    _admit(obj, mutating=False)


def _admit_mutating(obj: dict[str, Any]) -> None:
    _admit(obj, mutating=True)


def _admit(obj: dict[str, Any], *, mutating: bool) -> None:
    info = MUTATING_RESOURCE if mutating else VALIDATING_RESOURCE
    hooks = obj.get("webhooks")
    errors: list[FieldError] = []
    if hooks is None:
        hooks = []
    if not isinstance(hooks, list):
        raise invalid(
            info.kind,
            obj["metadata"].get("name") or "",
            [FieldError("webhooks", "Invalid", "must be a list", hooks)],
            info.group,
        )
    names: set[str] = set()
    for index, hook in enumerate(hooks):
        path = f"webhooks[{index}]"
        if not isinstance(hook, dict):
            errors.append(FieldError(path, "Invalid", "must be an object", hook))
            continue
        _default(hook, mutating=mutating)
        errors += _hook_errors(hook, path, mutating=mutating)
        name = hook.get("name")
        if isinstance(name, str) and name:
            if name in names:
                errors.append(FieldError(f"{path}.name", "Duplicate", "", name))
            names.add(name)
    if errors:
        raise invalid(info.kind, obj["metadata"].get("name") or "", errors, info.group)


def _default(hook: dict[str, Any], *, mutating: bool) -> None:
    """kube's defaults (``SetDefaults_ValidatingWebhook``/``_MutatingWebhook``)."""
    hook.setdefault("failurePolicy", "Fail")
    hook.setdefault("matchPolicy", "Equivalent")
    hook.setdefault("namespaceSelector", {})
    hook.setdefault("objectSelector", {})
    hook.setdefault("timeoutSeconds", 10)
    if mutating:
        hook.setdefault("reinvocationPolicy", "Never")
    for rule in hook.get("rules") or []:
        if isinstance(rule, dict):
            rule.setdefault("scope", "*")
    config = hook.get("clientConfig")
    service = config.get("service") if isinstance(config, dict) else None
    if isinstance(service, dict):
        service.setdefault("port", 443)


def _strings(value: Any) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value


def _hook_errors(hook: Mapping[str, Any], path: str, *, mutating: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    name = hook.get("name")
    if not isinstance(name, str) or not name:
        errors.append(FieldError(f"{path}.name", "Required", ""))
    elif not _FULLY_QUALIFIED.match(name) or name.count(".") < 2:
        errors.append(
            FieldError(
                f"{path}.name",
                "Invalid",
                "should be a domain with at least three segments separated by dots",
                name,
            )
        )
    for index, rule in enumerate(hook.get("rules") or []):
        errors += _rule_errors(rule, f"{path}.rules[{index}]")
    for field, allowed in (
        ("failurePolicy", ("Fail", "Ignore")),
        ("matchPolicy", ("Equivalent", "Exact")),
        *((("reinvocationPolicy", ("IfNeeded", "Never")),) if mutating else ()),
    ):
        if hook.get(field) not in allowed:
            errors.append(
                FieldError(
                    f"{path}.{field}",
                    "NotSupported",
                    ", ".join(f'"{a}"' for a in allowed),
                    hook.get(field),
                )
            )
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        errors.append(
            FieldError(f"{path}.sideEffects", "Required", "must specify one of None, NoneOnDryRun")
        )
    elif side_effects not in ("None", "NoneOnDryRun"):
        errors.append(
            FieldError(
                f"{path}.sideEffects", "NotSupported", '"None", "NoneOnDryRun"', side_effects
            )
        )
    timeout = hook.get("timeoutSeconds")
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 30:
        errors.append(
            FieldError(
                f"{path}.timeoutSeconds",
                "Invalid",
                "the timeout value must be between 1 and 30 seconds",
                timeout,
            )
        )
    for field in ("namespaceSelector", "objectSelector"):
        problem = _selector_problem(hook.get(field))
        if problem:
            errors.append(FieldError(f"{path}.{field}", "Invalid", problem, hook.get(field)))
    errors += _client_config_errors(hook.get("clientConfig"), f"{path}.clientConfig")
    versions = hook.get("admissionReviewVersions")
    field = f"{path}.admissionReviewVersions"
    listed = _strings(versions)
    if not listed:
        errors.append(FieldError(field, "Required", "must specify one of v1, v1beta1"))
    else:
        for index, version in enumerate(listed):
            if listed.index(version) != index:
                errors.append(
                    FieldError(f"{field}[{index}]", "Invalid", "duplicate version", version)
                )
            elif not _DNS1035.match(version):
                errors.append(
                    FieldError(
                        f"{field}[{index}]",
                        "Invalid",
                        "a DNS-1035 label must consist of lower case alphanumeric characters "
                        "or '-', start with an alphabetic character, and end with an "
                        "alphanumeric character",
                        version,
                    )
                )
        if not any(v in _REVIEW_VERSIONS for v in listed):
            errors.append(
                FieldError(field, "Invalid", "must include at least one of v1, v1beta1", listed)
            )
    return errors


def _rule_errors(rule: Any, path: str) -> list[FieldError]:
    if not isinstance(rule, Mapping):
        return [FieldError(path, "Invalid", "must be an object", rule)]
    errors: list[FieldError] = []
    operations = _strings(rule.get("operations")) or []
    if not operations:
        errors.append(FieldError(f"{path}.operations", "Required", ""))
    elif len(operations) > 1 and "*" in operations:
        errors.append(
            FieldError(
                f"{path}.operations",
                "Invalid",
                "if '*' is present, must not specify other operations",
                operations,
            )
        )
    for index, op in enumerate(operations):
        if op not in _OPERATIONS:
            errors.append(
                FieldError(
                    f"{path}.operations[{index}]",
                    "NotSupported",
                    ", ".join(f'"{o}"' for o in _OPERATIONS),
                    op,
                )
            )
    for field, what in (("apiGroups", "API groups"), ("apiVersions", "API versions")):
        values = _strings(rule.get(field))
        if not values:
            errors.append(FieldError(f"{path}.{field}", "Required", ""))
        elif len(values) > 1 and "*" in values:
            errors.append(
                FieldError(
                    f"{path}.{field}",
                    "Invalid",
                    f"if '*' is present, must not specify other {what}",
                    values,
                )
            )
    resources = _strings(rule.get("resources")) or []
    if not resources:
        errors.append(FieldError(f"{path}.resources", "Required", ""))
    for index, resource in enumerate(resources):
        if not resource:
            errors.append(FieldError(f"{path}.resources[{index}]", "Required", ""))
    if rule.get("scope") not in _SCOPES:
        errors.append(
            FieldError(
                f"{path}.scope", "NotSupported", '"*", "Cluster", "Namespaced"', rule.get("scope")
            )
        )
    return errors


def _client_config_errors(config: Any, path: str) -> list[FieldError]:
    if not isinstance(config, Mapping) or (config.get("url") is None) == (
        config.get("service") is None
    ):
        return [FieldError(path, "Required", "exactly one of url or service is required")]
    errors: list[FieldError] = []
    url = config.get("url")
    form = "; desired format: https://host[/path]"
    if url is not None:
        parts = urlsplit(str(url))
        if parts.scheme != "https":
            errors.append(
                FieldError(
                    f"{path}.url",
                    "Invalid",
                    "'https' is the only allowed URL scheme" + form,
                    parts.scheme,
                )
            )
        if not parts.netloc:
            errors.append(FieldError(f"{path}.url", "Invalid", "host must be specified" + form, ""))
        if parts.query:
            errors.append(
                FieldError(
                    f"{path}.url",
                    "Invalid",
                    "query parameters are not permitted in the URL",
                    parts.query,
                )
            )
        if parts.fragment:
            errors.append(
                FieldError(
                    f"{path}.url",
                    "Invalid",
                    "fragments are not permitted in the URL",
                    parts.fragment,
                )
            )
    else:
        service = config["service"]
        if not isinstance(service, Mapping):
            return [FieldError(f"{path}.service", "Invalid", "must be an object", service)]
        if not service.get("name"):
            errors.append(
                FieldError(f"{path}.service.name", "Required", "service name is required")
            )
        if not service.get("namespace"):
            errors.append(
                FieldError(f"{path}.service.namespace", "Required", "service namespace is required")
            )
        port = service.get("port")
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            errors.append(
                FieldError(
                    f"{path}.service.port",
                    "Invalid",
                    "port is not valid: must be between 1 and 65535, inclusive",
                    port,
                )
            )
    return errors


def _selector_problem(value: Any) -> str | None:
    try:
        _selector(value)
    except ValueError as exc:
        return str(exc)
    return None


def _selector(value: Any) -> LabelSelector:
    """A webhook's ``namespaceSelector``/``objectSelector`` (``None`` and ``{}``: all)."""
    if value is None:
        return LabelSelector()
    if not isinstance(value, Mapping):
        raise ValueError("a label selector is an object with matchLabels and matchExpressions")
    return label_selector_from_dict(value.get("matchLabels"), value.get("matchExpressions"))


# -- the stored webhooks, as the dispatcher reads them ----------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Hook:
    """One webhook of a stored configuration, parsed once per version of it."""

    configuration: str
    mutating: bool
    spec: Mapping[str, Any]
    namespace_selector: LabelSelector
    object_selector: LabelSelector

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def uid(self) -> str:
        """What reinvocation tracks a webhook by (kube: configuration and index)."""
        return f"{self.configuration}/{self.name}"

    @property
    def rules(self) -> Sequence[Mapping[str, Any]]:
        return [r for r in self.spec.get("rules") or [] if isinstance(r, Mapping)]

    @property
    def failure_policy(self) -> str:
        return str(self.spec.get("failurePolicy") or "Fail")

    @property
    def match_policy(self) -> str:
        return str(self.spec.get("matchPolicy") or "Equivalent")

    @property
    def side_effects(self) -> str:
        return str(self.spec.get("sideEffects") or "Unknown")

    @property
    def timeout_seconds(self) -> int:
        return int(self.spec.get("timeoutSeconds") or 10)

    @property
    def reinvocation_policy(self) -> str:
        return str(self.spec.get("reinvocationPolicy") or "Never")

    @property
    def client_config(self) -> Mapping[str, Any]:
        config = self.spec.get("clientConfig")
        return config if isinstance(config, Mapping) else {}

    @property
    def review_versions(self) -> Sequence[str]:
        return _strings(self.spec.get("admissionReviewVersions")) or []


class HookSource:
    """The webhooks of a store's configurations, parsed again only when a configuration
    changed. Event loop only."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._cache: dict[bool, tuple[tuple[tuple[str, int], ...], tuple[Hook, ...]]] = {}

    def hooks(self, *, mutating: bool) -> tuple[Hook, ...]:
        """The webhooks of the stored (mutating or validating) configurations, in kube's
        order: configurations sorted by name, each one's webhooks in order."""
        info = MUTATING_RESOURCE if mutating else VALIDATING_RESOURCE
        bucket: Bucket | None = self._store.buckets.get(info.group_resource)
        if bucket is None or not bucket.objects:
            return ()
        key = tuple(sorted((name, record.rv) for name, record in bucket.objects.items()))
        cached = self._cache.get(mutating)
        if cached is not None and cached[0] == key:
            return cached[1]
        hooks = tuple(
            Hook(
                name,
                mutating,
                spec,
                _selector(spec.get("namespaceSelector")),
                _selector(spec.get("objectSelector")),
            )
            for name, _ in key
            for spec in bucket.objects[name].obj.get("webhooks") or []
        )
        self._cache[mutating] = (key, hooks)
        return hooks
