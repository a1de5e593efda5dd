"""The README documents every setting the code reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_chatq_setting_is_in_the_readme_table() -> None:
    names = set(re.findall(r'"(CHATQ_[A-Z_]+)"', (ROOT / "chatq" / "config.py").read_text()))
    readme = (ROOT / "README.md").read_text()
    documented = set(re.findall(r"^\| `(CHATQ_[A-Z_]+)` \|", readme, re.MULTILINE))
    assert names, "no settings found in chatq/config.py"
    assert sorted(names - documented) == []
    assert sorted(documented - names) == []
