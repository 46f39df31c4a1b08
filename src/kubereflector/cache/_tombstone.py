"""The tombstone of an object whose delete was missed: :class:`DeletedFinalStateUnknown`.

Importable from :mod:`kubereflector.cache.keys` and ``kubereflector``; apart from
:mod:`~kubereflector.cache.keys` so that the key functions compile with mypyc, which
would turn this generic dataclass into one that cannot be subscripted
(``DeletedFinalStateUnknown[Pod]`` would raise ``TypeError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic

from typing_extensions import TypeVar

__all__ = ["DeletedFinalStateUnknown"]

# cache.keys' T_co (KubeObject is Mapping[str, Any]), not imported from there: keys
# imports this module.
_T_co = TypeVar("_T_co", covariant=True, default=Mapping[str, Any])


# Not slots=True: a frozen dataclass recreated with slots cannot be instantiated
# through its generic alias (``DeletedFinalStateUnknown[Pod](key, pod)`` raises
# TypeError on Python 3.10 and 3.11). Tombstones are rare; the __dict__ costs nothing.
@dataclass(frozen=True)
class DeletedFinalStateUnknown(Generic[_T_co]):
    """Tombstone for an object whose delete was missed (seen only through a relist).

    ``obj`` is the last state the cache knew, possibly stale, or ``None`` if
    nothing was known. ``key`` is the object's key; key funcs of this package
    return it as the tombstone's own key. Handlers get one in ``on_delete`` in
    place of the object: ``DeletedFinalStateUnknown[T]`` wraps a ``T``.
    """

    key: str
    obj: _T_co | None
