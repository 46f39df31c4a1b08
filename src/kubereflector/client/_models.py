"""A model class as a resource: what the client, the factory and the manager do with
``Pod`` where they take ``"pods"``. Private to the library.

A model is any class :func:`kubereflector.models.resource_of` knows: the generated
models of the built-in kinds (registered when their module is imported, which
``from kubereflector.models import Pod`` does) and the classes passed to
:func:`kubereflector.models.register` (custom resources). Its group, version, kind,
plural and scope are the registry's, so resolving it asks the server nothing.
"""

from __future__ import annotations

from ..models import ApiResource, resource_of
from .discovery import ResourceInfo

__all__ = ["check_resource", "model_info"]

_infos: dict[ApiResource, ResourceInfo] = {}
"""Each registration's ResourceInfo, made (and its names validated) once: a reconcile asks
``client.resource(Foo, ...)`` per write. Racing threads may both make an equal one."""


def model_info(model: type) -> ResourceInfo:
    """The :class:`ResourceInfo` of a registered model, without a request: its group,
    version, plural, kind and scope (no verbs: every verb is tried, and the server
    answers for those it lacks).

    Thread-safe. Raises ``LookupError`` naming the class when it is not a registered
    model (see :func:`kubereflector.models.register`)."""
    api = resource_of(model)
    info = _infos.get(api)
    if info is None:
        info = _infos[api] = ResourceInfo(
            api.group, api.version, api.plural, api.kind, api.namespaced
        )
    return info


def check_resource(resource: object) -> None:
    """Raise ``TypeError`` naming what ``resource`` is unless it is a name, a
    :class:`ResourceInfo` or a class (checked as a model when it is resolved)."""
    if not isinstance(resource, (str, ResourceInfo, type)):
        raise TypeError(
            "a resource is a name, a ResourceInfo or a model class (kubereflector.models), "
            f"not {type(resource).__name__}"
        )
