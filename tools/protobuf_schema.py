#!/usr/bin/env python3
"""Generate ``src/kubereflector/protobuf/_schema.json``, the table kubereflector's
protobuf decoder reads, from a Kubernetes source tree.

Usage (from the repository root; ``make protobuf-schema TREE=DIR RELEASE=v1.28.7
GO=GO`` runs the first)::

    .venv/bin/python tools/protobuf_schema.py --tree DIR --kubernetes v1.28.7 [--go GO]
    .venv/bin/python tools/protobuf_schema.py ... --check   # compare, exit 1 on a difference

``DIR`` is a Kubernetes source tree with its ``vendor/`` directory (the one
``../shared/real-apiserver`` builds kube-apiserver from); ``--kubernetes`` names its
release, recorded in the table. ``tools/protobuf_schema/main.go`` is built inside it
(nothing is downloaded) and reads client-go's scheme by reflection: for each kind,
the protobuf field numbers of its Go types beside what Go's ``encoding/json`` does
with each field. Kinds it cannot describe are listed under ``left_out`` with the
reason; kubereflector asks for JSON for those.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _go_build import build_in_tree  # noqa: E402

SOURCE = HERE / "protobuf_schema" / "main.go"
TABLE = HERE.parent / "src" / "kubereflector" / "protobuf" / "_schema.json"
BINARY = HERE.parent / "benchmarks" / ".build" / "protobuf_schema"


def generate(tree: str, go: str, kubernetes: str) -> str:
    """The table's text, generated from ``tree`` (``SystemExit`` on a failed build or run)."""
    binary = build_in_tree(tree, go, SOURCE, "krtools_protobuf_schema", BINARY)
    done = subprocess.run(
        [str(binary), "-kubernetes", kubernetes],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"protobuf_schema failed ({done.returncode}):\n{done.stderr[-2000:]}")
    table = json.loads(done.stdout)
    return json.dumps(table, sort_keys=True, separators=(",", ":")) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", required=True, help="a Kubernetes source tree with vendor/")
    parser.add_argument("--kubernetes", required=True, help="its release, e.g. v1.28.7")
    parser.add_argument("--go", default="go", help="the Go toolchain (default: go)")
    parser.add_argument("--check", action="store_true", help="compare with the file instead")
    args = parser.parse_args()
    text = generate(args.tree, args.go, args.kubernetes)
    if args.check:
        if TABLE.read_text(encoding="utf-8") != text:
            print(f"{TABLE} differs from what {args.tree} generates", file=sys.stderr)
            return 1
        print(f"{TABLE} is up to date")
        return 0
    TABLE.write_text(text, encoding="utf-8")
    table = json.loads(text)
    print(
        f"wrote {TABLE} ({len(text):,} bytes): {len(table['kinds'])} kinds, "
        f"{len(table['types'])} types, {len(table['left_out'])} kinds left out"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
