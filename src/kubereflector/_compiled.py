"""Which form of kubereflector runs: pure Python, or with hot paths compiled by mypyc;
and what the compiled modules' source needs to compile.

The package installs as pure Python by default; ``KUBEREFLECTOR_MYPYC=1 pip install .``
builds the compiled form, in which a few per-event modules (listed in ``pyproject.toml``
under ``[tool.hatch.build.targets.wheel.hooks.custom]``) are C extensions built by mypyc
from the same source, beside their ``.py`` files. Both forms behave the same, but for
one thing: mypyc drops docstrings, so ``help()`` shows none for what the compiled modules
define (mypyc/mypyc#437; the documentation, IDEs and type checkers read the ``.py``
files). :func:`compiled_modules` says which modules of the installed package are
compiled; ``kubereflector.__compiled__`` holds its answer.

mypyc compiles a subset of Python, and two of its gaps are silent (the compiled code
runs, and differs); a compiled module's source keeps to what compiles the same (held by
``tests/unit/test_compiled.py``):

- ``raise X from err`` loses its ``from`` (``__cause__`` stays unset): write
  ``raise caused_by(X, err)`` (:func:`caused_by`), the same in both forms;
- an exception thrown into a compiled coroutine awaited by another compiled coroutine
  (a cancellation) is lost if the inner one awaits while handling it (``await`` in an
  ``except`` or ``finally``, or an ``async with``): no such code in compiled modules.

And :func:`mypyc_attr`: mypyc's per-class settings (``native_class=False`` for classes
that must stay Python classes, ``allow_interpreted_subclasses=True`` for public classes a
user may subclass) without ``mypy_extensions`` at run time. mypy (and so mypyc) sees
``mypy_extensions.mypyc_attr``; the interpreter gets a decorator that returns the class
unchanged.
"""

from __future__ import annotations

import importlib.machinery
import os
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["caused_by", "compiled_modules", "mypyc_attr"]

_C = TypeVar("_C", bound=type)
_E = TypeVar("_E", bound=BaseException)

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
else:

    def mypyc_attr(*attrs: str, **kwattrs: Any) -> Any:
        """mypyc's class settings; at run time, a decorator that changes nothing."""

        def keep(cls: _C) -> _C:
            return cls

        return keep


def caused_by(exc: _E, cause: BaseException | None) -> _E:
    """``exc``, its ``__cause__`` set to ``cause``: ``raise caused_by(X(...), err)`` is
    ``raise X(...) from err`` (and ``cause=None``, ``from None``), in a form mypyc
    compiles the same (it drops a raise statement's ``from`` clause)."""
    exc.__cause__ = cause
    return exc


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def compiled_modules() -> tuple[str, ...]:
    """The names of the modules of the installed package that are compiled extension
    modules (sorted; empty in the pure-Python form).

    Read from the package's directory, not from what is imported: a module is listed
    when its compiled file sits where the import system prefers it to the ``.py``
    beside it, which is what ``import`` then loads. Thread-safe.
    """
    found: list[str] = []
    for folder, dirs, files in os.walk(_PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        package = os.path.relpath(folder, os.path.dirname(_PACKAGE_DIR)).replace(os.sep, ".")
        for name in files:
            suffix = next((s for s in _EXTENSION_SUFFIXES if name.endswith(s)), None)
            if suffix is not None:
                found.append(f"{package}.{name[: -len(suffix)]}")
    return tuple(sorted(found))
