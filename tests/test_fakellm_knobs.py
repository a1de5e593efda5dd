"""fakellm's knobs are documented where a user looks: `python -m fakellm --help` and the
"fakellm's knobs" table of docs/fakellm.md, each knob with its meaning, default and an example."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from fakellm import knobs
from tests.procs import ROOT

# Every knob the parser accepts, read from the parser itself.
ACCEPTED = sorted(knobs._KNOBS)


def _help() -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "fakellm", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return " ".join(proc.stdout.split())


def _readme_rows() -> dict[str, tuple[str, str, str]]:
    """The table of docs/fakellm.md, "fakellm's knobs": knob -> (meaning, default, example)."""
    page = (ROOT / "docs" / "fakellm.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (.+?) \| (.+?) \| `(.+?)` \|$", page, re.M)
    return {name: (meaning, default, example) for name, meaning, default, example in rows}


def test_every_accepted_knob_has_its_help() -> None:
    assert sorted(knobs.KNOB_HELP) == ACCEPTED


def test_help_lists_every_knob_with_meaning_default_and_example() -> None:
    text = _help()
    for name in ACCEPTED:
        meaning, default, example = knobs.KNOB_HELP[name]
        assert f" {name} {meaning} default: {default}; example: {example}" in text, name


def test_the_readme_table_is_the_same_as_the_help() -> None:
    rows = _readme_rows()
    assert sorted(rows) == ACCEPTED
    for name in ACCEPTED:
        assert rows[name] == knobs.KNOB_HELP[name], name


@pytest.mark.parametrize("name", ACCEPTED)
def test_each_example_is_a_model_name_fakellm_accepts_and_sets_its_knob(name: str) -> None:
    example = knobs.KNOB_HELP[name][2]
    parsed = knobs.parse_model(example)
    field = knobs._KNOBS[name][0]
    assert getattr(parsed, field) != getattr(knobs.Knobs(), field), example
