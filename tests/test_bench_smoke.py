"""A smoke run of the benchmark harness at tiny sizes (`python -m bench --quick`).

Not marked slow, so it is part of `make test`. It checks that every section produces its
numbers, never how fast anything is: times on a shared 2-core machine are noise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.sections.registry import SECTIONS
from bench.targets import dig

ROOT = Path(__file__).resolve().parents[1]

# For each section, paths that must hold a number after a quick run.
NUMBERS: dict[str, list[tuple[Any, ...]]] = {
    "compare": [("systems", s, "levels", 0, "latency", "p50_ms") for s in (
        "short_poll_1s", "flask_celery_gthread64", "flask_celery_sync4", "chatq_longpoll")]
    + [("long_job", "chatq", "requests_per_job"), ("long_job", "short_poll", "requests_per_job")],
    "waiters": [("levels", 0, "wake", "p99_ms"), ("levels", 0, "rss_parked_mib"),
                ("burst", "wakes_per_s")],
    "gthread": [("levels", 0, "wake", "p50_ms"), ("max_parked",)],
    "throughput": [("instant", "jobs_per_s"), ("streaming_1s", "jobs_per_s"),
                   ("streaming_1s", "in_flight", "mean"), ("bare_celery", 0, "jobs_per_s"),
                   ("instant", "cpu", "web", "cpu_s"), ("instant", "cpu", "worker", "cpu_s")],
    "gateway": [("points", 0, "overhead", "p50_ms"), ("points", 0, "direct", "latency", "p99_ms")],
    "memory": [("record_bytes_per_job",), ("used_bytes_per_job",), ("expired_after_s",)],
    "tokens": [("latency", "p50_ms"), ("latency", "p99_ms"), ("tokens_seen",)],
    "pooling": [("variants", i, key) for i in range(6)
                for key in ("connections_opened", "cpu_ms_per_call")],
    "connections": [("calls",), ("connections_opened",)],
}


def _quick_run(out: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=280,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "| measure | target | reached | met |" in done.stdout
    return dict(json.loads(out.read_text()))


def test_quick_bench_yields_every_sections_numbers(tmp_path: Path) -> None:
    data = _quick_run(tmp_path / "latest.json")
    sections = data["sections"]
    assert set(sections) == set(SECTIONS)
    for name, paths in NUMBERS.items():
        for path in paths:
            value = dig(sections[name], *path)
            assert isinstance(value, int | float), f"{name}: {path} is {value!r}"
    assert sections["memory"]["cleaned"] is True
    assert sections["cache"]["status"] in ("measured", "todo")
    if sections["cache"]["status"] == "measured":
        assert isinstance(sections["cache"]["client_latency"]["p50_ms"], float)
    assert all(row["reached"] for row in data["targets"])
    assert list((tmp_path / "plots").glob("*.png"))
