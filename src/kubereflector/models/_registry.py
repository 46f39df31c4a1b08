"""Which API resource each model is served as: the registry behind
:func:`kubereflector.models.resource_of`. Private to :mod:`kubereflector.models`.

The generated model modules register every built-in kind with REST paths when they are
imported; custom resources register their own models. Light on purpose: importing it
loads no HTTP client.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Final

__all__ = ["ApiResource", "register", "resource_of"]


@dataclass(frozen=True, slots=True)
class ApiResource:
    """A REST resource of the Kubernetes API: enough to list, watch and write its objects
    without asking the server's discovery.

    ``group`` is ``""`` for the core group; ``plural`` is the resource name in URLs
    (``pods``); ``namespaced`` says whether its objects live in namespaces. Raises
    ``ValueError`` when ``version``, ``kind`` or ``plural`` is empty. Immutable, hashable.
    The client's ``ResourceInfo`` says the same and what only discovery knows (verbs,
    short names); this one lives apart so that the models load no HTTP client.
    """

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    def __post_init__(self) -> None:
        for name in ("version", "kind", "plural"):
            if not getattr(self, name):
                raise ValueError(f"ApiResource needs a {name}: {self!r}")

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` of its objects: ``"v1"``, ``"apps/v1"``."""
        return f"{self.group}/{self.version}" if self.group else self.version


_lock: Final = threading.Lock()
_resources: Final[dict[type[object], ApiResource]] = {}


def _name(model: object) -> str:
    module = getattr(model, "__module__", None)
    name = getattr(model, "__qualname__", None) or repr(model)
    return f"{module}.{name}" if module else name


def register(model: type[object], resource: ApiResource) -> None:
    """Record that objects of ``model`` (a class, usually a ``TypedDict``) are served as
    ``resource``, so :func:`resource_of` answers for it.

    Thread-safe. Registering the same pair again does nothing; raises ``TypeError`` when
    ``model`` is not a class or ``resource`` not an :class:`ApiResource`, and
    ``ValueError`` when ``model`` is already registered as another resource. Several
    models may share one resource (a narrower model of your own for a built-in kind).
    """
    if not isinstance(model, type):
        raise TypeError(f"register() takes a model class, not {model!r}")
    if not isinstance(resource, ApiResource):
        raise TypeError(f"register() takes an ApiResource for {_name(model)}, not {resource!r}")
    with _lock:
        known = _resources.setdefault(model, resource)
    if known != resource:
        raise ValueError(f"{_name(model)} is already registered as {known}, not {resource}")


def resource_of(model: type[object]) -> ApiResource:
    """The resource ``model`` is served as: its group, version, kind, plural and scope.

    Every built-in kind with REST paths is registered once its class is imported
    (``from kubereflector.models import Pod``); other classes once passed to
    :func:`register`. Thread-safe. Raises ``LookupError`` naming the class otherwise
    (a built-in kind served only as a subresource, such as ``Scale``, has no resource).
    """
    try:
        return _resources[model]
    except (KeyError, TypeError):
        raise LookupError(
            f"{_name(model)} is not a registered model: register it with "
            "kubereflector.models.register(model, ApiResource(...))"
        ) from None
