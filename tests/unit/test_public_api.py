"""``kubereflector.__all__`` is exactly the public API.

Written to keep working as modules are added: it discovers the package's
submodules rather than listing them.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import kubereflector

# Public subpackages with an API of their own, imported by their full name
# (``kubereflector.testing.FakeControllerSource``): not re-exported by the package.
# ``models`` too: ``import kubereflector`` must not load the generated models.
NOT_REEXPORTED = frozenset(
    {
        "testing",
        "client",
        "cli",
        "workqueue",
        "runtime",
        "leaderelection",
        "metrics",
        "models",
        "protobuf",
    }
)

# Of those, the subpackages whose ``__all__`` re-exports every public name of their
# own public modules, as the package does (``kubereflector.workqueue.WorkQueue``).
COMPLETE_SUBPACKAGES = frozenset({"workqueue", "runtime", "leaderelection", "metrics"})


def public_submodules() -> list[str]:
    """The package's public modules and subpackages, and those of ``kubereflector.cache``
    (``"cache.keys"``), whose API the package re-exports whole."""
    top = [
        info.name
        for info in pkgutil.iter_modules(kubereflector.__path__)
        if not info.name.startswith("_")
    ]
    cache = [
        f"cache.{info.name}"
        for info in pkgutil.iter_modules(kubereflector.cache.__path__)
        if not info.name.startswith("_")
    ]
    return sorted(top + cache)


def loaded_package_modules() -> Iterator[types.ModuleType]:
    for name, module in list(sys.modules.items()):
        if module is not None and (name == "kubereflector" or name.startswith("kubereflector.")):
            yield module


def source_file(module: types.ModuleType) -> Path | None:
    """The module's ``.py`` file: its ``__file__``, or for a module compiled by mypyc
    (``__file__`` is the extension module) the source installed beside it."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file)
    if path.suffix != ".py":
        path = path.with_name(f"{module.__name__.rpartition('.')[2]}.py")
    return path if path.is_file() else None


def names_assigned_at_top_level(module: types.ModuleType) -> set[str]:
    """Names a module defines itself (assignments, defs, classes), not imports."""
    file = source_file(module)
    if file is None:
        return set()
    tree = ast.parse(file.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                elts = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
                names.update(t.id for t in elts if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif type(node).__name__ == "TypeAlias":  # ``type X = ...`` (Python 3.12+)
            names.add(node.name.id)  # type: ignore[attr-defined]
    return names


def defined_in_kubereflector(name: str, value: object) -> bool:
    """Whether ``value`` (bound to ``name`` on the package) is kubereflector's own."""
    if isinstance(value, types.ModuleType):
        return False
    if (inspect.isclass(value) or inspect.isroutine(value)) and (
        getattr(value, "__module__", None) or ""
    ).partition(".")[0] == "kubereflector":
        return True
    # Constants and type aliases (``list[int]`` even passes ``isclass`` on Python 3.10):
    # defined by an assignment or a definition in one of our modules.
    return any(
        name in names_assigned_at_top_level(module) and getattr(module, name, None) is value
        for module in loaded_package_modules()
    )


def test_all_is_a_list_of_unique_strings() -> None:
    exported = kubereflector.__all__
    assert isinstance(exported, list | tuple)
    assert all(isinstance(name, str) for name in exported)
    duplicates = sorted({name for name in exported if exported.count(name) > 1})
    assert not duplicates, f"listed more than once in __all__: {duplicates}"


def test_every_name_in_all_is_importable() -> None:
    missing = [name for name in kubereflector.__all__ if not hasattr(kubereflector, name)]
    assert not missing, f"in __all__ but not importable: {missing}"
    namespace: dict[str, object] = {}
    exec("from kubereflector import *", namespace)
    assert set(kubereflector.__all__) <= set(namespace)


def test_every_public_attribute_is_in_all() -> None:
    for submodule in public_submodules():
        if submodule not in NOT_REEXPORTED:
            importlib.import_module(f"kubereflector.{submodule}")
    exported = set(kubereflector.__all__)
    unlisted = sorted(
        name
        for name, value in vars(kubereflector).items()
        if not name.startswith("_")
        and name not in exported
        and defined_in_kubereflector(name, value)
    )
    assert not unlisted, f"public but missing from kubereflector.__all__: {unlisted}"


def test_foreign_names_are_not_exported() -> None:
    """Imports such as ``from __future__ import annotations`` are not part of the API."""
    foreign = sorted(
        name
        for name in kubereflector.__all__
        if not name.startswith("__")
        and not defined_in_kubereflector(name, getattr(kubereflector, name))
    )
    assert not foreign, f"exported but not defined in kubereflector: {foreign}"


def test_detection_of_constants_and_classes() -> None:
    """The helper this module relies on recognises each kind of public name."""
    assert defined_in_kubereflector("Cache", kubereflector.Cache)
    assert defined_in_kubereflector("new_store", kubereflector.new_store)
    assert defined_in_kubereflector("NAMESPACE_INDEX", kubereflector.NAMESPACE_INDEX)
    assert defined_in_kubereflector("KeyFunc", kubereflector.KeyFunc)
    assert not defined_in_kubereflector("annotations", getattr(kubereflector, "annotations", 0))
    assert not defined_in_kubereflector("Any", __import__("typing").Any)
    assert not defined_in_kubereflector("keys", kubereflector.cache.keys)


@pytest.mark.parametrize("submodule", [m for m in public_submodules() if m not in NOT_REEXPORTED])
def test_submodule_api_is_reexported(submodule: str) -> None:
    module = importlib.import_module(f"kubereflector.{submodule}")
    own = getattr(module, "__all__", None)
    assert own is not None, (
        f"kubereflector.{submodule} has no __all__: declare its public API "
        f"(or add it to NOT_REEXPORTED in this test if it is not re-exported)"
    )
    missing_here = [name for name in own if not hasattr(module, name)]
    assert not missing_here, f"kubereflector.{submodule}.__all__ lists undefined {missing_here}"
    not_reexported = [name for name in own if name not in kubereflector.__all__]
    assert not not_reexported, (
        f"kubereflector.{submodule} names missing from package __all__: {not_reexported}"
    )
    different = [name for name in own if getattr(kubereflector, name) is not getattr(module, name)]
    assert not different, f"package names bound to other objects than in {submodule}: {different}"


def test_known_submodules_are_discovered() -> None:
    assert {"cache", "cache.keys", "cache.store", "errors"} <= set(public_submodules())


def test_version() -> None:
    assert isinstance(kubereflector.__version__, str)
    assert "__version__" in kubereflector.__all__


@pytest.mark.parametrize("subpackage", sorted(COMPLETE_SUBPACKAGES))
def test_subpackage_reexports_its_modules(subpackage: str) -> None:
    package = importlib.import_module(f"kubereflector.{subpackage}")
    exported = package.__all__
    assert len(set(exported)) == len(exported), f"duplicates in {subpackage}.__all__"
    undefined = [name for name in exported if not hasattr(package, name)]
    assert not undefined, f"kubereflector.{subpackage}.__all__ lists undefined {undefined}"
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"kubereflector.{subpackage}.{info.name}")
        own = getattr(module, "__all__", None)
        assert own is not None, f"kubereflector.{subpackage}.{info.name} has no __all__"
        missing = [name for name in own if name not in exported]
        assert not missing, f"{subpackage}.{info.name} names missing from {subpackage}: {missing}"
        different = [name for name in own if getattr(package, name) is not getattr(module, name)]
        assert not different, f"{subpackage} binds other objects than {info.name}: {different}"
        unlisted = sorted(  # the classes and functions it defines
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and name not in own
            and (inspect.isclass(value) or inspect.isroutine(value))
            and getattr(value, "__module__", None) == module.__name__
        )
        assert not unlisted, f"public in {subpackage}.{info.name}, not in its __all__: {unlisted}"
