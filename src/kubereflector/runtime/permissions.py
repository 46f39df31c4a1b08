"""What an operator needs from the API server: the RBAC rules a
:class:`~kubereflector.runtime.Manager` needs to run, worked out from its
registrations (controller-gen's ``+kubebuilder:rbac`` markers, without the markers).

* :class:`Permission`: what a reconciler declares beyond what its registration says
  (``manager.reconciler("foos.example.com", rbac=[Permission("foos.example.com/status",
  "update", "patch")])``);
* :class:`Rule`: one RBAC rule, resolved (API group, resources, verbs, resourceNames);
* :class:`Permissions`: every rule of one manager, by where it applies (a ClusterRole,
  or a Role in a namespace), from :meth:`Manager.permissions
  <kubereflector.runtime.Manager.permissions>`.

What a manager is given, by registration (the least that works):

======================================  ===================================================
``for_``                                ``get``, ``list``, ``watch`` (its informer; a get
                                        tells nothing a list does not)
``owns``                                those, and ``create``, ``update``, ``patch``,
                                        ``delete``; and ``update`` on ``for_``'s
                                        ``finalizers`` (clusters with the
                                        OwnerReferencesPermissionEnforcement admission
                                        plugin ask it of an ownerReference that blocks
                                        the owner's deletion)
``watches``                             ``get``, ``list``, ``watch``
any reconciler                          ``create``, ``patch`` on ``events.k8s.io`` Events
                                        (an EventRecorder writes and updates its series)
``leader_election``                     ``create`` Leases, ``get``, ``update`` of that one
                                        Lease, in the Lease's namespace
``sharding``                            ``get``, ``list``, ``create``, ``update`` Leases in
                                        their namespace (member Leases are named by each
                                        replica's identity: no names to list)
``rbac=``                               what it says
======================================  ===================================================

A namespaced manager (``Manager(namespace=...)``) gets a Role in its namespace; a
cluster-wide one a ClusterRole. Rules on cluster-scoped resources (nodes,
namespaces, cluster-scoped custom resources) always go into a ClusterRole.

Resource names resolve without a server: built-in kinds by their plural
(``"configmaps"``), ``plural.group`` (``"deployments.apps"``), kind or kubectl's short
name (``"deploy"``); a custom resource by ``plural.group``
(``"foos.samplecontroller.k8s.io"``, namespaced unless its model, registered with
:func:`kubereflector.models.register`, says otherwise) or its model class. Pure
values: immutable, hashable, no I/O.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..models import ApiResource, resource_of

if TYPE_CHECKING:
    from ..models.crd import CustomResource
    from ..models.rbac_authorization_v1 import PolicyRule
    from .webhooks.admission import AdmissionWebhook
    from .webhooks.conversion import Conversion

__all__ = [
    "ManagerDescription",
    "Permission",
    "Permissions",
    "ResourceRef",
    "Rule",
    "resolve_resource",
]

_VERB: Final = re.compile(r"[a-z*][a-zA-Z*]*\Z")
_VERSION: Final = re.compile(r"v\d+((alpha|beta)\d+)?\Z")
_READ: Final = ("get", "list", "watch")
_WRITE: Final = ("create", "update", "patch", "delete")
_SHORT_NAMES: Final = {
    # kubectl's short names of the built-in resources (kube-apiserver's discovery)
    "cm": "configmaps",
    "cs": "componentstatuses",
    "ep": "endpoints",
    "ev": "events",
    "limits": "limitranges",
    "ns": "namespaces",
    "no": "nodes",
    "pvc": "persistentvolumeclaims",
    "pv": "persistentvolumes",
    "po": "pods",
    "rc": "replicationcontrollers",
    "quota": "resourcequotas",
    "sa": "serviceaccounts",
    "svc": "services",
    "crd": "customresourcedefinitions.apiextensions.k8s.io",
    "crds": "customresourcedefinitions.apiextensions.k8s.io",
    "ds": "daemonsets.apps",
    "deploy": "deployments.apps",
    "rs": "replicasets.apps",
    "sts": "statefulsets.apps",
    "hpa": "horizontalpodautoscalers.autoscaling",
    "cj": "cronjobs.batch",
    "csr": "certificatesigningrequests.certificates.k8s.io",
    "ing": "ingresses.networking.k8s.io",
    "netpol": "networkpolicies.networking.k8s.io",
    "pdb": "poddisruptionbudgets.policy",
    "pc": "priorityclasses.scheduling.k8s.io",
    "sc": "storageclasses.storage.k8s.io",
}


@dataclass(frozen=True, slots=True)
class ResourceRef:
    """A resource as RBAC names it: its API group, plural, and whether it is
    namespaced (``None``: not known without a server; treated as namespaced)."""

    group: str
    plural: str
    namespaced: bool | None = True


class Permission:
    """What a reconciler may do beyond what its registration says: ``verbs`` on
    ``resource`` (one :class:`Rule`, controller-gen's ``+kubebuilder:rbac`` marker).

    ``resource``: a name as :meth:`Manager.reconciler
    <kubereflector.runtime.Manager.reconciler>` takes one, with ``/subresource``
    (``"foos.example.com/status"``), or a registered model class; ``verbs``: RBAC
    verbs (``"get"``, ``"patch"``, ``"*"``, or custom ones such as ``"use"``);
    ``names``: only these objects (resourceNames; a list, watch or create is never
    narrowed to names). Immutable and hashable. Raises ``ValueError`` without verbs
    or with an empty resource, ``TypeError`` for values of the wrong type. The name
    is resolved (and an unknown one reported) when the manager's permissions are.
    """

    __slots__ = ("names", "resource", "verbs")

    resource: str | type[object]
    verbs: tuple[str, ...]
    names: tuple[str, ...]

    def __init__(
        self, resource: str | type[object], *verbs: str, names: Iterable[str] = ()
    ) -> None:
        if isinstance(resource, str):
            if not resource.strip("/ "):
                raise ValueError("a Permission needs a resource name")
        elif not isinstance(resource, type):
            raise TypeError(f"a Permission's resource is a name or a model class, not {resource!r}")
        if not verbs:
            raise ValueError(f"a Permission on {resource!r} needs at least one verb")
        for verb in verbs:
            if not isinstance(verb, str) or not _VERB.match(verb):
                raise ValueError(f"{verb!r} is not an RBAC verb (get, list, watch, create, ...)")
        if isinstance(names, str):
            raise TypeError("names is a list of object names, not a string")
        name_list = tuple(names)
        for name in name_list:
            if not isinstance(name, str) or not name:
                raise ValueError(f"names holds object names, not {name!r}")
        object.__setattr__(self, "resource", resource)
        object.__setattr__(self, "verbs", tuple(dict.fromkeys(verbs)))
        object.__setattr__(self, "names", tuple(dict.fromkeys(name_list)))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Permission is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Permission):
            return NotImplemented
        return (self.resource, self.verbs, self.names) == (
            other.resource,
            other.verbs,
            other.names,
        )

    def __hash__(self) -> int:
        return hash((self.resource, self.verbs, self.names))

    def __repr__(self) -> str:
        resource = self.resource if isinstance(self.resource, str) else self.resource.__name__
        args = ", ".join(repr(a) for a in (resource, *self.verbs))
        names = f", names={list(self.names)!r}" if self.names else ""
        return f"Permission({args}{names})"


@dataclass(frozen=True, slots=True, order=True)
class Rule:
    """One RBAC rule: ``verbs`` on ``resources`` (``"pods"``, ``"pods/status"``) of
    ``api_group``, only on the objects named ``names`` if any. Immutable."""

    api_group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()

    def policy_rule(self) -> PolicyRule:
        """The rule as a Role's or ClusterRole's ``rules`` entry."""
        rule: PolicyRule = {
            "apiGroups": [self.api_group],
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.names:
            rule["resourceNames"] = list(self.names)
        return rule

    def allows(self, verb: str, api_group: str, resource: str, name: str = "") -> bool:
        """Whether this rule lets ``verb`` on ``resource`` (``"pods/status"``) of
        ``api_group`` through, as kube's RBAC matches a rule (``*`` included)."""
        if "*" not in self.verbs and verb not in self.verbs:
            return False
        if self.api_group not in ("*", api_group):
            return False
        sub = resource.partition("/")[2]
        if not any(r in ("*", resource) or (sub and r == f"*/{sub}") for r in self.resources):
            return False
        return not self.names or name in self.names


@dataclass(frozen=True, slots=True)
class Permissions:
    """Every rule a manager needs, by where it applies. Immutable.

    ``cluster``: the ClusterRole's rules (bound cluster-wide). ``namespaced``: each
    namespace's Role rules, ``None`` standing for the namespace the operator runs in
    (the pod's own, where a Lease goes by default), in a stable order.
    """

    cluster: tuple[Rule, ...] = ()
    namespaced: tuple[tuple[str | None, tuple[Rule, ...]], ...] = ()

    def rules_in(self, namespace: str | None) -> tuple[Rule, ...]:
        """The Role rules of ``namespace`` (``None``: the operator's own namespace)."""
        return next((rules for ns, rules in self.namespaced if ns == namespace), ())

    def allows(
        self,
        verb: str,
        api_group: str,
        resource: str,
        *,
        namespace: str = "",
        name: str = "",
        own_namespace: str | None = None,
    ) -> bool:
        """Whether these rules let the request through (``resource`` with its
        ``/subresource``; ``own_namespace``: where the operator runs)."""
        rules = list(self.cluster)
        if namespace:
            for ns, scoped in self.namespaced:
                if (ns if ns is not None else own_namespace) == namespace:
                    rules.extend(scoped)
        return any(r.allows(verb, api_group, resource, name) for r in rules)


# -- resolving names -----------------------------------------------------------------------

_index_lock: Final = threading.Lock()
_index: dict[str, ApiResource] = {}


def _builtin_index() -> Mapping[str, ApiResource]:
    """Every built-in resource by plural, ``plural.group`` and lower-case kind (the
    core group first, as kubectl prefers it: ``events`` is core/v1's)."""
    with _index_lock:
        if _index:
            return _index
        from .. import models

        found: set[ApiResource] = set()
        for module in pkgutil.iter_modules(models.__path__):
            if module.name.startswith("_"):
                continue
            loaded = importlib.import_module(f"{models.__name__}.{module.name}")
            for value in vars(loaded).values():
                if isinstance(value, type) and value.__module__ == loaded.__name__:
                    try:
                        found.add(resource_of(value))
                    except LookupError:
                        continue  # a type that is no kind of its own (PodSpec, ...)
        resources = sorted(found, key=lambda r: (r.group != "", r.group, r.plural, r.version))
        for r in resources:
            qualified = f"{r.plural}.{r.group}" if r.group else r.plural
            for key in (r.plural, qualified, r.kind.lower()):
                _index.setdefault(key, r)
            if r.group:
                _index.setdefault(f"{r.plural}.{r.version}.{r.group}", r)
        return _index


def resolve_resource(resource: str | type[object]) -> tuple[ResourceRef, str]:
    """``resource`` (a name, maybe with ``/subresource``, or a registered model) as RBAC
    names it, and its subresource (``""`` if none). Raises ``LookupError`` naming a
    name that cannot be resolved without a server, and how to name it instead."""
    if isinstance(resource, type):
        found = resource_of(resource)
        return ResourceRef(found.group, found.plural, found.namespaced), ""
    name, _, sub = resource.strip().partition("/")
    key = _SHORT_NAMES.get(name.lower(), name.lower())
    builtin = _builtin_index().get(key)
    if builtin is not None:
        return ResourceRef(builtin.group, builtin.plural, builtin.namespaced), sub
    plural, _, group = key.partition(".")
    head, _, rest = group.partition(".")
    if _VERSION.match(head) and rest:
        group = rest  # plural.version.group
    if not group or not plural:
        raise LookupError(
            f"cannot tell the API group of resource {resource!r} without a server: name a "
            "custom resource 'plural.group' (such as 'foos.samplecontroller.k8s.io') or "
            "by its registered model class"
        )
    return ResourceRef(group, plural, None), sub


def _with_sub(plural: str, sub: str) -> str:
    return f"{plural}/{sub}" if sub else plural


# -- merging -------------------------------------------------------------------------------


_RuleKey = tuple[str, tuple[str, ...], tuple[str, ...]]
"""(API group, verbs, resourceNames): the rules sharing them merge their resources."""


class _Grants:
    """Verbs collected per (where, group, resource, names), then merged into rules."""

    def __init__(self, namespace: str | None) -> None:
        self._namespace = namespace  # the manager's: None for a cluster-wide manager
        self._verbs: dict[tuple[str, str | None, str, str, tuple[str, ...]], set[str]] = {}

    def add(
        self,
        ref: ResourceRef,
        sub: str,
        verbs: Sequence[str],
        names: Sequence[str] = (),
        *,
        namespace: str | bool | None = False,
    ) -> None:
        """Grant ``verbs``; ``namespace``: where (``False``: the manager's scope,
        ``None``: the operator's own namespace, a name: that namespace)."""
        if ref.namespaced is False:
            where: tuple[str, str | None] = ("cluster", None)
        elif namespace is False:
            where = ("cluster", None) if self._namespace is None else ("ns", self._namespace)
        else:
            where = ("ns", namespace if isinstance(namespace, str) else None)
        key = (*where, ref.group, _with_sub(ref.plural, sub), tuple(sorted(names)))
        self._verbs.setdefault(key, set()).update(verbs)

    def permissions(self) -> Permissions:
        grouped: dict[tuple[str, str | None], dict[_RuleKey, list[str]]] = {}
        for (scope, ns, group, resource, names), verbs in self._verbs.items():
            merged = grouped.setdefault((scope, ns), {})
            merged.setdefault((group, _ordered(verbs), names), []).append(resource)
        cluster: tuple[Rule, ...] = ()
        namespaced: list[tuple[str | None, tuple[Rule, ...]]] = []
        for (scope, ns), entries in sorted(
            grouped.items(), key=lambda item: (item[0][0], item[0][1] or "")
        ):
            rules = tuple(
                sorted(
                    Rule(group, tuple(sorted(resources)), verbs, names)
                    for (group, verbs, names), resources in entries.items()
                )
            )
            if scope == "cluster":
                cluster = rules
            else:
                namespaced.append((ns, rules))
        return Permissions(cluster, tuple(namespaced))


_VERB_ORDER: Final = {v: i for i, v in enumerate((*_READ, *_WRITE, "deletecollection"))}


def _ordered(verbs: Iterable[str]) -> tuple[str, ...]:
    if "*" in verbs:
        return ("*",)
    return tuple(sorted(set(verbs), key=lambda v: (_VERB_ORDER.get(v, len(_VERB_ORDER)), v)))


@dataclass(frozen=True, slots=True)
class _Reconciles:
    """A reconciler's registration as :func:`_permissions_for` needs it (private to the
    runtime: :class:`~kubereflector.runtime.Manager` makes them)."""

    for_: str | type[object]
    owns: tuple[str | type[object], ...] = ()
    watches: tuple[str | type[object], ...] = ()
    declared: tuple[Permission, ...] = ()


_EVENTS: Final = ResourceRef("events.k8s.io", "events", True)
_LEASES: Final = ResourceRef("coordination.k8s.io", "leases", True)


def _permissions_for(
    reconcilers: Sequence[_Reconciles],
    *,
    namespace: str | None,
    lease: tuple[str | None, str] | None = None,
    sharding: tuple[str | None] | None = None,
) -> Permissions:
    """The rules a manager with ``reconcilers`` needs (see the module documentation).
    ``namespace``: the manager's (``None``: cluster-wide); ``lease``: the Lease's
    namespace (``None``: the operator's own) and name, with leader election;
    ``sharding``: the sharding Leases' namespace (``None``: the operator's own), when
    sharded. Raises ``LookupError`` for a resource name that cannot be resolved
    without a server."""
    grants = _Grants(namespace)
    for spec in reconcilers:
        owner, owner_sub = resolve_resource(spec.for_)
        grants.add(owner, owner_sub, _READ)
        for owned in spec.owns:
            ref, sub = resolve_resource(owned)
            grants.add(ref, sub, (*_READ, *_WRITE))
        if spec.owns:
            grants.add(owner, "finalizers", ("update",))
        for watched in spec.watches:
            ref, sub = resolve_resource(watched)
            grants.add(ref, sub, _READ)
        for permission in spec.declared:
            ref, sub = resolve_resource(permission.resource)
            grants.add(ref, sub, permission.verbs, permission.names)
    if reconcilers:
        grants.add(_EVENTS, "", ("create", "patch"))
    if lease is not None:
        lease_namespace, lease_name = lease
        where: str | None = lease_namespace
        grants.add(_LEASES, "", ("create",), namespace=where)
        grants.add(_LEASES, "", ("get", "update"), (lease_name,), namespace=where)
    if sharding is not None:
        (sharding_namespace,) = sharding
        grants.add(_LEASES, "", ("get", "list", "create", "update"), namespace=sharding_namespace)
    return grants.permissions()


def _custom_resources(models: Iterable[object]) -> tuple[CustomResource, ...]:
    """The custom resources declared in Python (:mod:`kubereflector.models.crd`) among
    ``models`` (resource names and other classes are skipped), one per kind, in the
    order first named. Raises ``ValueError`` as
    :func:`~kubereflector.models.crd.custom_resource_of` does."""
    from ..models.crd import custom_resource_of, declaration_of

    found: dict[str, CustomResource] = {}
    for model in models:
        if not isinstance(model, type):
            continue
        try:
            declaration_of(model)
        except LookupError:
            continue  # a built-in kind, or a model registered by hand
        resource = custom_resource_of(model)
        found.setdefault(resource.name, resource)
    return tuple(found.values())


@dataclass(frozen=True, slots=True)
class ManagerDescription:
    """What a :class:`~kubereflector.runtime.Manager` needs to run in a cluster, from its
    registrations (:meth:`Manager.describe <kubereflector.runtime.Manager.describe>`):
    its RBAC, the custom resources it defines, and what it serves (for its Deployment's
    ports and probes). Immutable.

    ``namespace``: the one namespace it watches (``None``: all); ``lease``: with
    leader election, the Lease's namespace (``None``: the pod's own) and name;
    ``metrics_port``/``health_port``: where it serves ``/metrics`` and
    ``/healthz``+``/readyz`` (``None``: not at all; ``0``: a port the system picks,
    which no Deployment can name); ``graceful_shutdown_timeout``: seconds it may take
    to stop; ``custom_resources``: the custom resources declared in Python
    (:mod:`kubereflector.models.crd`) whose model classes its reconcilers (``for_``,
    ``owns``, ``watches``) and webhooks name, one per kind, in registration order
    (their CRDs are what :func:`~kubereflector.runtime.manifests.manifests` installs
    first); ``webhook_port``: where it serves its webhooks (``None``: it serves none),
    ``webhook_cert_dir``: the directory its webhook server reads its certificate from
    (``None``: it makes a self-signed one), ``admission_webhooks`` and ``conversions``:
    what it serves there, in registration order.
    """

    namespace: str | None
    permissions: Permissions
    lease: tuple[str | None, str] | None = None
    metrics_port: int | None = None
    health_port: int | None = None
    graceful_shutdown_timeout: float = 30.0
    custom_resources: tuple[CustomResource, ...] = ()
    webhook_port: int | None = None
    webhook_cert_dir: str | None = None
    admission_webhooks: tuple[AdmissionWebhook[Any], ...] = ()
    conversions: tuple[Conversion[Any], ...] = ()
