"""The descriptions of a custom resource's schema, read from its Python source: a
``TypedDict`` class's docstring, and the string under each field (as the generated
models document theirs). Private to :mod:`kubereflector.models`.

Python keeps a class's docstring but drops the strings under its fields; they are read
back from the module's source with :mod:`ast`, once per source file. A class whose
source cannot be found (defined in a REPL, or by ``exec``) simply has no field
descriptions.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import linecache
import sys
import threading
from collections.abc import Mapping
from typing import Final

from typing_extensions import is_typeddict

__all__ = ["class_description", "field_descriptions"]

_lock: Final = threading.Lock()


def class_description(cls: type) -> str | None:
    """``cls``'s own docstring, dedented; ``None`` when it has none."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or not doc.strip():
        return None
    return inspect.cleandoc(doc)


def field_descriptions(cls: type) -> Mapping[str, str]:
    """The docstring written under each field of ``cls`` (a ``TypedDict`` class), by field
    name; empty when the source cannot be read. Thread-safe; each file is parsed once."""
    docs: dict[str, str] = {}
    inherited: set[str] = set()
    for base in getattr(cls, "__orig_bases__", ()):
        if isinstance(base, type) and is_typeddict(base):
            docs.update(field_descriptions(base))
            inherited.update(base.__annotations__)
    module = sys.modules.get(cls.__module__)
    filename = getattr(module, "__file__", None)
    if not filename:
        return docs
    with _lock:
        classes = _classes_of(filename)
    own = frozenset(cls.__annotations__) - inherited
    found = classes.get(cls.__name__, [])
    # A class name used twice in one file (in functions, say): the one with these fields.
    exact = [d for fields, d in found if fields == own] or [
        d for fields, d in found if fields >= own
    ]
    if exact:
        docs.update(exact[0])
    return docs


@functools.lru_cache(maxsize=64)
def _classes_of(filename: str) -> dict[str, list[tuple[frozenset[str], dict[str, str]]]]:
    """Every class of a source file by name, each as its fields and their docstrings."""
    source = "".join(linecache.getlines(filename))
    if not source:
        return {}
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, list[tuple[frozenset[str], dict[str, str]]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            fields = frozenset(
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            )
            found.setdefault(node.name, []).append((fields, _field_docs(node)))
    return found


def _field_docs(node: ast.ClassDef) -> dict[str, str]:
    docs: dict[str, str] = {}
    body = node.body
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            text = inspect.cleandoc(following.value.value)
            if text:
                docs[statement.target.id] = text
    return docs
