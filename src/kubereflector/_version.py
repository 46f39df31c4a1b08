"""The package's version, in a module of its own: ``kubereflector.__version__``
re-exports it, and the REST client's ``User-Agent`` reads it from here without
importing the whole package (which would close an import cycle)."""

from __future__ import annotations

__version__ = "0.1.0"
