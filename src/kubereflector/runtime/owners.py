"""Owner references: who owns an object, and who controls it (controller-runtime's
``controllerutil`` owner helpers, for Kubernetes JSON objects and typed models).

An owner reference ties a dependent object to its owner: the garbage collector deletes
the dependent when the owner goes, and a controller that ``owns=`` the dependent's
resource reconciles the owner when the dependent changes (only the reference marked
``controller: true``, of which an object has at most one, counts for that).

* :func:`set_controller_reference` makes ``owner`` the controller of ``obj``;
* :func:`set_owner_reference` adds ``owner`` as a plain (non-controller) owner;
* :func:`remove_owner_reference` takes ``owner``'s reference out;
* :func:`is_controlled_by`, :func:`get_controller_of` and :func:`get_owner_references`
  read them.

References are matched as controller-runtime matches them: by the group of the
``apiVersion`` (any version), the ``kind`` and the ``name``. The setters refuse what
the API server or its garbage collector would not honour: an owner without
``apiVersion``, ``kind``, ``metadata.name`` or ``metadata.uid`` (the API server
refuses such a reference), a second controller (the API server refuses it), an owner
in another namespace than ``obj`` and a namespaced owner of a cluster-scoped object
(ownerReferences carry no namespace: the garbage collector looks for the owner in the
dependent's namespace, finds none and deletes the dependent). Each raises
:class:`OwnerReferenceError` (a ``ValueError``) naming the objects.

The setters change ``obj`` in place (its ``metadata.ownerReferences`` list) and return
it: give them your own copy, never an object from the cache. Pure functions otherwise;
thread-safe on distinct objects.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any, TypeVar

__all__ = [
    "AlreadyOwnedError",
    "OwnerReferenceError",
    "get_controller_of",
    "get_owner_references",
    "is_controlled_by",
    "remove_owner_reference",
    "set_controller_reference",
    "set_owner_reference",
]

ObjT = TypeVar("ObjT", bound=Mapping[str, Any])


class OwnerReferenceError(ValueError):
    """An owner reference that cannot be set (or removed): the message names the owner
    and the object, and says why."""


class AlreadyOwnedError(OwnerReferenceError):
    """The object already has another controller (controller-runtime's
    ``AlreadyOwnedError``): ``owner`` is that controller's reference."""

    def __init__(self, message: str, owner: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.owner = dict(owner)


def _group(api_version: object) -> str | None:
    if not isinstance(api_version, str) or not api_version:
        return None
    group, _, version = api_version.rpartition("/")
    return group if version else None


def _meta(obj: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise TypeError(f"the {what} is a Kubernetes object (a mapping), not {type(obj).__name__}")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise OwnerReferenceError(f"the {what} has no metadata")
    return meta


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    kind = obj.get("kind") or "object"
    namespace = meta.get("namespace")
    name = meta.get("name") or "(no name)"
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _reference_to(owner: Mapping[str, Any]) -> dict[str, Any]:
    """The reference to ``owner`` (apiVersion, kind, name, uid), or OwnerReferenceError
    naming the fields it lacks."""
    meta = _meta(owner, "owner")
    fields = {
        "apiVersion": owner.get("apiVersion"),
        "kind": owner.get("kind"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
    }
    missing = [
        ("metadata." + k if k in ("name", "uid") else k)
        for k, v in fields.items()
        if not isinstance(v, str) or not v
    ]
    if missing:
        raise OwnerReferenceError(
            f"the owner {_describe(owner)} has no {', '.join(missing)}: an owner reference "
            "needs all four (read the owner from the cache or the API server, which sets them)"
        )
    return fields


def _same_object(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """controller-runtime's ``referSameObject``: group (of the apiVersion), kind, name."""
    group = _group(a.get("apiVersion"))
    return (
        group is not None
        and group == _group(b.get("apiVersion"))
        and a.get("kind") == b.get("kind")
        and a.get("name") == b.get("name")
    )


def _validate_scope(owner: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
    owner_namespace = _meta(owner, "owner").get("namespace") or ""
    if not owner_namespace:
        return  # a cluster-scoped owner may own anything
    namespace = _meta(obj, "object").get("namespace") or ""
    if not namespace:
        raise OwnerReferenceError(
            f"{_describe(obj)} is cluster-scoped and cannot have the namespaced owner "
            f"{_describe(owner)} (owner's namespace {owner_namespace!r})"
        )
    if namespace != owner_namespace:
        raise OwnerReferenceError(
            f"cross-namespace owner references are disallowed: the owner {_describe(owner)} "
            f"is in namespace {owner_namespace!r}, {_describe(obj)} in {namespace!r}"
        )


def _references(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``obj``'s ownerReferences list, to change in place (made if missing)."""
    meta = _meta(obj, "object")
    if not isinstance(meta, MutableMapping):
        raise TypeError(
            f"{_describe(obj)} is read-only: set owner references on a copy of your own "
            "(copy.deepcopy of a cached object)"
        )
    refs = meta.get("ownerReferences")
    if refs is None:
        refs = meta["ownerReferences"] = []
    elif not isinstance(refs, list):
        raise OwnerReferenceError(f"{_describe(obj)} has ownerReferences that are not a list")
    return refs


def _upsert(obj: Mapping[str, Any], ref: dict[str, Any]) -> None:
    refs = _references(obj)
    for i, existing in enumerate(refs):
        if isinstance(existing, Mapping) and _same_object(existing, ref):
            refs[i] = ref
            return
    refs.append(ref)


def get_owner_references(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``obj``'s owner references (a new list of the entries; empty without any)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    if not isinstance(refs, list):
        return []
    return [ref for ref in refs if isinstance(ref, Mapping)]


def get_controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The reference of ``obj``'s controller (the ``ownerReferences`` entry with
    ``controller: true``), or ``None`` (apimachinery's ``GetControllerOf``)."""
    for ref in get_owner_references(obj):
        if ref.get("controller") is True:
            return ref
    return None


def is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """Whether ``owner`` is ``obj``'s controller: the controller reference names
    ``owner``'s group (any version), kind and name, and its ``uid`` is ``owner``'s (a
    reference to an owner deleted and created again under the same name is not
    ``owner``'s)."""
    ref = get_controller_of(obj)
    if ref is None:
        return False
    meta = owner.get("metadata") if isinstance(owner, Mapping) else None
    if not isinstance(meta, Mapping):
        return False
    target = {"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind")}
    target["name"] = meta.get("name")
    return _same_object(ref, target) and ref.get("uid") == meta.get("uid")


def set_controller_reference(
    owner: Mapping[str, Any], obj: ObjT, *, block_owner_deletion: bool = True
) -> ObjT:
    """Make ``owner`` the controller of ``obj`` (controller-runtime's
    ``SetControllerReference``): an ownerReference with ``controller: true`` and
    ``blockOwnerDeletion`` (default ``True``), replacing any reference ``obj`` has to
    the same owner. Returns ``obj``, changed in place.

    Raises :class:`AlreadyOwnedError` if another object controls ``obj`` already, and
    :class:`OwnerReferenceError` for an owner the API server or the garbage collector
    would not honour (see the module documentation)."""
    ref = _reference_to(owner)
    _validate_scope(owner, obj)
    ref["controller"] = True
    ref["blockOwnerDeletion"] = bool(block_owner_deletion)
    current = get_controller_of(obj)
    if current is not None and not _same_object(current, ref):
        raise AlreadyOwnedError(
            f"{_describe(obj)} is already controlled by {current.get('kind')} "
            f"{current.get('name')}: it cannot also be controlled by {_describe(owner)}",
            current,
        )
    _upsert(obj, ref)
    return obj


def set_owner_reference(owner: Mapping[str, Any], obj: ObjT) -> ObjT:
    """Add ``owner`` to ``obj``'s owners without making it the controller
    (controller-runtime's ``SetOwnerReference``): the garbage collector deletes ``obj``
    once all its owners are gone. A reference to the same owner is replaced (it loses
    any ``controller`` flag). Returns ``obj``, changed in place. Raises
    :class:`OwnerReferenceError` as :func:`set_controller_reference` does."""
    ref = _reference_to(owner)
    _validate_scope(owner, obj)
    _upsert(obj, ref)
    return obj


def remove_owner_reference(owner: Mapping[str, Any], obj: ObjT) -> ObjT:
    """Take ``owner``'s reference (controller or not) out of ``obj``'s owners
    (controller-runtime's ``RemoveOwnerReference``). Returns ``obj``, changed in place;
    raises :class:`OwnerReferenceError` if ``obj`` has no reference to ``owner``."""
    meta = _meta(owner, "owner")
    target = {"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind")}
    target["name"] = meta.get("name")
    refs = _references(obj) if get_owner_references(obj) else []
    for i, ref in enumerate(refs):
        if isinstance(ref, Mapping) and _same_object(ref, target):
            del refs[i]
            return obj
    raise OwnerReferenceError(f"{_describe(obj)} has no owner reference to {_describe(owner)}")
