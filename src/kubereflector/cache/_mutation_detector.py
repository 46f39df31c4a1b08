"""The cache mutation detector: client-go's ``KUBE_CACHE_MUTATION_DETECTOR``, for tests
(private to the cache; its check is public as
:func:`kubereflector.testing.check_cache_mutations`).

The objects an informer caches are shared: by the cache, its indexes, every handler
and every lister caller. Code that edits one in place (``pod["metadata"]["labels"]["x"]
= "y"`` on an object from a lister) silently changes what everybody else reads, and
the next event's ``old`` object no longer says what the server sent. Nothing stops it
at run time (the objects are plain dicts, for speed); this detector finds it.

With the environment variable ``KUBEREFLECTOR_CACHE_MUTATION_DETECTOR`` set to ``1``
or ``true`` (or client-go's ``KUBE_CACHE_MUTATION_DETECTOR``) when an informer is
made, the informer keeps a deep copy of every object it puts in its cache and
compares the two:

* when the informer stops: a mutation is logged at ERROR, naming the informer, the
  object and the paths that changed (never the values: they may be secrets);
* whenever :func:`check_cache_mutations` is called (this project's test suite calls
  it after every test, and fails the test): it raises :class:`CacheMutationError`
  listing every mutation found since the last call, logged or not.

It costs a deep copy of every object cached, kept for the informer's lifetime: for
tests, not production. Compact objects (which refuse writes) are not copied.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
import weakref
from collections.abc import Mapping
from typing import Any, Final

from .compact import CompactObject

__all__ = [
    "ENV_VARIABLES",
    "CacheMutationDetector",
    "CacheMutationError",
    "check_cache_mutations",
    "mutation_detector_enabled",
]

logger = logging.getLogger("kubereflector.shared_informer")

ENV_VARIABLES: Final = ("KUBEREFLECTOR_CACHE_MUTATION_DETECTOR", "KUBE_CACHE_MUTATION_DETECTOR")
"""The environment variables that turn the detector on (``1``, ``true``, ``yes``, ``on``)."""

_MAX_PATHS: Final = 5

_live: weakref.WeakSet[CacheMutationDetector] = weakref.WeakSet()
_live_lock = threading.Lock()


class CacheMutationError(AssertionError):
    """An object an informer cached was changed in place: the message names the
    informer, the object's key and the paths that changed."""


def mutation_detector_enabled() -> bool:
    """Whether the environment turns the detector on (read when an informer is made)."""
    for name in ENV_VARIABLES:
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    return False


def _changed_paths(before: Any, after: Any, path: str, out: list[str]) -> None:
    if len(out) >= _MAX_PATHS:
        return
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in sorted({*before, *after}, key=str):
            if key not in before or key not in after:
                out.append(f"{path}.{key}" if path else str(key))
            elif before[key] != after[key]:
                _changed_paths(before[key], after[key], f"{path}.{key}" if path else str(key), out)
        return
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            if b != a:
                _changed_paths(b, a, f"{path}[{i}]", out)
        return
    out.append(path or "(the object)")


def _key(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return "(an object without metadata)"
    name, namespace = meta.get("name"), meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


class CacheMutationDetector:
    """Keeps deep copies of the objects one informer cached and compares them with the
    originals (see the module documentation). Thread-safe."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._objects: list[tuple[Any, Any]] = []
        self._found: list[str] = []
        with _live_lock:
            _live.add(self)

    def add_object(self, obj: Any) -> None:
        """Remember ``obj`` as it is now (a dict; other objects are ignored)."""
        if type(obj) is CompactObject or not isinstance(obj, dict):
            return
        snapshot = copy.deepcopy(obj)
        with self._lock:
            self._objects.append((obj, snapshot))

    def _scan_locked(self) -> list[str]:
        """Compare; move each changed object out, as a line (returned and kept)."""
        found = []
        kept = []
        for obj, snapshot in self._objects:
            if obj == snapshot:
                kept.append((obj, snapshot))
                continue
            paths: list[str] = []
            _changed_paths(snapshot, obj, "", paths)
            found.append(
                f"{self.name}: the cached object {_key(snapshot)} was changed in place "
                f"(at {', '.join(paths)}): copy it (copy.deepcopy) before changing it"
            )
        self._objects = kept
        self._found.extend(found)
        return found

    def mutations(self) -> list[str]:
        """A line per object changed since it was cached, found by this call or an
        earlier :meth:`log`, each returned once."""
        with self._lock:
            self._scan_locked()
            found, self._found = self._found, []
        return found

    def check(self) -> None:
        """Raise :class:`CacheMutationError` if a cached object was changed (see
        :meth:`mutations`)."""
        found = self.mutations()
        if found:
            raise CacheMutationError("\n".join(found))

    def log(self) -> None:
        """Log what changed since the last look at ERROR (for an informer that stops,
        which cannot raise); :meth:`mutations` still returns it."""
        with self._lock:
            found = self._scan_locked()
        for line in found:
            logger.error("%s", line)

    def __repr__(self) -> str:
        return f"<CacheMutationDetector {self.name} objects={len(self._objects)}>"


def check_cache_mutations() -> None:
    """Raise :class:`CacheMutationError` if code changed an object an informer cached
    (client-go's cache mutation detector, for tests).

    With ``KUBEREFLECTOR_CACHE_MUTATION_DETECTOR=1`` (or client-go's
    ``KUBE_CACHE_MUTATION_DETECTOR=true``) in the environment when an informer is made,
    the informer keeps a deep copy of each object it caches; this compares every such
    informer's objects with their copies and lists each one changed since the last
    call (its key and the paths that changed, never the values), also logged at ERROR
    when its informer stops. Call it after each test (an autouse fixture) to fail the
    test that changed one. It costs a deep copy of every object cached: for tests."""
    with _live_lock:
        detectors = list(_live)
    found = [line for detector in detectors for line in detector.mutations()]
    if found:
        raise CacheMutationError("\n".join(found))
