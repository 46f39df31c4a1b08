"""Custom resources declared in Python: one ``TypedDict`` per version, typed like the built-in
models, from which the ``CustomResourceDefinition`` (its structural schema included) is
generated.

::

    from typing import Annotated
    from msgspec import Meta
    from typing_extensions import NotRequired, TypedDict

    from kubereflector.models.crd import custom_resource
    from kubereflector.models import ObjectMeta

    class FooSpec(TypedDict):
        deploymentName: str
        replicas: NotRequired[Annotated[int, Meta(ge=1, le=10)]]

    class FooStatus(TypedDict):
        availableReplicas: NotRequired[int]

    @custom_resource(group="samplecontroller.k8s.io", version="v1alpha1")
    class Foo(TypedDict):
        apiVersion: NotRequired[str]
        kind: NotRequired[str]
        metadata: NotRequired[ObjectMeta]
        spec: FooSpec
        status: NotRequired[FooStatus]

    crd_manifest(Foo)       # the CustomResourceDefinition, a dict ready to apply

The decorator registers ``Foo`` with :func:`kubereflector.models.register`, so
``resource_of(Foo)`` knows its group, version, plural and scope (and the factory, the
client and the Manager take ``Foo`` where they take a resource). ``kubereflector crd
module:Foo`` prints the manifest as YAML.

Types map to the schema as kube-apiserver wants it (a *structural* schema): ``str``,
``int``, ``float``, ``bool``; ``list[X]``; ``dict[str, X]`` (``additionalProperties``);
a ``TypedDict`` (an object with those fields, ``NotRequired`` ones optional; its docstring
and the strings under its fields become descriptions); ``Literal[...]`` (an ``enum``);
``X | None`` (``nullable``); ``int | str`` (``IntOrString``: ``x-kubernetes-int-or-string``);
``str | float`` (``Quantity``); ``JSONValue`` (any value, kept as it is). Constraints are
``Annotated`` metadata: msgspec's :class:`msgspec.Meta` (``ge``, ``gt``, ``le``, ``lt``,
``multiple_of``, ``pattern``, ``min_length``/``max_length`` of strings, lists and maps,
``title``, ``description``, ``examples``, ``extra_json_schema``) and the markers here
(:class:`Default`, :class:`Format`, :class:`ListType`, :class:`MapType`,
:class:`PreserveUnknownFields`, :class:`EmbeddedResource`, :class:`Rule`). Anything else —
a union of objects, ``Any``, a ``datetime``, a dataclass, a type that contains itself —
raises :class:`StructuralSchemaError` naming the class and field, as does a schema kube
would refuse.

Several versions of one kind are several classes declared with the same group and kind,
one of them ``storage=True``: :func:`custom_resource_of` gathers them into one
:class:`CustomResource` and :func:`crd_manifest` into one CRD.

The schema is built on first use (``schema()``, ``crd_manifest``), not at import: the
classes of a module may refer to each other in any order. Thread-safe throughout.
"""

from __future__ import annotations

import copy
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar, cast

from typing_extensions import is_typeddict

from ._crd.errors import StructuralSchemaError
from ._crd.markers import (
    FORMATS,
    RULE_REASONS,
    Default,
    EmbeddedResource,
    Format,
    ListType,
    MapType,
    PreserveUnknownFields,
    Rule,
    rules,
)
from ._registry import ApiResource, register

if TYPE_CHECKING:
    from ._crd.schema import Node
    from .apiextensions_v1 import (
        CustomResourceColumnDefinition,
        CustomResourceConversion,
        CustomResourceDefinition,
        CustomResourceDefinitionVersion,
        JSONSchemaProps,
    )

__all__ = [
    "API_APPROVED",
    "FORMATS",
    "RULE_REASONS",
    "CustomResource",
    "CustomResourceVersion",
    "Default",
    "EmbeddedResource",
    "Format",
    "ListType",
    "MapType",
    "PreserveUnknownFields",
    "PrinterColumn",
    "Rule",
    "ScaleSubresource",
    "Scope",
    "StructuralSchemaError",
    "crd_manifest",
    "custom_resource",
    "custom_resource_of",
    "declaration_of",
    "rules",
]

Scope: TypeAlias = Literal["Namespaced", "Cluster"]
"""A custom resource's scope: its objects live in namespaces, or in the cluster."""
_M = TypeVar("_M", bound=type)

API_APPROVED: Final = "api-approved.kubernetes.io"
"""The annotation kube-apiserver wants on a CRD of a ``*.k8s.io`` or ``*.kubernetes.io`` group."""

_DNS1035: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
)
_COLUMN_TYPES: Final = ("integer", "number", "string", "boolean", "date")
_COLUMN_FORMATS: Final = (
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "date",
    "date-time",
    "password",
)


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """A column ``kubectl get`` shows for the resource (``additionalPrinterColumns``).

    ``json_path`` is a JSONPath into the object (``.spec.replicas``,
    ``.metadata.creationTimestamp``). ``type`` (``integer``, ``number``, ``string``,
    ``boolean``, ``date``) is read from the schema when left out and the path names a
    field (a ``date-time`` string is a ``date``; anything else a ``string``). Higher
    ``priority`` columns show only with ``-o wide``. Raises ``ValueError`` for a type,
    format or path kube-apiserver would refuse.
    """

    name: str
    json_path: str
    type: Literal["integer", "number", "string", "boolean", "date"] | None = None
    format: str | None = None
    description: str | None = None
    priority: int = 0

    def __post_init__(self) -> None:
        where = f"PrinterColumn({self.name!r})"
        if not self.name:
            raise ValueError("PrinterColumn needs a name")
        if self.type is not None and self.type not in _COLUMN_TYPES:
            raise ValueError(
                f"{where}: type {self.type!r} is not one of {', '.join(_COLUMN_TYPES)}"
            )
        if self.format is not None and self.format not in _COLUMN_FORMATS:
            raise ValueError(
                f"{where}: format {self.format!r} is not one of {', '.join(_COLUMN_FORMATS)}"
            )
        _simple_path(self.json_path, f"{where}: json_path")
        if self.priority < 0:
            raise ValueError(f"{where}: priority is 0 or more")


@dataclass(frozen=True, slots=True)
class ScaleSubresource:
    """The ``scale`` subresource: ``kubectl scale`` and HorizontalPodAutoscalers read and
    write the replicas at these paths. ``spec_replicas_path`` is under ``.spec``,
    ``status_replicas_path`` under ``.status`` (integer fields, checked against the schema
    when it is built), ``label_selector_path`` under either (a string field holding a
    serialized label selector). Raises ``ValueError`` for a path kube would refuse."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None

    def __post_init__(self) -> None:
        _simple_path(self.spec_replicas_path, "ScaleSubresource: spec_replicas_path")
        _simple_path(self.status_replicas_path, "ScaleSubresource: status_replicas_path")
        if not self.spec_replicas_path.startswith(".spec."):
            raise ValueError("ScaleSubresource: spec_replicas_path is a path under .spec")
        if not self.status_replicas_path.startswith(".status."):
            raise ValueError("ScaleSubresource: status_replicas_path is a path under .status")
        if self.label_selector_path is not None:
            _simple_path(self.label_selector_path, "ScaleSubresource: label_selector_path")
            if not self.label_selector_path.startswith((".spec.", ".status.")):
                raise ValueError(
                    "ScaleSubresource: label_selector_path is a path under .spec or .status"
                )


@dataclass(frozen=True)
class CustomResourceVersion:
    """One version of a custom resource, as :func:`custom_resource` declared it on
    ``model``. Immutable; :meth:`schema` is built once, on first use (thread-safe).

    ``kind``, ``plural`` and ``scope`` make :attr:`resource` (what ``resource_of(model)``
    answers): every version of a kind has the same. The other names (``singular``,
    ``list_kind``, ``short_names``, ``categories``) and the CRD's ``annotations`` and
    ``labels`` belong to the whole resource too: ``None`` when this version leaves them to
    another (or to the defaults); :class:`CustomResource` holds them resolved.
    """

    model: type
    group: str
    version: str
    kind: str
    plural: str
    scope: Scope
    served: bool
    storage: bool | None
    """``True`` for the version objects are stored as; ``None`` when not said (allowed only
    when the resource has a single version)."""
    deprecated: bool
    deprecation_warning: str | None
    printer_columns: tuple[PrinterColumn, ...]
    status: bool
    scale: ScaleSubresource | None
    singular: str | None = None
    list_kind: str | None = None
    short_names: tuple[str, ...] | None = None
    categories: tuple[str, ...] | None = None
    annotations: Mapping[str, str] | None = None
    labels: Mapping[str, str] | None = None

    @property
    def resource(self) -> ApiResource:
        """What :func:`kubereflector.models.resource_of` answers for :attr:`model`."""
        return ApiResource(
            self.group, self.version, self.kind, self.plural, self.scope == "Namespaced"
        )

    def schema(self) -> JSONSchemaProps:
        """This version's ``openAPIV3Schema``: a structural schema kube-apiserver accepts.
        A new copy each call (the caller's to change). Raises
        :class:`StructuralSchemaError` naming the class and field a problem is in."""
        with _lock:
            built = _schemas.get(self.model)
        if built is None:
            built = _build_schema(self)
            with _lock:
                built = _schemas.setdefault(self.model, built)
        return cast("JSONSchemaProps", copy.deepcopy(built))

    def _manifest_entry(self, *, storage: bool) -> CustomResourceDefinitionVersion:
        """This version as an entry of the CRD's ``spec.versions``."""
        schema = self.schema()
        entry: dict[str, object] = {"name": self.version, "served": self.served, "storage": storage}
        if self.deprecated:
            entry["deprecated"] = True
            if self.deprecation_warning is not None:
                entry["deprecationWarning"] = self.deprecation_warning
        entry["schema"] = {"openAPIV3Schema": schema}
        subresources: dict[str, object] = {}
        if self.status:
            subresources["status"] = {}
        if self.scale is not None:
            scale = {
                "specReplicasPath": self.scale.spec_replicas_path,
                "statusReplicasPath": self.scale.status_replicas_path,
            }
            if self.scale.label_selector_path is not None:
                scale["labelSelectorPath"] = self.scale.label_selector_path
            subresources["scale"] = scale
        if subresources:
            entry["subresources"] = subresources
        if self.printer_columns:
            entry["additionalPrinterColumns"] = [
                _column(c, cast("Node", schema)) for c in self.printer_columns
            ]
        return cast("CustomResourceDefinitionVersion", entry)


@dataclass(frozen=True)
class CustomResource:
    """A custom resource with every version declared for it: what one CRD describes.

    Immutable. ``versions`` are in kube's priority order (GA before beta before alpha,
    higher numbers first); ``storage`` names the one objects are stored as.
    """

    group: str
    kind: str
    plural: str
    singular: str
    list_kind: str
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    scope: Scope
    versions: tuple[CustomResourceVersion, ...]
    storage: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The CRD's name: ``<plural>.<group>``."""
        return f"{self.plural}.{self.group}"

    @property
    def storage_version(self) -> CustomResourceVersion:
        """The version objects are stored as (and the hub a conversion webhook converts
        through)."""
        return self.version(self.storage)

    def version(self, name: str) -> CustomResourceVersion:
        """The version called ``name`` (``"v1"``); ``KeyError`` naming the known ones."""
        for version in self.versions:
            if version.version == name:
                return version
        known = ", ".join(v.version for v in self.versions)
        raise KeyError(f"{self.name} has no version {name!r} (it has {known})")

    def manifest(
        self, *, conversion: CustomResourceConversion | None = None
    ) -> CustomResourceDefinition:
        """The ``CustomResourceDefinition``: a new dict, ready to apply (or to print as YAML).

        ``conversion``, when given, is written as ``spec.conversion`` (a webhook converting
        between the versions); kube's default, ``None`` strategy, otherwise. Raises
        :class:`StructuralSchemaError` when a version's schema cannot be built.
        """
        storage = self.storage_version
        metadata: dict[str, object] = {"name": self.name}
        if self.annotations:
            metadata["annotations"] = dict(self.annotations)
        if self.labels:
            metadata["labels"] = dict(self.labels)
        names: dict[str, object] = {
            "kind": self.kind,
            "listKind": self.list_kind,
            "plural": self.plural,
            "singular": self.singular,
        }
        if self.short_names:
            names["shortNames"] = list(self.short_names)
        if self.categories:
            names["categories"] = list(self.categories)
        spec: dict[str, object] = {
            "group": self.group,
            "names": names,
            "scope": self.scope,
            "versions": [v._manifest_entry(storage=v is storage) for v in self.versions],
        }
        if conversion is not None:
            spec["conversion"] = copy.deepcopy(dict(conversion))
        return cast(
            "CustomResourceDefinition",
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": metadata,
                "spec": spec,
            },
        )


# -- declaring ----------------------------------------------------------------------------------

_lock: Final = threading.Lock()
_by_model: Final[dict[type, CustomResourceVersion]] = {}
_by_kind: Final[dict[tuple[str, str], dict[str, CustomResourceVersion]]] = {}
_schemas: Final[dict[type, Node]] = {}


def custom_resource(
    *,
    group: str,
    version: str,
    kind: str | None = None,
    plural: str | None = None,
    singular: str | None = None,
    list_kind: str | None = None,
    short_names: Iterable[str] | None = None,
    categories: Iterable[str] | None = None,
    scope: Scope = "Namespaced",
    served: bool = True,
    storage: bool | None = None,
    deprecated: bool = False,
    deprecation_warning: str | None = None,
    printer_columns: Iterable[PrinterColumn] = (),
    status: bool | None = None,
    scale: ScaleSubresource | None = None,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> Callable[[_M], _M]:
    """Class decorator: the ``TypedDict`` it decorates is version ``version`` of a custom
    resource of ``group``. Returns the class unchanged, registered with
    :func:`kubereflector.models.register` (so ``resource_of(cls)`` answers).

    ``kind`` defaults to the class's name; ``plural`` to the kind in lower case with an
    English plural ending (``Foo`` -> ``foos``, ``Policy`` -> ``policies``); ``singular``
    to the kind in lower case; ``list_kind`` to ``<kind>List``. ``scope`` is
    ``"Namespaced"`` or ``"Cluster"``. Every version of a kind has the same ``plural`` and
    ``scope`` (they are part of ``resource_of``); ``singular``, ``list_kind``,
    ``short_names``, ``categories``, ``annotations`` and ``labels`` name the whole resource
    and may be given on one of its versions only. ``status`` turns on the status subresource; left
    out, it is on when the class has a ``status`` field. ``storage=True`` marks the
    version objects are stored as: required on exactly one when a kind has several
    versions (several classes). ``annotations`` and ``labels`` go on the CRD itself; a
    group under ``k8s.io`` or ``kubernetes.io`` needs the ``api-approved.kubernetes.io``
    annotation (a URL, or a text starting with ``unapproved``), as kube-apiserver requires
    (checked with the versions, by :func:`custom_resource_of`).

    Thread-safe. Raises ``ValueError`` naming the class and the setting for names kube
    would refuse, for a version declared twice, and ``TypeError`` when the class is not a
    ``TypedDict``. The schema is checked when first built (:meth:`~CustomResourceVersion.schema`).
    """

    def declare(model: _M) -> _M:
        declared = _declaration(
            model,
            group=group,
            version=version,
            kind=kind,
            plural=plural,
            singular=singular,
            list_kind=list_kind,
            short_names=None if short_names is None else tuple(short_names),
            categories=None if categories is None else tuple(categories),
            scope=scope,
            served=served,
            storage=storage,
            deprecated=deprecated,
            deprecation_warning=deprecation_warning,
            printer_columns=tuple(printer_columns),
            status=status,
            scale=scale,
            annotations=None if annotations is None else dict(annotations),
            labels=None if labels is None else dict(labels),
        )
        _record(declared)
        register(model, declared.resource)
        return model

    return declare


def declaration_of(model: type) -> CustomResourceVersion:
    """How ``model`` was declared by :func:`custom_resource`. Thread-safe. Raises
    ``LookupError`` naming the class when it was not."""
    with _lock:
        found = _by_model.get(model)
    if found is None:
        raise LookupError(
            f"{_qualname(model)} is not a declared custom resource: decorate its TypedDict "
            "with @kubereflector.models.crd.custom_resource(group=..., version=...)"
        )
    return found


def custom_resource_of(model: type) -> CustomResource:
    """The custom resource ``model`` is a version of, with every version declared (imported)
    so far for its group and kind. Thread-safe.

    A name of the whole resource (``singular``, ``list_kind``, ``short_names``,
    ``categories``, the CRD's ``annotations`` and ``labels``) may be given on one version
    only. Raises ``LookupError`` when ``model`` is not declared; ``ValueError`` when its
    versions give different plurals, scopes or names, do not mark exactly one storage
    version (a single version is the storage version unless it says ``storage=False``), or
    when a group under ``k8s.io`` lacks its approval annotation. Each error names the
    classes.
    """
    declared = declaration_of(model)
    with _lock:
        versions = list(_by_kind[(declared.group, declared.kind)].values())
    versions.sort(key=lambda v: _version_priority(v.version))
    first = versions[0]

    def disagree(a: CustomResourceVersion, b: CustomResourceVersion, setting: str) -> ValueError:
        return ValueError(
            f"{_qualname(a.model)} ({a.version}) and {_qualname(b.model)} ({b.version}) are "
            f"versions of {first.kind}.{first.group} with different {setting}: "
            f"{getattr(a, setting)!r} and {getattr(b, setting)!r}"
        )

    for other in versions[1:]:
        for setting in ("plural", "scope"):
            if getattr(first, setting) != getattr(other, setting):
                raise disagree(first, other, setting)
    shared: dict[str, Any] = {}
    for setting in ("singular", "list_kind", "short_names", "categories", "annotations", "labels"):
        given = [v for v in versions if getattr(v, setting) is not None]
        for other in given[1:]:
            if getattr(other, setting) != getattr(given[0], setting):
                raise disagree(given[0], other, setting)
        shared[setting] = getattr(given[0], setting) if given else None
    marked = [v for v in versions if v.storage]
    if len(versions) == 1 and first.storage is None:
        marked = versions  # a single version is the storage version unless it says not
    if len(marked) != 1:
        named = ", ".join(f"{_qualname(v.model)} ({v.version})" for v in versions)
        raise ValueError(
            f"{first.kind}.{first.group} has versions {named}: exactly one must be "
            f"declared storage=True (found {len(marked)})"
        )
    annotations = dict(shared["annotations"] or {})
    _check_api_approval(first.group, annotations, _qualname(first.model))
    return CustomResource(
        group=first.group,
        kind=first.kind,
        plural=first.plural,
        singular=shared["singular"] or first.kind.lower(),
        list_kind=shared["list_kind"] or f"{first.kind}List",
        short_names=shared["short_names"] or (),
        categories=shared["categories"] or (),
        scope=first.scope,
        versions=tuple(versions),
        storage=marked[0].version,
        annotations=annotations,
        labels=dict(shared["labels"] or {}),
    )


def crd_manifest(
    model: type, *, conversion: CustomResourceConversion | None = None
) -> CustomResourceDefinition:
    """The ``CustomResourceDefinition`` of the custom resource ``model`` is a version of,
    with all its declared versions: ``custom_resource_of(model).manifest(...)``. Raises as
    :func:`custom_resource_of` and :meth:`CustomResource.manifest` do."""
    return custom_resource_of(model).manifest(conversion=conversion)


# -- the checks ----------------------------------------------------------------------------------


def _declaration(
    model: type,
    *,
    group: str,
    version: str,
    kind: str | None,
    plural: str | None,
    singular: str | None,
    list_kind: str | None,
    short_names: tuple[str, ...] | None,
    categories: tuple[str, ...] | None,
    scope: Scope,
    served: bool,
    storage: bool | None,
    deprecated: bool,
    deprecation_warning: str | None,
    printer_columns: tuple[PrinterColumn, ...],
    status: bool | None,
    scale: ScaleSubresource | None,
    annotations: dict[str, str] | None,
    labels: dict[str, str] | None,
) -> CustomResourceVersion:
    if not (isinstance(model, type) and is_typeddict(model)):
        raise TypeError(
            f"@custom_resource(...) decorates a TypedDict class (the models are TypedDicts "
            f"over the JSON objects), not {model!r}"
        )
    name = _qualname(model)

    def bad(setting: str, value: object, why: str) -> ValueError:
        return ValueError(f"{name}: {setting}={value!r}: {why}")

    if not isinstance(group, str) or not _DNS1123_SUBDOMAIN.match(group) or len(group) > 253:
        raise bad("group", group, "a DNS subdomain in lower case (example.com)")
    if "." not in group:
        raise bad("group", group, "should be a domain with at least one dot")
    if not isinstance(version, str) or not _DNS1035.match(version) or len(version) > 63:
        raise bad("version", version, "a DNS-1035 label (v1, v1alpha1, v2beta3)")
    kind = model.__name__ if kind is None else kind
    if not isinstance(kind, str) or not _DNS1035.match(kind.lower()) or not kind[:1].isupper():
        raise bad("kind", kind, "a CamelCase name of letters and digits (Foo)")
    plural = _plural(kind.lower()) if plural is None else plural
    if not isinstance(plural, str) or not _DNS1035.match(plural) or len(plural) > 63:
        raise bad("plural", plural, "a DNS-1035 label in lower case")
    if singular is not None and (
        not isinstance(singular, str) or not _DNS1035.match(singular) or len(singular) > 63
    ):
        raise bad("singular", singular, "a DNS-1035 label in lower case")
    if list_kind is not None:
        if not isinstance(list_kind, str) or not _DNS1035.match(list_kind.lower()):
            raise bad("list_kind", list_kind, "a CamelCase name of letters and digits")
        if list_kind == kind:
            raise bad("list_kind", list_kind, "kind and list_kind may not be the same")
    for setting, values in (("short_names", short_names), ("categories", categories)):
        for value in values or ():
            if not isinstance(value, str) or not _DNS1035.match(value) or len(value) > 63:
                raise bad(setting, values, f"{value!r} is not a DNS-1035 label in lower case")
        if values is not None and len(set(values)) != len(values):
            raise bad(setting, values, "a name is given twice")
    if scope not in ("Namespaced", "Cluster"):
        raise bad("scope", scope, 'use "Namespaced" or "Cluster"')
    if deprecation_warning is not None:
        if not deprecated:
            raise bad("deprecation_warning", deprecation_warning, "needs deprecated=True")
        if len(deprecation_warning) > 256 or not deprecation_warning.isprintable():
            raise bad("deprecation_warning", deprecation_warning, "printable, at most 256 chars")
    for column in printer_columns:
        if not isinstance(column, PrinterColumn):
            raise bad("printer_columns", column, "each is a PrinterColumn(name, json_path)")
    if len({c.name for c in printer_columns}) != len(printer_columns):
        raise bad("printer_columns", [c.name for c in printer_columns], "a name is used twice")
    if scale is not None and not isinstance(scale, ScaleSubresource):
        raise bad("scale", scale, "a ScaleSubresource(...)")
    fields = model.__annotations__
    if status is None:
        status = "status" in fields
    elif status and "status" not in fields:
        raise bad("status", status, f"the status subresource needs a status field in {name}")
    for setting, mapping in (("annotations", annotations), ("labels", labels)):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in (mapping or {}).items()):
            raise bad(setting, mapping, "keys and values are strings")
    return CustomResourceVersion(
        model=model,
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        singular=singular,
        list_kind=list_kind,
        short_names=short_names,
        categories=categories,
        scope=scope,
        served=bool(served),
        storage=storage,
        deprecated=bool(deprecated),
        deprecation_warning=deprecation_warning,
        printer_columns=printer_columns,
        status=status,
        scale=scale,
        annotations=annotations,
        labels=labels,
    )


def _check_api_approval(group: str, annotations: Mapping[str, str], name: str) -> None:
    """kube's rule for the community's groups (KEP 2337): approved, or said unapproved."""
    if not (group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))):
        return
    value = annotations.get(API_APPROVED, "")
    parsed = urllib.parse.urlsplit(value)
    if value.startswith("unapproved") or (parsed.scheme and parsed.netloc):
        return
    raise ValueError(
        f"{name}: the group {group} is protected: kube-apiserver needs the {API_APPROVED!r} "
        "annotation, the URL of the API review or a text starting with 'unapproved' "
        f"(annotations={{{API_APPROVED!r}: 'unapproved, experimental-only'}}), not "
        f"{dict(annotations)!r}"
    )


def _record(declared: CustomResourceVersion) -> None:
    model = declared.model
    key = (declared.group, declared.kind)
    with _lock:
        if model in _by_model:
            raise ValueError(f"{_qualname(model)} is declared a custom resource twice")
        versions = _by_kind.setdefault(key, {})
        other = versions.get(declared.version)
        if other is not None and _qualname(other.model) != _qualname(model):
            raise ValueError(
                f"{_qualname(model)} and {_qualname(other.model)} both declare version "
                f"{declared.version} of {declared.kind}.{declared.group}"
            )
        # The same class again (its module reloaded): the new one replaces it.
        versions[declared.version] = declared
        _by_model[model] = declared


def _build_schema(version: CustomResourceVersion) -> Node:
    """The structural schema of one version, built and checked (on first use)."""
    from ._crd.errors import Where
    from ._crd.paths import check_paths
    from ._crd.rules import check
    from ._crd.schema import object_schema

    node, origins = object_schema(version.model)
    root = Where(version.model, version.model, None, "")
    check(node, origins, root=root)
    check_paths(version, node, root)
    return node


def _column(column: PrinterColumn, schema: Node) -> CustomResourceColumnDefinition:
    from ._crd.paths import column_type

    entry: dict[str, object] = {
        "name": column.name,
        "type": column.type or column_type(column.json_path, schema),
        "jsonPath": column.json_path,
    }
    if column.format is not None:
        entry["format"] = column.format
    if column.description is not None:
        entry["description"] = column.description
    if column.priority:
        entry["priority"] = column.priority
    return cast("CustomResourceColumnDefinition", entry)


def _simple_path(path: object, where: str) -> None:
    if not isinstance(path, str) or not path.startswith("."):
        raise ValueError(f"{where} {path!r}: a JSON path starting with '.' (.spec.replicas)")


_VERSION: Final = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?\Z")


def _version_priority(name: str) -> tuple[int, int, int, str]:
    """kube's order of versions: GA, then beta, then alpha, higher numbers first; names
    of another shape last, alphabetically."""
    match = _VERSION.match(name)
    if match is None:
        return (3, 0, 0, name)
    major, level, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[level]
    return (rank, -int(major), -int(minor or 0), name)


def _plural(kind: str) -> str:
    if kind.endswith(("s", "x", "z", "ch", "sh")):
        return f"{kind}es"
    if kind.endswith("y") and kind[-2:-1] not in ("a", "e", "i", "o", "u"):
        return f"{kind[:-1]}ies"
    return f"{kind}s"


def _qualname(model: object) -> str:
    module = getattr(model, "__module__", None)
    name = getattr(model, "__qualname__", None) or repr(model)
    return f"{module}.{name}" if module else name
