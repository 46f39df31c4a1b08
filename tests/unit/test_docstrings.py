"""Every public name has a docstring: the API reference is generated from them.

Public means: every name in the ``__all__`` of ``kubereflector`` and of each public
module and subpackage under it, and the public methods and properties of the
public classes (their own, and those they inherit from kubereflector's classes).
A docstring inherited the way ``inspect.getdoc`` finds it counts for a method
(an implementation of a documented protocol method is documented), but a class
must have one of kubereflector's own: ``Exception``'s, ``Protocol``'s or the one
``dataclass`` generates say nothing about the class. Constants and type aliases
carry the docstring that follows their assignment, read as the reference reads
it (griffe).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import griffe

import kubereflector

# The source tree, which the reference is generated from (the installed package may be
# the compiled form, whose extension modules griffe could only inspect, not read).
SRC = Path(__file__).resolve().parents[2] / "src"


def public_modules() -> Iterator[types.ModuleType]:
    yield kubereflector
    for info in pkgutil.walk_packages(kubereflector.__path__, "kubereflector."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            yield importlib.import_module(info.name)


def ours(obj: object) -> bool:
    return (getattr(obj, "__module__", None) or "").partition(".")[0] == "kubereflector"


def class_doc(cls: type) -> str | None:
    """The docstring a kubereflector class has or inherits from another of ours."""
    for base in cls.__mro__:
        doc = base.__dict__.get("__doc__")
        if not ours(base) or not isinstance(doc, str) or not doc.strip():
            continue
        generated = f"{base.__name__}("  # dataclass and NamedTuple: "Name(field, ...)"
        if doc.startswith(generated) and (
            dataclasses.is_dataclass(base) or hasattr(base, "_fields")
        ):
            continue
        return doc
    return None


def undocumented_members(cls: type) -> Iterator[str]:
    seen: set[str] = set()
    for base in cls.__mro__:
        if not ours(base):
            continue
        for name, member in vars(base).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if not isinstance(member, property | classmethod | staticmethod) and not (
                inspect.isroutine(member)
            ):
                continue  # fields, enum members, constants
            if not inspect.getdoc(getattr(cls, name)):
                yield f"{cls.__module__}.{cls.__qualname__}.{name}"


def undocumented() -> list[str]:
    package = griffe.load("kubereflector", search_paths=[str(SRC)])
    missing: set[str] = set()
    for module in public_modules():
        if not inspect.getdoc(module):
            missing.add(f"{module.__name__} (the module)")
        for name in getattr(module, "__all__", ()):
            if name.startswith("__"):
                continue
            value = getattr(module, name)
            if inspect.isclass(value) and ours(value):
                if class_doc(value) is None:
                    missing.add(f"{value.__module__}.{value.__qualname__}")
                missing.update(undocumented_members(value))
            elif inspect.isroutine(value) and ours(value):
                if not inspect.getdoc(value):
                    missing.add(f"{value.__module__}.{value.__qualname__}")
            elif not inspect.ismodule(value):  # a constant, a type alias, a TypeVar
                relative = module.__name__.removeprefix("kubereflector").lstrip(".")
                found = package[f"{relative}.{name}" if relative else name]
                target = found.final_target if found.is_alias else found
                if not target.docstring:
                    missing.add(target.path)
    return sorted(missing)


def undocumented_in_the_source_tree() -> list[str]:
    """:func:`undocumented` of the source tree's pure-Python modules, in a process of
    its own (for the compiled form: mypyc drops docstrings at run time, mypyc/mypyc#437;
    a docstring belongs to the source, which the reference and ``help()`` of the pure
    form read)."""
    probe = "import json, test_docstrings; print(json.dumps(test_docstrings.undocumented()))"
    path = os.pathsep.join([str(SRC), str(Path(__file__).resolve().parent)])
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    missing: list[str] = json.loads(result.stdout)
    return missing


def test_every_public_name_has_a_docstring() -> None:
    missing = undocumented_in_the_source_tree() if kubereflector.__compiled__ else undocumented()
    assert not missing, f"{len(missing)} public names without a docstring:\n" + "\n".join(missing)


def test_the_check_sees_what_it_must() -> None:
    """The walk reaches subpackages, protocol methods, properties and constants."""
    names = {module.__name__ for module in public_modules()}
    assert {"kubereflector", "kubereflector.client.rest", "kubereflector.workqueue.metrics"} <= (
        names
    )
    assert not any("._" in name for name in names)

    class Bare(Exception):
        pass

    Bare.__module__ = "kubereflector.example"
    assert class_doc(Bare) is None  # Exception's docstring does not count

    @dataclasses.dataclass
    class Fields:
        x: int

        def method(self) -> None:
            pass

        @property
        def prop(self) -> int:
            return self.x

    Fields.__module__ = "kubereflector.example"
    assert class_doc(Fields) is None  # nor the generated "Fields(x: int)"
    assert sorted(undocumented_members(Fields)) == [
        f"kubereflector.example.{Fields.__qualname__}.method",
        f"kubereflector.example.{Fields.__qualname__}.prop",
    ]

    class Documented(Fields):
        """Documented."""

        def method(self) -> None:  # inherits nothing: Fields.method has no docstring
            pass

    Documented.__module__ = "kubereflector.example"
    assert class_doc(Documented) == "Documented."
    assert len(list(undocumented_members(Documented))) == 2
