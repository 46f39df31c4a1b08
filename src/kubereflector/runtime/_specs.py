"""A reconciler as a Manager registers it: :class:`Spec` (private)."""

from __future__ import annotations

from dataclasses import dataclass

from ..cache.keys import KubeObject
from ..client._models import model_info
from .handlers import Mapper
from .options import ControllerOptions
from .permissions import Permission
from .predicates import Predicate
from .reconcile import ReconcileFunc

__all__ = ["Spec", "is_resource"]


@dataclass(frozen=True, slots=True)
class Spec:
    """A reconciler as registered (names resolved at the start)."""

    reconcile: ReconcileFunc
    for_: str | type[KubeObject]
    owns: tuple[str | type[KubeObject], ...]
    watches: tuple[tuple[str | type[KubeObject], Mapper], ...]
    predicates: tuple[Predicate, ...]
    options: ControllerOptions
    name: str
    rbac: tuple[Permission, ...] = ()


def is_resource(resource: object) -> bool:
    """A resource name (non-empty) or a model class (checked when registered)."""
    if isinstance(resource, type):
        model_info(resource)  # LookupError naming a class that is not a registered model
        return True
    return isinstance(resource, str) and bool(resource)
