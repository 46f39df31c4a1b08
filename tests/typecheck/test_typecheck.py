"""The public types, checked the way users meet them: ``mypy --strict`` over small
user programs, the examples and every Python block of the README and of the
documentation site (``docs/``).

One mypy run (``mypy.api``, in-process, with the repository's incremental cache)
checks everything; the tests below read its report:

* ``user_*.py`` (this directory) and ``examples/*.py`` must pass, their
  ``assert_type`` calls included (a wrong type is an error there);
* ``user_mistakes.py`` must get an error on exactly the lines marked
  ``# E: <text>``, each containing its text: a missing ``await`` on
  ``factory.wait_for_cache_sync()`` among them;
* the Python blocks of the README and of ``docs/`` must pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from mypy import api

from doc_snippets import Snippet, snippets

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROGRAMS = sorted(HERE.glob("user_*.py"))
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
MISTAKES = HERE / "user_mistakes.py"

_REPORT_LINE = re.compile(
    r"^(?P<path>[^:\n]+):(?P<line>\d+): (?P<severity>error|note): (?P<text>.*)$"
)
_EXPECTED = re.compile(r"#\s*E:\s*(?P<text>.+?)\s*$")

BLOCKS: dict[Path, Snippet] = {}
"""The file each README or docs block was written to for mypy, and the block."""

pytestmark = pytest.mark.timeout(180)  # a cold mypy cache takes about a minute here


@dataclass(frozen=True)
class Report:
    """The outcome of the one mypy run."""

    exit_status: int
    stdout: str
    stderr: str
    files: tuple[Path, ...]

    def errors(self, path: Path) -> dict[int, list[str]]:
        """Error messages by line number, for one checked file."""
        found: dict[int, list[str]] = {}
        for line in self.stdout.splitlines():
            match = _REPORT_LINE.match(line)
            if match and match["severity"] == "error" and Path(match["path"]).resolve() == path:
                found.setdefault(int(match["line"]), []).append(match["text"])
        return found

    def describe(self, path: Path) -> str:
        errors = self.errors(path)
        return "\n".join(f"{path.name}:{n}: {m}" for n, ms in sorted(errors.items()) for m in ms)


def expected_errors(path: Path) -> dict[int, str]:
    """The ``# E: <text>`` marks of a file, by line number."""
    marks: dict[int, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = _EXPECTED.search(line)
        if match:
            marks[number] = match["text"]
    return marks


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    blocks_dir = tmp_path_factory.mktemp("docs")
    blocks = []
    for number, block in enumerate(snippets(), start=1):
        path = blocks_dir / f"doc_block_{number}.py"
        path.write_text(block.code, encoding="utf-8")
        blocks.append(path.resolve())
        BLOCKS[path.resolve()] = block
    files = (*PROGRAMS, *EXAMPLES, *blocks)
    stdout, stderr, exit_status = api.run(
        [
            "--strict",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--show-absolute-path",
            "--no-color-output",
            "--no-error-summary",
            *map(str, files),
        ]
    )
    return Report(exit_status, stdout, stderr, tuple(files))


def test_mypy_ran_over_every_file(report: Report) -> None:
    assert report.stderr == ""
    assert len(PROGRAMS) >= 5
    assert MISTAKES in PROGRAMS
    assert len(EXAMPLES) >= 5
    assert len(BLOCKS) == len(snippets()) >= 15
    # Errors in the mistakes file only: mypy exits 1 (not 2, a crash or bad usage).
    assert report.exit_status == 1, report.stdout


@pytest.mark.parametrize("path", [p for p in PROGRAMS if p != MISTAKES], ids=lambda p: p.name)
def test_a_correct_user_program_passes(report: Report, path: Path) -> None:
    assert report.errors(path.resolve()) == {}, report.describe(path.resolve())


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_passes(report: Report, path: Path) -> None:
    assert report.errors(path.resolve()) == {}, report.describe(path.resolve())


def test_every_marked_mistake_is_reported_and_nothing_else(report: Report) -> None:
    expected = expected_errors(MISTAKES)
    assert len(expected) >= 10
    got = report.errors(MISTAKES)
    assert sorted(got) == sorted(expected), report.describe(MISTAKES)
    for line, text in expected.items():
        assert any(text in message for message in got[line]), (line, text, got[line])


def test_a_missing_await_is_reported_and_the_awaited_call_accepted(report: Report) -> None:
    """The mistake issue 14 was filed for: ``wait_for_cache_sync()`` of the asyncio
    factory without ``await`` (it used to be typed ``-> Any``)."""
    source = MISTAKES.read_text(encoding="utf-8").splitlines()
    missing = [
        number
        for number, line in enumerate(source, start=1)
        if "factory.wait_for_cache_sync(" in line and "await" not in line
    ]
    assert len(missing) == 3
    errors = report.errors(MISTAKES)
    for number in missing:
        assert any("Coroutine[Any, Any, dict[str, bool]]" in m for m in errors[number])
    awaited = HERE / "user_async.py"
    assert "await factory.wait_for_cache_sync(" in awaited.read_text(encoding="utf-8")
    assert report.errors(awaited) == {}


def test_the_blocks_of_the_readme_and_the_docs_pass(report: Report) -> None:
    problems = {
        BLOCKS[path].name: report.describe(path)
        for path in report.files
        if path in BLOCKS and report.errors(path)
    }
    assert problems == {}
