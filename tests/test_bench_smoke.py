"""A smoke run of the benchmark harness at tiny sizes (`python -m bench --quick`).

It checks that sections produce their numbers, never how fast anything is: times on a shared
2-core machine are noise. `make test` runs the cheap sections (about 10 s: the report, the
targets table and the plots all come out of a partial run too); `make test-slow` runs every
section (about a minute).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
    "background": [("flows", f, "latency", "p50_ms") for f in (
        "job_submit_then_poll", "response_background_then_poll", "job_held", "response_held")]
    + [("added_background", key) for key in ("latency_p50_ms", "submit_server_ms",
                                             "web_cpu_ms_per_job", "requests_per_job")],
    "batch": [("lines_per_s",), ("first_line_s",), ("last_line_s",),
              ("interactive_idle", "latency", "p99_ms"),
              ("interactive_during", "latency", "p99_ms"), ("max_batch_lane_depth",)],
}


# The sections that start no stack of their own: seconds, not a minute.
CHEAP = ("gthread", "tokens", "pooling", "cache", "connections")


def _quick_run(out: Path, *only: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench", "--quick", "--out", str(out)]
    done = subprocess.run(
        command + (["--only", ",".join(only)] if only else []),
        cwd=ROOT, capture_output=True, text=True, timeout=280,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "| measure | target | reached | met |" in done.stdout
    return dict(json.loads(out.read_text()))


def _assert_numbers(sections: dict[str, Any]) -> None:
    for name in sections:
        for path in NUMBERS.get(name, []):
            value = dig(sections[name], *path)
            assert isinstance(value, int | float), f"{name}: {path} is {value!r}"


def test_quick_bench_of_the_cheap_sections_yields_their_numbers(tmp_path: Path) -> None:
    data = _quick_run(tmp_path / "latest.json", *CHEAP)
    sections = data["sections"]
    assert set(sections) == set(CHEAP)
    _assert_numbers(sections)
    measured = [row for row in data["targets"] if row["reached"] != "not measured in this run"]
    assert measured and all(row["reached"] for row in measured)
    assert list((tmp_path / "plots").glob("*.png"))


@pytest.mark.slow
def test_quick_bench_yields_every_sections_numbers(tmp_path: Path) -> None:
    data = _quick_run(tmp_path / "latest.json")
    sections = data["sections"]
    assert set(sections) == set(SECTIONS)
    _assert_numbers(sections)
    assert sections["memory"]["cleaned"] is True
    assert sections["cache"]["status"] in ("measured", "todo")
    if sections["cache"]["status"] == "measured":
        assert isinstance(sections["cache"]["client_latency"]["p50_ms"], float)
    assert all(row["reached"] for row in data["targets"])
    assert list((tmp_path / "plots").glob("*.png"))
