"""The settings table: the docs' Settings page holds the one the declarations write, every
setting has a default and a unit, and the generator writes into any file between its markers."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from chatq.config import settings as config
from chatq.config.fields import GROUP, SETTING, declared
from chatq.config.settings import Settings
from chatq.config.table import BEGIN, END, default_cell, table, unit_cell, with_table, write_table

ROOT = Path(__file__).resolve().parents[1]


SETTINGS_PAGE = ROOT / "docs" / "settings.md"


def test_the_settings_page_table_is_current() -> None:
    page = SETTINGS_PAGE.read_text()
    assert with_table(page, table()) == page, (
        "docs/settings.md's settings table is not what chatq/config/*.py declare: "
        "run `python -m scripts.settings_table` and commit docs/settings.md"
    )


def test_every_setting_read_is_a_row_of_the_settings_page() -> None:
    # Wherever the code declares a setting (setting(...) or computed_setting(...)), in
    # whichever module of chatq/ its group lives.
    declared = re.compile(r'setting\(\s*"(CHATQ_[A-Z_]+)"')
    names = {
        n for path in (ROOT / "chatq").rglob("*.py") for n in declared.findall(path.read_text())
    }
    documented = set(re.findall(r"^\| `(CHATQ_[A-Z_]+)` \|", SETTINGS_PAGE.read_text(), re.M))
    assert len(names) > 90, "the settings' declarations were not found under chatq/"
    assert sorted(names - documented) == []
    assert sorted(documented - names) == []


def test_every_field_is_a_declared_setting_with_a_default_and_a_unit() -> None:
    names = [spec.env for _, spec in declared(Settings)]
    assert len(names) == len(set(names)) > 90
    assert all(SETTING in f.metadata or GROUP in f.metadata for f in fields(Settings))
    for f, spec in declared(Settings):
        assert default_cell(f, spec) and unit_cell(spec) and spec.doc, spec.env
        assert spec.env in table()


def test_the_table_shows_bounds_choices_and_notes() -> None:
    rows = {line.split(" | ")[0].strip("| `"): line for line in table().splitlines()}
    assert "| `500` | ms, `1` to `4000` |" in rows["CHATQ_REDIS_WAIT_TIMEOUT_MS"]
    assert "| `10` | s, at least `0.5` |" in rows["CHATQ_LEASE"]
    assert r"| `gevent` | `gevent`\|`threads` |" in rows["CHATQ_WORKER_POOL"]
    assert r"| `1` | `0`\|`1` |" in rows["CHATQ_FAIR_DISPATCH"]
    assert "| `0.025` | s |" in rows["CHATQ_FLUSH_INTERVAL"]
    assert "| `0` (off) | replicas |" in rows["CHATQ_REDIS_MIN_REPLICAS"]
    assert "| `interactive,batch` | lanes |" in rows["CHATQ_WORKER_LANES"]
    assert "| empty (every `/v1` call is 401) |" in rows["CHATQ_API_KEYS"]
    assert "| in the user's data folder:" in rows["CHATQ_FILES_DIR"]


def test_the_table_goes_between_the_markers_of_any_file(tmp_path: Path) -> None:
    fragment = tmp_path / "docs" / "settings.md"
    fragment.parent.mkdir()
    assert write_table(fragment)
    assert fragment.read_text() == f"{BEGIN}\n{table()}{END}\n"
    assert not write_table(fragment)  # already current
    page = tmp_path / "page.md"
    page.write_text(f"# Settings\n\nBefore.\n\n{BEGIN}\n| stale |\n{END}\n\nAfter.\n")
    assert write_table(page)
    assert page.read_text() == f"# Settings\n\nBefore.\n\n{BEGIN}\n{table()}{END}\n\nAfter.\n"
    unmarked = tmp_path / "unmarked.md"
    unmarked.write_text("# No markers\n")
    with pytest.raises(ValueError, match="markers"):
        write_table(unmarked)
    assert unmarked.read_text() == "# No markers\n"


def test_settings_checked_against_others_are_read_after_them() -> None:
    # Each names CHATQ_API_KEYS' key names, read before it (or the lanes, the broker).
    loaded = config.load(
        {
            "CHATQ_API_KEYS": "alice:sk-a,bob:sk-b",
            "CHATQ_ADMIN_KEYS": "alice",
            "CHATQ_KEY_TPM": "100",
            "CHATQ_KEY_LIMITS": "bob=rpm:5",
            "CHATQ_TENANT_WEIGHTS": "alice:3",
            "CHATQ_TENANT_MAX_RUNNING_OVERRIDES": "bob=2",
            "CHATQ_WEBHOOKS": "alice=https://hooks.example.com/x#whsec_" + "A" * 32,
            "CHATQ_BROKER_URL": "redis://127.0.0.1:6379/1",
            "CHATQ_WORKER_LANES": "batch",
        }
    )
    assert loaded.admin_key_names == ("alice",) and loaded.worker_lanes == ("batch",)
    ((name, limits),) = loaded.key_limit_overrides
    assert (name, limits.tokens_per_minute, limits.requests_per_minute) == ("bob", 100, 5)
    assert loaded.tenant_weights == (("alice", 3),)
    assert loaded.tenant_max_running_overrides == (("bob", 2),)
    assert [w.owner for w in loaded.webhooks] == ["alice"]


def test_each_variable_is_read_once() -> None:
    class Counting(dict[str, str]):
        def __init__(self, items: dict[str, str]) -> None:
            super().__init__(items)
            self.reads: list[str] = []

        def get(self, name: str, default: object = None) -> object:  # type: ignore[override]
            self.reads.append(name)
            return super().get(name, default)

    env = Counting({"CHATQ_API_KEYS": "alice:sk-a", "CHATQ_ADMIN_KEYS": "alice"})
    config.load(env)
    assert sorted(env.reads) == sorted(spec.env for _, spec in declared(Settings))
