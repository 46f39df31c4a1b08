"""The build hook of kubereflector's compiled form (hatchling's ``custom`` hook).

``pip install .`` builds the pure-Python wheel (``py3-none-any``): this hook does
nothing, needs nothing and no compiler. ``KUBEREFLECTOR_MYPYC=1 pip install .`` builds
the compiled wheel instead: the modules listed under ``mypyc-modules`` in
``pyproject.toml`` are compiled by mypyc into C extensions placed beside their ``.py``
files (the interpreter imports an extension module before the source of the same
name), and the wheel is tagged for this interpreter and platform. It needs a C
compiler and the Python headers; mypy and setuptools are fetched as build dependencies.
A compiled build that cannot be done fails, naming what is missing: asked for, it is
never silently replaced by the pure one. ``KUBEREFLECTOR_MYPYC_MODULES="cache/store.py
cache/keys.py"`` compiles those modules instead of the list (for measuring each
module's gain).

The compilation runs on a copy of ``src/`` in a temporary directory, so the source
tree (and an editable install of it) never gets a stray extension module. An editable
install cannot be compiled (the extensions would have to sit in ``src/``); asking for
one fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

ENV = "KUBEREFLECTOR_MYPYC"
MODULES_ENV = "KUBEREFLECTOR_MYPYC_MODULES"
PACKAGE = "kubereflector"

# Run in a subprocess, in the temporary copy: mypyc type-checks the package (mypy
# --strict, as `make typecheck`), writes C, and setuptools compiles and links it.
_SETUP = """
import json, sys
from mypyc.build import mypycify
from setuptools import setup

spec = json.loads(sys.argv[1])
setup(
    name="kubereflector-mypyc",
    ext_modules=mypycify(spec["args"], opt_level="3", group_name="kubereflector"),
    script_args=["build_ext", "--build-lib", spec["lib"], "--build-temp", spec["tmp"]],
)
"""


class CompiledBuildError(RuntimeError):
    """The compiled form was asked for and could not be built."""


def requested() -> bool:
    """Whether ``KUBEREFLECTOR_MYPYC`` asks for the compiled form (``1``/``true``/``yes``/
    ``on``); unset, empty, ``0``/``false``/``no``/``off``: the pure form. Raises
    :class:`ValueError` for anything else."""
    value = os.environ.get(ENV, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{ENV}={value!r}: use 1 for the compiled form or 0 for pure Python")


class MypycBuildHook(BuildHookInterface):
    """Compiles ``mypyc-modules`` into the wheel when ``KUBEREFLECTOR_MYPYC=1``."""

    PLUGIN_NAME = "custom"

    def dependencies(self) -> list[str]:
        """The compiled build's extra build dependencies: mypy (mypyc comes with it),
        setuptools (builds the extensions), and what mypy needs to type-check the
        package as ``make typecheck`` does (the runtime dependencies, their stubs)."""
        if not requested():
            return []
        return [
            *self._config_list("mypyc-requires"),
            *self.metadata.core.dependencies,
        ]

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or not requested():
            return
        if version == "editable":
            raise CompiledBuildError(
                f"{ENV}=1: an editable install cannot be compiled (the extension modules "
                "would have to sit in src/); install with `pip install .` instead of -e"
            )
        modules = self._modules()
        self._work = Path(tempfile.mkdtemp(prefix="kubereflector-mypyc-"))
        built = self._compile(modules, self._work)
        for path in built:
            relative = path.relative_to(self._work / "lib").as_posix()
            build_data["force_include"][str(path)] = relative
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        self.app.display_info(f"kubereflector: compiled {len(modules)} modules with mypyc")

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        work = getattr(self, "_work", None)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)

    # -- internals -----------------------------------------------------------------

    def _config_list(self, key: str) -> list[str]:
        value = self.config.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise TypeError(
                f"[tool.hatch.build.targets.wheel.hooks.custom] {key} must be a list of "
                f"non-empty strings, not {value!r}"
            )
        return value

    def _modules(self) -> list[str]:
        """The source files to compile, relative to the package (``cache/store.py``)."""
        override = os.environ.get(MODULES_ENV, "").split()
        modules = override or self._config_list("mypyc-modules")
        package = Path(self.root, "src", PACKAGE)
        for module in modules:
            if not module.endswith(".py") or not (package / module).is_file():
                source = f"{MODULES_ENV}" if override else "mypyc-modules"
                raise CompiledBuildError(
                    f"{source}: {module!r} is not a module of src/{PACKAGE} (a path like "
                    "cache/store.py)"
                )
        if not modules:
            raise CompiledBuildError(f"{ENV}=1 with no module to compile")
        return modules

    def _compile(self, modules: list[str], work: Path) -> list[Path]:
        """Compile ``modules`` in a copy of ``src/`` under ``work``; returns the built
        extension files (under ``work/lib``, laid out as in the wheel)."""
        include = sysconfig.get_paths()["include"]
        if not Path(include, "Python.h").is_file():
            raise CompiledBuildError(
                f"{ENV}=1 needs the Python headers ({include}/Python.h is missing; on "
                "Debian or Ubuntu: apt-get install python3-dev)"
            )
        shutil.copytree(
            Path(self.root, "src"),
            work / "src",
            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"),
        )
        spec = {
            # mypy's options as `make typecheck` (the project's [tool.mypy] is strict):
            # the package type-checks, or nothing is compiled.
            "args": ["--config-file=", "--strict", *(f"src/{PACKAGE}/{m}" for m in modules)],
            "lib": str(work / "lib"),
            "tmp": str(work / "tmp"),
        }
        script = work / "setup_mypyc.py"
        script.write_text(_SETUP, encoding="utf-8")
        result = subprocess.run(
            [sys.executable, str(script), json.dumps(spec)],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise CompiledBuildError(
                f"{ENV}=1: mypyc could not compile {len(modules)} modules (a C compiler and "
                f"the Python headers are needed):\n{result.stdout[-6000:]}"
            )
        lib = work / "lib"
        built = sorted(p for p in lib.rglob("*") if p.name.endswith((".so", ".pyd")))
        # kubereflector/cache/store.cpython-311-x86_64-linux-gnu.so -> cache/store.py
        compiled = {
            p.parent.relative_to(lib / PACKAGE).joinpath(p.name.split(".")[0] + ".py").as_posix()
            for p in built
            if p.parent.is_relative_to(lib / PACKAGE)
        }
        missing = [m for m in modules if m not in compiled]
        if missing:
            raise CompiledBuildError(f"{ENV}=1: mypyc built no extension for {missing}")
        return built
