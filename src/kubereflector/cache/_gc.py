"""The collector's policy during bulk syncs: no full collections (private).

What: :func:`defer_full_collections` is a context manager for a *bulk sync*.
Three owners open one, each for its part of a list or relist, overlapping so
that there is no gap between them: the Reflector (the list, or a watch-list's
initial events, up to the store's ``replace``), the Controller (from that
``replace`` until its queue is drained) and each handler's listener (while the
notifications of a list or relist are buffered, until its handler has taken
them all; they hold the objects the relist replaced). While at least one is
open, in any thread, the threshold of the
collector's oldest generation is raised, so CPython does not run *full*
collections; young collections (generations 0 and 1) still run, so cyclic
garbage made meanwhile is still found while it is young. The Reflector's and
the Controller's windows are *sync* windows (``sync=True``): while at least one
is open, the middle generation is collected after every
:data:`SYNC_MIDDLE_THRESHOLD` young collections instead of every 10 (and the
oldest generation's threshold is raised in proportion, so a full collection
still comes after as many young ones). When the last window closes, the
thresholds are put back exactly as they were found.

Whose thresholds: the collector's thresholds are process state the application
owns. This module changes them only while one of its windows is open, and only
as said above, starting from the values it finds when the first window opens.
If anyone else sets them while a window is open, the module stops touching
them at once: later windows leave them alone, and when the last window closes
they are not put back (the application's newer decision wins). The next
window, once all have closed, starts from the application's new values.

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

Why smaller middle-generation batches during a sync: while a sync's objects
pile up, every object survives, so each one is traversed once by a young
collection and once by the middle generation's, whatever the thresholds; what
the thresholds change is how cold that second traversal is. With batches of
3 young collections (~2,100 objects) instead of 10 (~7,000), it runs over
objects still in the CPU's caches: in ``benchmarks/informers.py`` (10,000
Pods, emulator, 5 interleaved runs) the collector's time during the
watch-list sync fell from 0.117 s to 0.087 s (median; 0.093-0.158 against
0.078-0.096) and during the paged list from 0.094 s to 0.069 s. Batches of 1
gave about the same; larger young batches (generation 0's threshold raised 4x,
10x and 30x) made it worse (0.15, 0.20 and 0.31 s against 0.13 s), colder
again. The window is not opened for a listener's buffered notifications: the
watch that follows a sync keeps CPython's young thresholds.

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

__all__ = [
    "FULL_THRESHOLD_FACTOR",
    "SYNC_MIDDLE_THRESHOLD",
    "defer_full_collections",
    "is_effective",
]

FULL_THRESHOLD_FACTOR: Final = 100
"""While a window is open, the oldest generation's threshold is this many times
higher (10 -> 1,000 young-generation collections, ~7 million net container
allocations with the default thresholds). When a sync window lowers the middle
generation's threshold, the oldest one's is raised in proportion, so the number
of young collections before a full one stays the same."""

SYNC_MIDDLE_THRESHOLD: Final = 3
"""While a sync window is open, the middle generation (1) is collected after
this many young collections instead of CPython's 10 (an application's lower
setting is kept)."""


def _supported() -> bool:
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 14):
        return False
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return False
    return hasattr(gc, "get_threshold") and hasattr(gc, "set_threshold")


_SUPPORTED: Final = _supported()

_lock = threading.Lock()
_depth = 0
_sync_depth = 0
_saved: tuple[int, ...] | None = None
"""The thresholds found when the outermost window opened (``None``: this module
manages nothing until every window has closed)."""
_applied: tuple[int, ...] | None = None
"""The thresholds this module set last (``None``: it set nothing)."""


def is_effective() -> bool:
    """Whether windows change anything on this interpreter."""
    return _SUPPORTED


def _policy(found: tuple[int, ...], sync: bool) -> tuple[int, ...]:
    """The thresholds of a window, from the application's ``found``."""
    young, middle, old, *rest = found
    # Young collections before a full one: the same whatever ``middle`` is.
    budget = max(old, 1) * FULL_THRESHOLD_FACTOR * max(middle, 1)
    if sync and middle > SYNC_MIDDLE_THRESHOLD:
        middle = SYNC_MIDDLE_THRESHOLD
    return (young, middle, -(-budget // max(middle, 1)), *rest)


def _apply_locked() -> None:
    """Set the thresholds the open windows call for (with ``_lock`` held)."""
    global _saved, _applied
    if _saved is None:
        return
    current = gc.get_threshold()
    if _applied is not None and current != _applied:
        _saved = _applied = None  # the application changed them meanwhile: theirs now
        return
    wanted = _policy(_saved, _sync_depth > 0)
    if wanted != current:
        gc.set_threshold(*wanted)
        _applied = gc.get_threshold()


def _open(sync: bool) -> None:
    global _depth, _sync_depth, _saved, _applied
    with _lock:
        _depth += 1
        _sync_depth += sync
        if _depth == 1:
            found = gc.get_threshold()
            # threshold0 == 0: automatic collection is off, nothing to defer.
            _saved = found if len(found) >= 3 and found[0] != 0 else None
            _applied = None
        _apply_locked()


def _close(sync: bool) -> None:
    global _depth, _sync_depth, _saved, _applied
    with _lock:
        if _depth == 0:  # pragma: no cover - a bug, not a state to repair
            raise RuntimeError("defer_full_collections: more closes than opens")
        _depth -= 1
        _sync_depth -= sync
        if _depth > 0:
            _apply_locked()
            return
        saved, applied = _saved, _applied
        _saved = _applied = None
        if saved is not None and applied is not None and gc.get_threshold() == applied:
            gc.set_threshold(*saved)


@contextlib.contextmanager
def defer_full_collections(*, sync: bool = False) -> Iterator[None]:
    """Defer the collector's full collections for the duration of the block (see
    the module documentation); with ``sync``, the block is part of an initial
    sync or a relist, and while one such window is open the middle generation is
    also collected in smaller batches (:data:`SYNC_MIDDLE_THRESHOLD`). The
    application's thresholds are restored when the last window closes,
    exceptions and cancellation included, unless it changed them meanwhile.
    No-op where :func:`is_effective` is false."""
    if not _SUPPORTED:
        yield
        return
    _open(sync)
    try:
        yield
    finally:
        _close(sync)
