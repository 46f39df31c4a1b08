"""CHANGELOG.md keeps Keep a Changelog's shape: one ``[Unreleased]`` section on top,
and in each release every kind of change (Added, Changed, ...) under one heading."""

from __future__ import annotations

import re
from pathlib import Path

CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"
KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def releases() -> list[tuple[str, list[str]]]:
    """Each ``## [...]`` section's title and its ``###`` headings, in order."""
    found: list[tuple[str, list[str]]] = []
    for line in CHANGELOG.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            found.append((line[3:], []))
        elif line.startswith("### "):
            assert found, f"{line!r} before any release"
            found[-1][1].append(line[4:])
    return found


def test_one_unreleased_section_on_top() -> None:
    titles = [title for title, _ in releases()]
    assert titles[0] == "[Unreleased]"
    assert titles.count("[Unreleased]") == 1
    for title in titles[1:]:
        assert re.fullmatch(r"\[\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2}", title), title


def test_each_kind_of_change_once_per_release_in_order() -> None:
    for title, kinds in releases():
        assert kinds, f"{title} lists no changes"
        assert set(kinds) <= set(KINDS), (title, kinds)
        assert len(kinds) == len(set(kinds)), f"{title}: a heading repeats: {kinds}"
        assert kinds == sorted(kinds, key=KINDS.index), f"{title}: out of order: {kinds}"
