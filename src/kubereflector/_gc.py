"""Keeping the collector's full collections out of bulk syncs (private).

What: :func:`defer_full_collections` is a context manager for a *bulk sync*.
Three owners open one, each for its part of a list or relist, overlapping so
that there is no gap between them: the Reflector (the list, or a watch-list's
initial events, up to the store's ``replace``), the Controller (from that
``replace`` until its queue is drained) and each handler's listener (while the
notifications of a list or relist are buffered, until its handler has taken
them all; they hold the objects the relist replaced). While at least one is
open, in any thread, the threshold of the
collector's oldest generation is raised, so CPython does not run *full*
collections; young collections (generations 0 and 1) run as usual, so cyclic
garbage made meanwhile is still found while it is young. When the last one
closes, the thresholds are put back exactly as they were found (unless someone
changed them in between: then theirs are left alone).

Why: a sync of 10,000 Pods (~50 MB of JSON) makes ~630,000 tracked containers
that all survive. CPython collects its oldest generation each time that
generation has grown by a quarter, so while the heap grows from nothing to that
size it is traversed in full again and again: 8-9 full collections, ~5 heaps'
worth of traversal. In ``benchmarks/informers.py`` (CPython 3.11) that was
0.72 s of a 1.2 s SharedIndexInformer sync, about three times the decoding
itself, while all young collections together took 0.08 s. With the window the
sync took 0.54 s, with no full collection in it; what is left is a single full
collection of the new heap, which comes with the next ones the application's
own allocations trigger (collector time over the sync and the 300,000
allocations after it: 1.65 s without the window, 1.01 s with it). The same
sync made of stdlib ``json`` decodes ran 8-9 full collections on CPython 3.10,
3.11 and 3.12 and 4 on 3.13 (0.45-1.0 s), none with the window.

Why this and not something else (measured in ``benchmarks/informers.py``):

* ``gc.disable()`` for the sync: the young collections then do not happen
  either; the first one after it traverses every new object at once, cold
  (sync 0.65 s, collector time over the sync and after it 1.6 s, as without
  a remedy), and no cyclic garbage would be collected anywhere in the
  process meanwhile;
* a generation-0 threshold raised 100x for the sync: fewer, colder young
  collections (sync 0.66 s, 1.23 s in all);
* ``gc.freeze()`` after the sync takes the cache out of every later
  collection (0.1 s in all), but it also freezes every other object of the
  process, garbage cycles included, for good: a decision only the
  application may take (it can, after ``wait_for_cache_sync``);
* decoding into untracked structures: the objects are ``dict`` s and
  ``list`` s by contract (dicts of plain values are untracked already).

Bounds: the collector's own trigger stays in place at a raised level
(:data:`FULL_THRESHOLD_FACTOR` times the oldest generation's threshold), so a
window that lasts while other code allocates heavily still gets a full
collection after roughly that many young-generation collections; the windows
the Reflector opens end with the sync attempt (success, error or cancellation).

Where it changes nothing: CPython 3.14 and later (an incremental collector that
bounds the old generation's work by itself), free-threaded builds, and
interpreters without generational thresholds (PyPy): there it is a no-op.

Thread-safety: reentrant and safe from any thread; the windows of every thread
and event loop are counted together under one lock.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import sysconfig
import threading
from collections.abc import Iterator
from typing import Final

__all__ = ["FULL_THRESHOLD_FACTOR", "defer_full_collections", "is_effective"]

FULL_THRESHOLD_FACTOR: Final = 100
"""While a window is open, the oldest generation's threshold is this many times
higher (10 -> 1,000 young-generation collections, ~7 million net container
allocations with the default thresholds)."""


def _supported() -> bool:
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 14):
        return False
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return False
    return hasattr(gc, "get_threshold") and hasattr(gc, "set_threshold")


_SUPPORTED: Final = _supported()

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, ...] | None = None
"""The thresholds found when the outermost window opened."""
_applied: tuple[int, ...] | None = None
"""The thresholds this module set (``None``: it set nothing)."""


def is_effective() -> bool:
    """Whether windows change anything on this interpreter."""
    return _SUPPORTED


def _open() -> None:
    global _depth, _saved, _applied
    with _lock:
        _depth += 1
        if _depth > 1:
            return
        thresholds = gc.get_threshold()
        _saved = thresholds
        _applied = None
        if len(thresholds) < 3 or thresholds[0] == 0:
            return  # automatic collection is off (threshold0 == 0): nothing to defer
        raised = max(thresholds[2], 1) * FULL_THRESHOLD_FACTOR
        if raised <= thresholds[2]:
            return
        applied = (thresholds[0], thresholds[1], raised, *thresholds[3:])
        gc.set_threshold(*applied)
        _applied = gc.get_threshold()


def _close() -> None:
    global _depth, _saved, _applied
    with _lock:
        if _depth == 0:  # pragma: no cover - a bug, not a state to repair
            raise RuntimeError("defer_full_collections: more closes than opens")
        _depth -= 1
        if _depth > 0:
            return
        saved, applied = _saved, _applied
        _saved = _applied = None
        if saved is not None and applied is not None and gc.get_threshold() == applied:
            gc.set_threshold(*saved)


@contextlib.contextmanager
def defer_full_collections() -> Iterator[None]:
    """Defer the collector's full collections for the duration of the block (see
    the module documentation); the thresholds are restored on the way out,
    exceptions and cancellation included. No-op where :func:`is_effective` is
    false."""
    if not _SUPPORTED:
        yield
        return
    _open()
    try:
        yield
    finally:
        _close()
