"""Last of the suite (by file name): no key appears in any process log of this session."""

from __future__ import annotations

import pytest

from tests.procs import ALICE_KEY, BOB_KEY, LOG_DIR, UPSTREAM_KEY


def test_no_key_in_any_log_of_this_session() -> None:
    logs = sorted(LOG_DIR.glob("*.log")) if LOG_DIR.exists() else []
    if not logs:
        pytest.skip("no chatq process ran in this session")
    leaks = []
    for path in logs:
        text = path.read_text(errors="replace")
        leaks += [(path.name, k[:8]) for k in (ALICE_KEY, BOB_KEY, UPSTREAM_KEY) if k in text]
    assert leaks == []
