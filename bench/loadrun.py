"""Running the load generator as a separate process and reading what it says."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]


class LoadRun:
    """One `python -m bench.load` process fed one spec; its stdout read line by line."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.load"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        assert self.process.stdin is not None and self.process.stdout is not None
        threading.Thread(target=self._pump, args=(self.process.stdout,), daemon=True).start()
        self.process.stdin.write(json.dumps(spec))
        self.process.stdin.close()

    @property
    def pid(self) -> int:
        """The load generator's pid."""
        return self.process.pid

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put("")

    def wait_for(self, prefix: str, timeout_s: float) -> str:
        """The first line starting with `prefix`; raises if the process ends or time runs out."""
        while True:
            try:
                line = self._lines.get(timeout=timeout_s)
            except queue.Empty:
                raise TimeoutError(f"load generator said no {prefix!r} in {timeout_s}s") from None
            if line.startswith(prefix):
                return line
            if line == "" and self.process.poll() is not None:
                raise RuntimeError(f"load generator ended (exit {self.process.returncode})")

    def result(self, timeout_s: float = 300.0) -> dict[str, Any]:
        """The parsed `RESULT` line; the process is reaped."""
        line = self.wait_for("RESULT ", timeout_s)
        self.process.wait(10)
        return dict(json.loads(line[len("RESULT ") :]))

    def stop(self) -> None:
        """Kill it if it is still running (it is ours)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)


def run_load(spec: dict[str, Any], timeout_s: float = 300.0) -> dict[str, Any]:
    """Run one spec to its end and answer its result."""
    run = LoadRun(spec)
    try:
        return run.result(timeout_s)
    finally:
        run.stop()
