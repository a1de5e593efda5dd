"""What a run was made on: date, machine, versions, the commit."""

from __future__ import annotations

import datetime
import os
import platform
import resource
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return "?"


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def _commit() -> str:
    given = os.environ.get("BENCH_COMMIT")
    if given:
        return given
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            text=True,
            capture_output=True,
            timeout=5,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "chatq", "web", "worker"],
            cwd=ROOT,
            text=True,
            capture_output=True,
            timeout=5,
        ).stdout
        return out.stdout.strip() + (" (+ uncommitted changes)" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "?"


def describe(command: str) -> dict[str, Any]:
    """The facts about this run that the README records."""
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "open_files_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[1],
        "somaxconn": _read("/proc/sys/net/core/somaxconn"),
        "commit": _commit(),
    }
