"""The compiled form: which form runs, and what the compiled modules' source may hold.

``KUBEREFLECTOR_MYPYC=1 pip install .`` compiles the modules listed in ``pyproject.toml``
with mypyc (``hatch_build.py``); ``make test-compiled`` runs this suite against that
wheel with ``KUBEREFLECTOR_EXPECT_COMPILED`` set, and then the form is checked too.
The source rules hold in both forms: they keep out of the compiled modules what mypyc
would compile differently from the interpreter without saying so (see
``kubereflector/_compiled.py``).
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kubereflector
from kubereflector._compiled import caused_by, compiled_modules

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's own dependency below 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "kubereflector"
HOOK = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["hatch"][
    "build"
]["targets"]["wheel"]["hooks"]["custom"]
MODULES: list[str] = HOOK["mypyc-modules"]
EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)

TRY_NODES = (ast.Try, ast.TryStar) if sys.version_info >= (3, 11) else (ast.Try,)

# Bases that make a class a Python class under mypyc whatever it is told (and so
# subclassable as before): mypyc compiles only plain classes natively.
IMPLICITLY_PYTHON = {"NamedTuple", "Enum", "Protocol", "Struct"}


def module_name(path: str) -> str:
    """``cache/store.py`` -> ``kubereflector.cache.store``."""
    return "kubereflector." + path.removesuffix(".py").replace("/", ".")


# -- which form runs -----------------------------------------------------------------------


def test_compiled_modules_says_what_import_loads() -> None:
    compiled = set(compiled_modules())
    assert kubereflector.__compiled__ == compiled_modules()
    for path in MODULES:
        name = module_name(path)
        loaded = importlib.import_module(name).__file__ or ""
        assert loaded.endswith(EXTENSION_SUFFIXES) == (name in compiled), (name, loaded)
    assert compiled <= {module_name(path) for path in MODULES}


@pytest.mark.skipif(
    "KUBEREFLECTOR_EXPECT_COMPILED" not in os.environ,
    reason="the form is checked by `make test-compiled` (KUBEREFLECTOR_EXPECT_COMPILED set)",
)
def test_the_compiled_form_compiles_what_it_was_asked_to() -> None:
    asked = os.environ["KUBEREFLECTOR_EXPECT_COMPILED"].split() or MODULES
    assert kubereflector.__compiled__ == tuple(sorted(module_name(path) for path in asked))


def test_the_pure_form_is_the_source_tree() -> None:
    """``make test`` runs the editable install of src/: pure Python, whatever was built."""
    if Path(kubereflector.__file__).resolve().parent != PACKAGE:
        pytest.skip("an installed wheel runs, not the source tree")
    assert kubereflector.__compiled__ == ()


def test_the_command_line_names_the_form(capsys: pytest.CaptureFixture[str]) -> None:
    from kubereflector.cli import main

    assert main(["--version"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"kubereflector {kubereflector.__version__} ")
    if kubereflector.__compiled__:
        assert f"compiled by mypyc: {len(kubereflector.__compiled__)} modules" in line
    else:
        assert line.endswith("(pure Python)")


def test_caused_by_is_raise_from() -> None:
    def with_from(cause: BaseException | None) -> BaseException:
        try:
            try:
                raise KeyError("inner")
            except KeyError:
                raise ValueError("outer") from cause
        except ValueError as err:
            return err

    def with_caused_by(cause: BaseException | None) -> BaseException:
        try:
            try:
                raise KeyError("inner")
            except KeyError:
                raise caused_by(ValueError("outer"), cause)  # noqa: B904
        except ValueError as err:
            return err

    cause = OSError("cause")
    for given in (cause, None):
        expected, got = with_from(given), with_caused_by(given)
        assert got.__cause__ is expected.__cause__ is given
        assert got.__suppress_context__ is expected.__suppress_context__ is True
        assert type(got.__context__) is type(expected.__context__) is KeyError


# -- what the compiled modules may hold ------------------------------------------------------


def _walk_body(nodes: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of ``nodes``, not descending into nested functions or classes (their
    code runs in another frame)."""
    stack: list[ast.AST] = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(
            child
            for child in ast.iter_child_nodes(node)
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        )


def _decorator_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        names.add(ast.unparse(target).rpartition(".")[2])
    return names


def violations(source: str, public: set[str]) -> list[str]:
    """What in ``source`` (a module to compile) mypyc would compile differently from
    the interpreter, or make unusable as before; ``public``: the names of its API."""
    found: list[str] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Raise) and node.cause is not None:
            found.append(f"{where}: `raise ... from ...` (mypyc drops `from`): use caused_by")
        elif isinstance(node, ast.AsyncWith):
            found.append(f"{where}: `async with` (its exit awaits while an exception is handled)")
        elif isinstance(node, TRY_NODES):
            handling = [stmt for handler in node.handlers for stmt in handler.body]
            found.extend(
                f"line {inner.lineno}: awaits in an `except` or `finally` (mypyc loses the "
                "exception being handled)"
                for inner in _walk_body([*handling, *node.finalbody])
                if isinstance(inner, ast.Await | ast.AsyncFor | ast.AsyncWith)
            )
        elif isinstance(node, ast.ClassDef):
            decorators = _decorator_names(node)
            if "runtime_checkable" in decorators:
                found.append(
                    f"{where}: runtime-checkable protocol {node.name} (mypyc cannot compile "
                    "one: it belongs in a module that is not compiled)"
                )
            bases = {ast.unparse(base).partition("[")[0].rpartition(".")[2] for base in node.bases}
            if "dataclass" in decorators and "Generic" in bases:
                found.append(
                    f"{where}: generic dataclass {node.name} (compiled, it cannot be "
                    f"subscripted: {node.name}[X] raises TypeError)"
                )
            if (
                node.name in public
                and "mypyc_attr" not in decorators
                and not bases & IMPLICITLY_PYTHON
            ):
                found.append(
                    f"{where}: public class {node.name} without @mypyc_attr(...) (compiled, "
                    "a user could no longer subclass it: allow_interpreted_subclasses=True, "
                    "or native_class=False)"
                )
    return found


def _public_names(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return set()


@pytest.mark.parametrize("path", MODULES)
def test_a_compiled_module_holds_only_what_compiles_the_same(path: str) -> None:
    source = (PACKAGE / path).read_text(encoding="utf-8")
    private = any(part.startswith("_") for part in Path(path).parts)  # _aio/, cache/_deltas.py
    found = violations(source, set() if private else _public_names(ast.parse(source)))
    assert not found, f"src/kubereflector/{path}:\n" + "\n".join(found)


def test_the_source_rules_can_fail() -> None:
    bad = """
from typing import Protocol, runtime_checkable

__all__ = ["Public", "Proto"]


class Public:
    pass


@runtime_checkable
class Proto(Protocol):
    pass


@dataclass
class Box(Generic[T]):
    item: T


async def f(x):
    try:
        await x
    except ValueError as err:
        raise KeyError() from err
    finally:
        await x
    async with x:
        pass
"""
    found = violations(bad, {"Public", "Proto"})
    assert len(found) == 6, found
    text = "\n".join(found)
    for expected in (
        "public class Public",
        "runtime-checkable protocol Proto",
        "generic dataclass Box",
        "`raise ... from ...`",
        "awaits in an `except` or `finally`",
        "`async with`",
    ):
        assert expected in text
    assert violations("class _Private:\n    pass\n", set()) == []


def test_every_listed_module_exists() -> None:
    missing = [path for path in MODULES if not (PACKAGE / path).is_file()]
    assert not missing, f"mypyc-modules names no module: {missing}"
