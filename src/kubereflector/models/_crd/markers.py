"""The ``Annotated`` markers of a custom resource's schema, where msgspec's ``Meta`` has no
word: defaults, list and map semantics, kept unknown fields, embedded resources, formats
and CEL rules. Private to :mod:`kubereflector.models`; public through
:mod:`kubereflector.models.crd`.

Each marker is an immutable value checked when it is made (a ``ValueError`` naming the
marker and what was wrong), so a typo fails at import time, where the type is declared.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, TypeVar

if TYPE_CHECKING:
    from .._json import JSONValue

__all__ = [
    "FORMATS",
    "RULE_REASONS",
    "Default",
    "EmbeddedResource",
    "Format",
    "ListType",
    "MapType",
    "PreserveUnknownFields",
    "Rule",
    "class_rules",
    "rules",
]

FORMATS: Final = frozenset(
    {
        # validated by kube-apiserver (k8s.io/apiextensions-apiserver's supportedFormats)
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "date-time",
        "datetime",
        # not validated, but what controller-gen writes for Go's sized numbers
        "int32",
        "int64",
        "float",
        "double",
    }
)
"""The formats :class:`Format` accepts: those kube-apiserver validates (it ignores any
other, silently), and the numeric ones controller-gen writes for documentation."""

RULE_REASONS: Final = frozenset(
    {"FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"}
)
"""The ``reason`` values a CEL :class:`Rule` may carry (kube's ``FieldValueErrorReason``)."""

_NEWLINE: Final = re.compile(r"[\n\r]")


@dataclass(frozen=True, slots=True, eq=False)
class Default:
    """``Annotated[int, Default(1)]``: the value kube-apiserver writes into a field that an
    object leaves out (``default`` in the schema), on create, update and read.

    The value must be JSON (``None``, ``bool``, ``int``, ``float``, ``str``, lists and
    ``dict[str, ...]`` of them) and valid under the field's own schema; both are checked
    when the schema is built. Defaults are not allowed in ``metadata``, ``apiVersion`` or
    ``kind`` of the object. Compared by identity: ``typing`` caches ``Annotated`` types by
    their metadata's equality, and ``Default(True)`` must not become a cached
    ``Default(1)``.
    """

    value: JSONValue


@dataclass(frozen=True, slots=True)
class Format:
    """``Annotated[str, Format("date-time")]``: the string's format (``format``). One of
    :data:`FORMATS`; raises ``ValueError`` for any other (kube-apiserver ignores formats
    it does not know, which would make a typo a silent no-op)."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in FORMATS:
            raise ValueError(
                f"Format({self.name!r}): not a format kube-apiserver knows; "
                f"use one of {', '.join(sorted(FORMATS))}"
            )


@dataclass(frozen=True, slots=True)
class ListType:
    """``Annotated[list[Port], ListType("map", keys=("name",))]``: how a list merges under
    server-side apply (``x-kubernetes-list-type``, ``x-kubernetes-list-map-keys``).

    ``"atomic"`` (the default when unset: the list is replaced whole), ``"set"`` (items are
    unique scalars, or atomic lists or maps), or ``"map"`` (items are objects identified by
    ``keys``: scalar fields that are required or have a :class:`Default`). ``keys`` is
    required for ``"map"`` and refused otherwise (``ValueError``); the item type is
    checked when the schema is built.
    """

    type: Literal["atomic", "set", "map"]
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        where = f"ListType({self.type!r}, keys={self.keys!r})"
        if isinstance(self.keys, str) or not all(isinstance(k, str) and k for k in self.keys):
            raise ValueError(f"{where}: keys is a tuple of field names, keys=('name',)")
        object.__setattr__(self, "keys", tuple(self.keys))
        if self.type not in ("atomic", "set", "map"):
            raise ValueError(f'{where}: the type is "atomic", "set" or "map"')
        if self.type == "map" and not self.keys:
            raise ValueError(f"{where}: a map list needs keys, the fields naming an item")
        if self.type != "map" and self.keys:
            raise ValueError(f"{where}: only a map list has keys")
        if len(set(self.keys)) != len(self.keys):
            raise ValueError(f"{where}: a key is named twice")


@dataclass(frozen=True, slots=True)
class MapType:
    """``Annotated[dict[str, str], MapType("atomic")]``: how an object or a map merges
    under server-side apply (``x-kubernetes-map-type``): ``"granular"`` (the default when
    unset: field by field) or ``"atomic"`` (replaced whole). ``ValueError`` otherwise."""

    type: Literal["atomic", "granular"]

    def __post_init__(self) -> None:
        if self.type not in ("atomic", "granular"):
            raise ValueError(f'MapType({self.type!r}): use "atomic" or "granular"')


@dataclass(frozen=True, slots=True)
class PreserveUnknownFields:
    """``Annotated[Settings, PreserveUnknownFields()]``: kube-apiserver keeps the fields of
    this object that its schema does not name, instead of pruning them
    (``x-kubernetes-preserve-unknown-fields``). A field typed ``dict[str, JSONValue]`` or
    ``JSONValue`` keeps everything without this marker."""


@dataclass(frozen=True, slots=True)
class EmbeddedResource:
    """``Annotated[dict[str, JSONValue], EmbeddedResource()]``: the field holds a whole
    Kubernetes object (``apiVersion``, ``kind``, ``metadata``), validated as kube-apiserver
    validates objects (``x-kubernetes-embedded-resource``). On a typed model (a
    ``TypedDict`` such as ``ConfigMap``) its fields are kept; on ``dict[str, JSONValue]``
    every field is."""


@dataclass(frozen=True, slots=True)
class Rule:
    """A CEL validation rule (``x-kubernetes-validations``): ``self`` is the value of the
    field it is on (``oldSelf`` the previous one, in a transition rule).

    ``message`` (a fixed text) or ``message_expression`` (a CEL expression building it)
    is what a client sees when the rule fails; ``reason`` (one of :data:`RULE_REASONS`)
    and ``field_path`` (a path below this field, ``.spec.replicas``) shape the error.
    Checked as kube-apiserver checks them (``ValueError``): a rule is not empty, a message
    has no line break, a rule spanning lines has a message. The CEL itself is compiled by
    the server when the CRD is applied.

    On a field: ``Annotated[FooSpec, Rule("self.min <= self.max")]``; on a ``TypedDict``
    class (every field of that type gets it, the custom resource's own class included):
    the :func:`rules` decorator.
    """

    rule: str
    message: str | None = None
    message_expression: str | None = None
    reason: (
        Literal[
            "FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"
        ]
        | None
    ) = None
    field_path: str | None = None

    def __post_init__(self) -> None:
        where = f"Rule({self.rule!r})"
        if not isinstance(self.rule, str) or not self.rule.strip():
            raise ValueError(f"{where}: the rule is empty")
        if self.message is not None:
            if not self.message.strip():
                raise ValueError(f"{where}: message must be non-empty if given")
            if _NEWLINE.search(self.message.strip()):
                raise ValueError(f"{where}: message must not contain line breaks")
        if _NEWLINE.search(self.rule.strip()) and not (self.message or "").strip():
            raise ValueError(f"{where}: a rule spanning lines needs a message")
        if self.message_expression is not None and not self.message_expression.strip():
            raise ValueError(f"{where}: message_expression must be non-empty if given")
        if self.reason is not None and self.reason not in RULE_REASONS:
            raise ValueError(
                f"{where}: reason {self.reason!r} is not one of {', '.join(sorted(RULE_REASONS))}"
            )
        if self.field_path is not None:
            if not self.field_path.strip():
                raise ValueError(f"{where}: field_path must be non-empty if given")
            if _NEWLINE.search(self.field_path):
                raise ValueError(f"{where}: field_path must not contain line breaks")
            if not self.field_path.startswith("."):
                raise ValueError(
                    f"{where}: field_path {self.field_path!r} must start with '.' "
                    "(a path below the rule's field: .spec.replicas)"
                )

    def to_json(self) -> dict[str, JSONValue]:
        """The rule as an entry of ``x-kubernetes-validations``."""
        entry: dict[str, JSONValue] = {"rule": self.rule}
        if self.message is not None:
            entry["message"] = self.message
        if self.message_expression is not None:
            entry["messageExpression"] = self.message_expression
        if self.reason is not None:
            entry["reason"] = self.reason
        if self.field_path is not None:
            entry["fieldPath"] = self.field_path
        return entry


_rules_lock: Final = threading.Lock()
_class_rules: Final[dict[type, tuple[Rule, ...]]] = {}

_C = TypeVar("_C", bound=type)


def rules(*given: Rule) -> Callable[[_C], _C]:
    """Class decorator: CEL rules on every field typed with this ``TypedDict`` (and, on a
    custom resource's own class, on the object), after any rules given earlier for it.

    ::

        @rules(Rule("self.minReplicas <= self.maxReplicas", message="min above max"))
        class Range(TypedDict): ...

    Returns the class unchanged. Thread-safe. Raises ``TypeError`` when given something
    other than :class:`Rule` values, or when applied to anything but a class.
    """
    for rule in given:
        if not isinstance(rule, Rule):
            raise TypeError(f"rules() takes Rule(...) values, not {rule!r}")

    def decorate(cls: _C) -> _C:
        if not isinstance(cls, type):
            raise TypeError(f"@rules(...) decorates a TypedDict class, not {cls!r}")
        with _rules_lock:
            _class_rules[cls] = (*_class_rules.get(cls, ()), *given)
        return cls

    return decorate


def class_rules(cls: type) -> tuple[Rule, ...]:
    """The rules :func:`rules` gave ``cls`` (none if it gave none). Thread-safe."""
    return _class_rules.get(cls, ())
