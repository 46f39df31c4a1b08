"""Build a Go program inside a Kubernetes source tree, with nothing downloaded.

The tree must carry its ``vendor/`` directory (the one ``../shared/real-apiserver``
builds kube-apiserver from). The program is added to the tree through ``go build
-overlay``, so the tree itself is not written to. Used by
``benchmarks/_client_go.py`` (the client-go peer) and ``tools/protobuf_schema.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path


def build_in_tree(tree: str, go: str, source: Path, package: str, binary: Path) -> Path:
    """Build the single-file program ``source`` as package directory ``package`` of
    the Kubernetes tree ``tree`` with the toolchain ``go``; return ``binary``.

    Raises ``SystemExit`` naming what is missing (the tree's ``vendor/``, the Go
    toolchain) or with the compiler's output when the build fails."""
    root = Path(tree).expanduser().resolve()
    if not (root / "vendor" / "k8s.io" / "client-go").exists() or not (root / "go.mod").is_file():
        raise SystemExit(f"{tree}: not a Kubernetes source tree with vendor/k8s.io/client-go")
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        overlay = Path(scratch) / "overlay.json"
        overlay.write_text(
            json.dumps({"Replace": {str(root / package / "main.go"): str(source)}}),
            encoding="utf-8",
        )
        env = {
            **os.environ,
            "GOFLAGS": "-mod=vendor",
            "GOTOOLCHAIN": "local",
            "GOPROXY": "off",
            "CGO_ENABLED": "0",
        }
        command = [go, "build", "-overlay", str(overlay), "-o", str(binary), f"./{package}"]
        try:
            done = subprocess.run(
                command, cwd=root, env=env, capture_output=True, text=True, timeout=1200
            )
        except FileNotFoundError:
            raise SystemExit(f"--go {go}: no Go toolchain there") from None
    if done.returncode != 0:
        raise SystemExit(f"building {source} in {root} failed:\n{done.stderr}")
    return binary
