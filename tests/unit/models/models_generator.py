"""``tools/generate_models.py`` imported as a module for the tests (it is a script of the
repository, not part of the package), and the helpers the tests share."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]
FIXTURE_SPEC = Path(__file__).resolve().parent / "spec"
"""A small hand-written OpenAPI v3 spec in the shape of kube-apiserver's."""


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_models", ROOT / "tools" / "generate_models.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


generate_models = sys.modules.get("generate_models") or _load()
