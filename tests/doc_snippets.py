"""The Python blocks of the README and of the documentation site (``docs/**/*.md``),
for the tests that check them: every block compiles and passes ``mypy --strict``
(tests/typecheck), the ones programs depend on are run (tests/unit/test_doc_snippets.py),
and the programs that follow a cluster until Ctrl-C are run and interrupted
(tests/integration/test_doc_programs.py).

A block is found by its document and the heading it sits under, so a block that
moves between pages keeps its checks (the test names the new place).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCUMENTS = (README, *sorted((ROOT / "docs").rglob("*.md")))

_BLOCK_OR_HEADING = re.compile(r"^#{1,6} ([^\n]+)$|^```python\n(.*?)^```", re.M | re.S)
_FOLLOWS = re.compile(r"^\s*(run\(\w+\(.*\)\)|manager\.run_sync\(\))", re.M)


@dataclass(frozen=True)
class Snippet:
    """One ```python block of a document."""

    document: Path
    line: int
    heading: str
    code: str

    @property
    def name(self) -> str:
        """``docs/page.md:12 (Heading)``: where to find the block."""
        return f"{self.document.relative_to(ROOT)}:{self.line} ({self.heading})"

    @property
    def follows_a_cluster(self) -> bool:
        """A program that follows the cluster ``load_config()`` finds until Ctrl-C: it
        ends in ``run(main())`` (kubereflector's ``run``) or ``manager.run_sync()``."""
        return "load_config(" in self.code and bool(_FOLLOWS.search(self.code))

    def execute(self, name: str = "doc_snippet") -> dict[str, Any]:
        """Run the block as a module named ``name`` (not ``__main__``: a program's
        ``if __name__ == "__main__":`` part is left out); returns its globals."""
        namespace: dict[str, Any] = {"__name__": name}
        exec(compile(self.code, self.name, "exec"), namespace)
        return namespace


def snippets(document: Path | None = None) -> list[Snippet]:
    """Every Python block, of one document or of all, in order."""
    found: list[Snippet] = []
    for path in DOCUMENTS if document is None else (document,):
        text = path.read_text(encoding="utf-8")
        heading = ""
        for match in _BLOCK_OR_HEADING.finditer(text):
            if match.group(1):
                heading = match.group(1).strip()
            else:
                line = text.count("\n", 0, match.start()) + 1
                found.append(Snippet(path, line, heading, match.group(2)))
    return found


def snippet(document: str, heading: str, index: int = 0) -> Snippet:
    """The ``index``-th block under ``heading`` in ``document`` (relative to the
    repository root); ``LookupError`` naming what is there when it is missing."""
    path = ROOT / document
    under = [s for s in snippets(path) if s.heading == heading]
    if len(under) <= index:
        headings = sorted({s.heading for s in snippets(path)})
        raise LookupError(f"no block {index} under {heading!r} in {document}: {headings}")
    return under[index]
