"""A griffe extension for the docs build: Sphinx roles in docstrings become Markdown.

The docstrings use reStructuredText roles (``:class:`~kubereflector.Store```) and
double-backquoted literals, which read well in ``help()`` and editors. Markdown
renders the double backquotes as code already; this turns each role into inline
code showing the name the reader would see in Sphinx (the last dotted part after
``~``, the explicit title of ``title <target>``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|exc|data|obj|const):`([^`]+)`")


def _title(target: str) -> str:
    target = target.strip()
    explicit = re.fullmatch(r"(.+?)\s*<[^>]+>", target, flags=re.DOTALL)
    if explicit:
        return " ".join(explicit.group(1).split())
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target


def convert(text: str) -> str:
    """``text`` with every Sphinx role replaced by inline code."""
    return _ROLE.sub(lambda m: f"`{_title(m.group(1))}`", text)


class SphinxRolesToMarkdown(griffe.Extension):
    """Rewrites Sphinx roles in every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
