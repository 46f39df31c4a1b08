"""Object keys and metadata accessors.

Objects are plain ``dict``s shaped like Kubernetes JSON, or
:class:`~kubereflector.CompactObject` s (informers in compact mode). Every
helper here also accepts an object whose ``metadata`` is an attribute (the
official ``kubernetes`` client's models), whose metadata in turn may be a
``dict`` or an object with ``name``/``namespace``/``resource_version`` attributes.

All functions are pure and thread-safe. Errors never include the object's full
content (it may be a Secret): they name the kind and whatever identity is known.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, cast, overload

from typing_extensions import TypeVar

from .._compiled import mypyc_attr
from ._tombstone import DeletedFinalStateUnknown
from .compact import CompactMetadata, CompactObject, _compact_identity, _compact_resource_version

__all__ = [
    "DeletedFinalStateUnknown",
    "ExplicitKey",
    "KeyFunc",
    "KeyFuncError",
    "KubeObject",
    "deletion_handling_meta_namespace_key_func",
    "get_labels",
    "get_metadata",
    "get_name",
    "get_namespace",
    "get_resource_version",
    "get_uid",
    "meta_namespace_key_func",
    "split_meta_namespace_key",
]

KubeObject: TypeAlias = Mapping[str, Any]
"""A Kubernetes object as decoded JSON (``{"kind": ..., "metadata": {...}, ...}``): the
type the cache, the listers and the handlers hold unless told otherwise.

It is a *read-only* mapping because the objects a cache hands out are shared (by
the cache, its indexes, every handler and every lister caller) and must not be
mutated: ``mypy`` rejects ``pod["metadata"] = ...``. (The values inside are
``Any``, so it cannot catch ``pod["metadata"]["labels"] = ...``: do not do that
either.) At runtime the objects are plain ``dict`` objects (in an informer's
compact mode, :class:`~kubereflector.CompactObject` s, which refuse writes); for a
copy of your own to change, take ``copy.deepcopy(obj)`` (a ``dict`` in both modes;
or ``dict(obj)`` for a shallow one).

Every generic class and protocol of kubereflector (``SharedIndexInformer[T]``,
``Indexer[T]``, ``Lister[T]``, ``ResourceEventHandler[T]``, ...) defaults to it, so
``Lister`` means ``Lister[KubeObject]``; parametrise them to say your cache holds
something else (e.g. models made by a transform). The typed models of
:mod:`kubereflector.models` parametrise them for you: ``factory.informer_for(Pod)``
is a ``SharedIndexInformer[Pod]``, ``client.resource(Pod)`` a ``ResourceClient[Pod]``.
"""

# The type of the objects a cache, queue or informer holds (PEP 696 default: KubeObject),
# and its variants for protocols that only hand objects out (_co) or only take them in
# (_contra). Shared by the modules of the package; not part of its API.
T = TypeVar("T", default=KubeObject)
T_co = TypeVar("T_co", covariant=True, default=KubeObject)
T_contra = TypeVar("T_contra", contravariant=True, default=KubeObject)
# The type of the objects of one resource as the API serves them: a mapping, typed by a
# model of kubereflector.models (a TypedDict: Pod, Deployment, a custom resource's) or
# KubeObject. What the client and the factory are generic over.
ModelT = TypeVar("ModelT", bound=Mapping[str, Any], default=KubeObject)

KeyFunc = Callable[[Any], str]
"""Maps an object to its store key. Must be deterministic and thread-safe."""


@mypyc_attr(native_class=False)
class KeyFuncError(ValueError):
    """A key could not be computed for an object (it lacks the field named in the message)."""


@mypyc_attr(native_class=False)
class ExplicitKey(str):
    """A string that is its own key: key funcs return it unchanged."""

    __slots__ = ()


def _describe(obj: Any) -> str:
    """A short, secret-free description of an object for error messages."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else getattr(obj, "kind", None)
    return f"object of kind {kind!r}" if kind else f"object of type {type(obj).__name__}"


@overload
def get_metadata(obj: Mapping[str, Any]) -> Mapping[str, Any] | None: ...


@overload
def get_metadata(obj: object) -> Any: ...


def get_metadata(obj: object) -> Any:
    """Return the object's metadata, or ``None``: for a mapping (a JSON object such as a
    :data:`KubeObject`) its ``"metadata"`` mapping, for anything else its ``metadata``
    attribute (an official client model's ``V1ObjectMeta``, typed as the model says)."""
    kind = type(obj)
    if kind is dict or kind is CompactObject or isinstance(obj, Mapping):
        return cast("Mapping[str, Any]", obj).get("metadata")
    return getattr(obj, "metadata", None)


def _meta_field(meta: Any, json_name: str, attr_name: str) -> Any:
    if meta is None:
        return None
    kind = type(meta)
    if kind is dict or kind is CompactMetadata or isinstance(meta, Mapping):
        return meta.get(json_name)
    return getattr(meta, attr_name, None)


def get_name(obj: Any) -> str | None:
    """``metadata.name``, or ``None``."""
    return _meta_field(get_metadata(obj), "name", "name")  # type: ignore[no-any-return]


def get_namespace(obj: Any) -> str | None:
    """``metadata.namespace``, or ``None``."""
    return _meta_field(get_metadata(obj), "namespace", "namespace")  # type: ignore[no-any-return]


def get_resource_version(obj: Any) -> str | None:
    """``metadata.resourceVersion``, or ``None``."""
    meta = get_metadata(obj)
    if type(meta) is CompactMetadata:
        return _compact_resource_version(meta)
    return _meta_field(meta, "resourceVersion", "resource_version")  # type: ignore[no-any-return]


def get_uid(obj: Any) -> str | None:
    """``metadata.uid``, or ``None``."""
    return _meta_field(get_metadata(obj), "uid", "uid")  # type: ignore[no-any-return]


def get_labels(obj: Any) -> Mapping[str, str]:
    """``metadata.labels`` (empty when absent). The mapping is the object's own: do not mutate."""
    labels = _meta_field(get_metadata(obj), "labels", "labels")
    return labels if labels else {}


def meta_namespace_key_func(obj: Any) -> str:
    """``"namespace/name"``, or ``"name"`` for an object without a namespace.

    An :class:`ExplicitKey` is returned unchanged. Raises :class:`KeyFuncError`
    naming the missing field when the object has no metadata or no name.
    """
    # Fast paths for the common cases: a decoded JSON dict, a compact object.
    # This runs once per event.
    if type(obj) is dict:
        meta = obj.get("metadata")
        if type(meta) is dict:
            name = meta.get("name")
            if name and type(name) is str:
                namespace = meta.get("namespace")
                return f"{namespace}/{name}" if namespace else name
    elif type(obj) is CompactObject:
        namespace, name = _compact_identity(obj)
        if name and type(name) is str:
            return f"{namespace}/{name}" if namespace else name
    if isinstance(obj, ExplicitKey):
        return obj
    meta = get_metadata(obj)
    if meta is None:
        raise KeyFuncError(f"cannot compute a key: {_describe(obj)} has no metadata")
    name = _meta_field(meta, "name", "name")
    if not name:
        namespace = _meta_field(meta, "namespace", "namespace")
        where = f" in namespace {namespace!r}" if namespace else ""
        raise KeyFuncError(f"cannot compute a key: {_describe(obj)}{where} has no metadata.name")
    if not isinstance(name, str):
        raise KeyFuncError(
            f"cannot compute a key: {_describe(obj)} has a metadata.name of type "
            f"{type(name).__name__}, not str"
        )
    namespace = _meta_field(meta, "namespace", "namespace")
    return f"{namespace}/{name}" if namespace else name


def deletion_handling_meta_namespace_key_func(obj: Any) -> str:
    """Like :func:`meta_namespace_key_func`, but a :class:`DeletedFinalStateUnknown`
    yields its own ``key``."""
    if type(obj) is DeletedFinalStateUnknown:
        return obj.key
    return meta_namespace_key_func(obj)


def split_meta_namespace_key(key: str) -> tuple[str, str]:
    """Split ``"ns/name"`` into ``("ns", "name")`` and ``"name"`` into ``("", "name")``.

    Raises :class:`ValueError` for a key with more than one ``/``.
    """
    parts = key.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ValueError(f"unexpected key format {key!r}: expected 'name' or 'namespace/name'")
