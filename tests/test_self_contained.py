"""The repository carries its own contract: no tracked file names a briefing document kept
outside it, or a folder beside the checkout. The HTTP contract is docs/api.md (and the served
/openapi.json), the design docs/how-it-works.md; a clone must read whole without anything else.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Written in parts so that this file does not name what it looks for.
_OUTSIDE_DOCS = ("API", "DESIGN", "HOUSE", "FACTS", "FAKE_" + "UPSTREAM")
OUTSIDE = re.compile(r"\b(?:" + "|".join(_OUTSIDE_DOCS) + r")\.md\b|\.\./" + "shared")


def _tracked_files() -> list[Path]:
    """Every file git tracks in this checkout."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.decode().split("\0") if name]


def _outside_references(path: Path) -> list[str]:
    """`path:line: text` for each line of a text file that names something outside the repo."""
    try:
        data = path.read_bytes()
    except OSError:  # tracked but deleted in the work tree
        return []
    if b"\0" in data:
        return []
    text = data.decode("utf-8", errors="replace")
    rel = path.relative_to(ROOT)
    return [
        f"{rel}:{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if OUTSIDE.search(line)
    ]


def test_the_pattern_finds_what_it_looks_for() -> None:
    for name in _OUTSIDE_DOCS:
        assert OUTSIDE.search(f"as {name}.md says")
    assert OUTSIDE.search("see ../" + "shared" + "/notes")
    assert not OUTSIDE.search("see docs/api.md and docs/how-it-works.md")


def test_no_tracked_file_refers_to_a_document_outside_the_repository() -> None:
    found = [hit for path in _tracked_files() for hit in _outside_references(path)]
    assert not found, "refer to the repository's own docs instead:\n" + "\n".join(found)
