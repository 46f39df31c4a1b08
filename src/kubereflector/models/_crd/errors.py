"""The error a custom resource's schema raises, and where in the Python types it points.
Private to :mod:`kubereflector.models`; the error is public through
:mod:`kubereflector.models.crd`. Light on purpose: importing the declarations loads no
schema machinery."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StructuralSchemaError", "Where"]


class StructuralSchemaError(TypeError):
    """A Python type that cannot be part of a custom resource's structural schema, or a
    declaration kube-apiserver would refuse. The message names the model, the class and
    field (``FooSpec.replicas``) and where that field is in the object
    (``.spec.replicas``)."""


@dataclass(frozen=True, slots=True)
class Where:
    """Where the walk is: the custom resource, the class and field being read, the path."""

    root: type
    owner: type
    field: str | None
    path: str

    def at(self, owner: type, field: str) -> Where:
        return Where(self.root, owner, field, f"{self.path}.{field}")

    def item(self) -> Where:
        return Where(self.root, self.owner, self.field, f"{self.path}[*]")

    def error(self, message: str) -> StructuralSchemaError:
        """The error ``message`` at this place: ``FooSpec.replicas (at .spec.replicas of
        Foo): message``, or ``Foo: message`` at the object itself."""
        if self.field is None and not self.path:
            return StructuralSchemaError(f"{self.owner.__name__}: {message}")
        where = f"{self.owner.__name__}.{self.field}" if self.field else self.owner.__name__
        path = self.path or "the object"
        return StructuralSchemaError(f"{where} (at {path} of {self.root.__name__}): {message}")
