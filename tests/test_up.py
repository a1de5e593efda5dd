"""`make up` (scripts/up.py): it takes free ports, prints what docs/quickstart.md shows,
its printed examples run as pasted, and a port that was asked for but is taken is one line."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from scripts.localredis import free_port
from tests.procs import LOG_DIR

ROOT = Path(__file__).resolve().parents[1]
# The newcomer's own data folder, where CHATQ_FILES_DIR defaults to (not the test user's).
DATA_HOME = LOG_DIR / "up-data-home"
LAST_LINE = "Ctrl-C stops everything started here."
START_WAIT_S = 120
STOP_WAIT_S = 30


class Up:
    """`python -m scripts.up` running, its output collected line by line."""

    def __init__(self, env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.banner_shown = threading.Event()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "scripts.up"],
            cwd=ROOT,
            env=env,
            text=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.strip() == LAST_LINE:
                self.banner_shown.set()
        self.banner_shown.set()

    def output(self) -> str:
        return "\n".join(self.lines)

    def banner(self) -> list[str]:
        """The lines from `chatq is up` to the last line of the banner."""
        start = next(i for i, line in enumerate(self.lines) if line.startswith("chatq is up"))
        return self.lines[start : self.lines.index(LAST_LINE, start) + 1]

    def stop(self) -> int:
        """Ctrl-C, as from its terminal; answers the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            code = self.process.wait()
        self.reader.join(5)
        return code


def _env(redis_url: str | None, **settings: str) -> dict[str, str]:
    """A newcomer's environment: no CHATQ_* but the test's Redis (never the machine's), or
    none at all when `redis_url` is None."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATQ_")}
    if redis_url is not None:
        env["CHATQ_REDIS_URL"] = redis_url
    return {**env, "XDG_DATA_HOME": str(DATA_HOME), **settings}


@contextlib.contextmanager
def _held(*ports: int) -> Iterator[None]:
    """Listen on 127.0.0.1 at each port that is free, so that `make up` finds them all taken."""
    with contextlib.ExitStack() as stack:
        for port in ports:
            sock = stack.enter_context(socket.socket())
            with contextlib.suppress(OSError):  # already taken by someone else: fine too
                sock.bind(("127.0.0.1", port))
                sock.listen()
        yield


def _readme_banner() -> list[str]:
    """The fenced block of docs/quickstart.md that shows what `make up` prints."""
    page = (ROOT / "docs" / "quickstart.md").read_text()
    quick_start = page.split("\n## ", 1)[0]
    blocks = re.findall(r"^```text\n(.*?)^```$", quick_start, re.M | re.S)
    (block,) = [b for b in blocks if "chatq is up" in b]
    return block.rstrip("\n").splitlines()


def _comparable(lines: list[str]) -> list[str]:
    """Lines with the parts that change from run to run (ports, the key) made constant."""
    out = [re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", line.rstrip()) for line in lines]
    return [re.sub(r"KEY=[\w-]+", "KEY=THE-KEY", line) for line in out]


def _run_pasted(export_line: str, command: str) -> dict[str, object]:
    """Run a printed example in bash after the printed export line; answer its JSON."""
    done = subprocess.run(
        ["bash", "-c", f"{export_line}\n{command}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def test_make_up_takes_free_ports_prints_the_readme_banner_and_its_examples_run() -> None:
    # No CHATQ_REDIS_URL: a Redis of its own, whatever answers on 6379, and no alarm about it.
    with _held(8000, 9101):
        up = Up(_env(None))
        try:
            up.banner_shown.wait(START_WAIT_S)
            assert LAST_LINE in up.lines, up.output()[-3000:]
            banner = up.banner()
            assert _comparable(banner) == _comparable(_readme_banner())
            (export_line,) = [line.strip() for line in banner if "export URL=" in line]
            url = re.search(r"URL=(\S+)", export_line)[1]  # type: ignore[index]
            metrics = re.search(r"metrics at (\S+)\.$", banner[0])[1]  # type: ignore[index]
            assert not url.endswith(":8000") and ":9101/" not in metrics
            job, completion = (
                _run_pasted(export_line, line.strip())
                for line in banner
                if line.strip().startswith("curl ")
            )
            assert (job["object"], job["status"]) == ("chat.completion.job", "completed")
            assert completion["object"] == "chat.completion"
            assert "chatq_worker_slots" in requests.get(metrics, timeout=10).text
            # Files go to the clone's own run folder, made private.
            assert (ROOT / ".run" / "files").stat().st_mode & 0o777 == 0o700
        finally:
            code = up.stop()
    assert code == 0, up.output()[-3000:]
    assert any(line.startswith("up: started a throwaway Redis") for line in up.lines)
    assert "MAY LOSE" not in up.output()
    stopping = next(line for line in up.lines if line.startswith("up: stopping "))
    for pid in map(int, re.findall(r"\(pid (\d+)\)", stopping)):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_redis_that_was_asked_for_and_does_not_answer_is_one_clear_line() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    up = Up(_env(url))
    up.banner_shown.wait(START_WAIT_S)
    assert up.stop() == 1, up.output()[-3000:]
    assert up.lines[-1].startswith(f"up: no Redis answers at {url} (CHATQ_REDIS_URL)")


@pytest.mark.parametrize("setting", ["CHATQ_BIND", "CHATQ_WORKER_METRICS_BIND"])
def test_a_taken_port_that_was_asked_for_is_one_clear_line(redis_url: str, setting: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        address = f"127.0.0.1:{sock.getsockname()[1]}"
        up = Up(_env(redis_url, **{setting: address}))
        up.banner_shown.wait(START_WAIT_S)
        code = up.stop()
    assert code == 1, up.output()[-3000:]
    assert up.lines == [f"up: {address} ({setting}) is taken: set {setting} to a free host:port"]
