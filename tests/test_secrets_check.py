"""The session-end secrets check (tests/conftest.py) fails a session whose logs hold a test key.

Each case runs a real pytest session in a subprocess, with the hooks of tests/conftest.py, whose
one test writes a process log into that session's log folder (tests/procs.py LOG_DIR).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.procs import ALICE_KEY, LOG_DIR, ROOT, TEST_KEYS, UPSTREAM_KEY

CONFTEST = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.conftest import pytest_sessionfinish, pytest_terminal_summary
"""

PLANTING_TEST = """
from pathlib import Path
from tests.procs import LOG_DIR

def test_a_process_wrote_its_log():
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    Path("log_dir.txt").write_text(str(LOG_DIR))
    (LOG_DIR / "web-planted.log").write_text({text!r})
"""


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester whose inner sessions have a log folder of their own and load no third-party
    plugin (they need none: seconds saved)."""
    monkeypatch.delenv("CHATQ_TEST_LOG_DIR")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester


def _session(pytester: pytest.Pytester, log_text: str) -> tuple[pytest.RunResult, Path]:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_planted=PLANTING_TEST.format(text=log_text))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    log_dir = Path((pytester.path / "log_dir.txt").read_text())
    return result, log_dir


def test_a_key_in_a_log_fails_the_session_naming_file_and_key(pytester: pytest.Pytester) -> None:
    line = f"GET /v1/jobs Authorization: Bearer {ALICE_KEY} upstream={UPSTREAM_KEY}\n"
    result, log_dir = _session(pytester, line)
    try:
        output = "\n".join(result.outlines + result.errlines)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.stdout.fnmatch_lines(
            [
                "*secrets check failed*",
                "the alice test key appears in *web-planted.log",
                "the upstream test key appears in *web-planted.log",
            ]
        )
        assert "1 passed" in output
        assert not any(key in output for key in TEST_KEYS.values())
        assert (log_dir / "web-planted.log").exists(), "the evidence is kept"
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)


def test_the_log_folder_is_handed_to_programs_the_tests_run() -> None:
    # `python -m bench` (tests/test_bench_smoke.py) starts chatq processes with the test keys.
    code = "from tests.procs import LOG_DIR; print(LOG_DIR)"
    child = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert Path(child.stdout.strip()) == LOG_DIR


def test_clean_logs_pass_and_are_removed(pytester: pytest.Pytester) -> None:
    result, log_dir = _session(pytester, "GET /v1/jobs key=alice status=200\n")
    try:
        assert result.ret == pytest.ExitCode.OK
        assert "secrets check failed" not in "\n".join(result.outlines)
        assert not log_dir.exists()
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
