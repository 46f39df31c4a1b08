"""The emulator's resource registry: what a served resource is (:class:`ServedResource`)
and the resources built in.

Private to :mod:`kubereflector.testing.apiserver`. Pure data: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ._fields import DEFAULT_SCHEMA, Schema, builtin_schema, custom_schema

__all__ = ["BUILTIN_RESOURCES", "DEFAULT_VERBS", "ServedResource"]

DEFAULT_VERBS: Final = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)
_META_FIELDS: Final = frozenset({"metadata.name", "metadata.namespace"})
_POD_FIELDS: Final = _META_FIELDS | {
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}
_EVENT_FIELDS: Final = _META_FIELDS | {
    "reason",
    "type",
    "reportingController",
    "regarding.apiVersion",
    "regarding.kind",
    "regarding.name",
    "regarding.namespace",
    "regarding.uid",
    "regarding.resourceVersion",
    "regarding.fieldPath",
}


@dataclass(frozen=True, slots=True, eq=False)
class ServedResource:
    """One resource the emulator serves (a built-in, a CRD's, or one registered from
    Python): its names, scope, verbs and what its objects carry. Immutable.

    Not :class:`kubereflector.client.ResourceInfo`, the client's view of a resource
    found through discovery: this is the server's, with what it needs to store,
    validate and print objects.

    ``generation``: whether objects carry ``metadata.generation`` (custom
    resources and workloads do; ConfigMaps, Secrets, Events, ... do not).
    ``schema``: how its fields merge, for field management (server-side apply) and
    strategic merge patch; by default the built-in kind's (from the OpenAPI spec) or
    the one ``openapi_schema`` describes.
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = DEFAULT_VERBS
    categories: tuple[str, ...] = ()
    builtin: bool = False
    subresources: tuple[str, ...] = ()
    field_selectors: frozenset[str] = _META_FIELDS
    return_deleted_object: bool = False
    generation: bool = True
    schema: Schema = DEFAULT_SCHEMA
    # A CRD's openAPIV3Schema (served in the OpenAPI documents; None: schemaless).
    openapi_schema: Mapping[str, Any] | None = None
    # A CRD's additionalPrinterColumns (the Table kubectl prints).
    printer_columns: tuple[Mapping[str, Any], ...] = ()
    # Derived in __post_init__.
    api_version: str = field(init=False)
    group_resource: str = field(init=False)
    typemeta_prefix: bytes = field(init=False)

    def __post_init__(self) -> None:
        if not self.singular:
            object.__setattr__(self, "singular", self.kind.lower())
        api_version = f"{self.group}/{self.version}" if self.group else self.version
        object.__setattr__(self, "api_version", api_version)
        gr = f"{self.plural}.{self.group}" if self.group else self.plural
        object.__setattr__(self, "group_resource", gr)
        prefix = f'{{"kind":"{self.kind}","apiVersion":"{api_version}",'.encode()
        object.__setattr__(self, "typemeta_prefix", prefix)
        if self.schema is DEFAULT_SCHEMA:
            if self.builtin:
                schema = builtin_schema(self.group, self.version, self.kind)
            else:
                schema = custom_schema(self.openapi_schema)
            object.__setattr__(self, "schema", schema)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


BUILTIN_RESOURCES: Final = (
    ServedResource(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        builtin=True,
        subresources=("status", "finalize"),
        field_selectors=_META_FIELDS | {"status.phase"},
        return_deleted_object=True,
        generation=False,
    ),
    ServedResource(
        "",
        "v1",
        "pods",
        "Pod",
        short_names=("po",),
        categories=("all",),
        builtin=True,
        subresources=("status",),
        field_selectors=_POD_FIELDS,
        return_deleted_object=True,
    ),
    ServedResource(
        "", "v1", "configmaps", "ConfigMap", short_names=("cm",), builtin=True, generation=False
    ),
    ServedResource(
        "",
        "v1",
        "secrets",
        "Secret",
        builtin=True,
        field_selectors=_META_FIELDS | {"type"},
        generation=False,
    ),
    ServedResource(
        "",
        "v1",
        "services",
        "Service",
        short_names=("svc",),
        categories=("all",),
        builtin=True,
        subresources=("status",),
        return_deleted_object=True,
        generation=False,
    ),
    ServedResource(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        short_names=("deploy",),
        categories=("all",),
        builtin=True,
        subresources=("status",),
    ),
    ServedResource(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        short_names=("ev",),
        builtin=True,
        field_selectors=_EVENT_FIELDS,
        generation=False,
    ),
    ServedResource("coordination.k8s.io", "v1", "leases", "Lease", builtin=True, generation=False),
    ServedResource(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        short_names=("sa",),
        builtin=True,
        subresources=("token",),
        generation=False,
    ),
    ServedResource(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        short_names=("pdb",),
        builtin=True,
        subresources=("status",),
    ),
)
