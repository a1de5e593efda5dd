"""`make soak`: its verdicts catch growth and drift, and a tiny run of the whole script passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import gcpauses
from scripts import soak, soak_verdicts
from scripts.soak_load import Load

MiB = 1024 * 1024
BASELINE = {"used_memory": 2 * MiB, "used_memory_rss": 8 * MiB, "keys": 10}


def _samples(web_growth: float = 0.0, p99_growth: float = 0.0) -> list[dict[str, Any]]:
    """100 samples, one a second, of a load that grows by the given fractions over its run."""
    out = []
    for t in range(1, 101):
        share = t / 100
        out.append(
            {
                "t_s": float(t),
                "web_rss": int(200 * MiB * (1 + web_growth * share)),
                "worker_rss": [100 * MiB, 100 * MiB],
                "redis": {"used_memory": 20 * MiB},
                "e2e_p99_s": 10.0 * (1 + p99_growth * share),
                "submit_p99_ms": 20.0,
                "wake_p99_ms": 5.0,
                "in_flight": 50,
                "completed": 50 * t,
                "cpu_s": {"web": 0.5 * t, "workers": 0.6 * t},
            }
        )
    return out


def _verdicts(
    samples: list[dict[str, Any]], drained_bytes: int = 2 * MiB, load: Load | None = None
) -> dict[str, Any]:
    drained = {**BASELINE, "used_memory": drained_bytes}
    return soak_verdicts.verdicts(samples, 100.0, 20.0, BASELINE, drained, load or Load())


def test_a_steady_run_passes_with_its_cpu_per_job() -> None:
    summary = _verdicts(_samples())
    assert summary["passed"], summary["checks"]
    # 0.5 s of web CPU a second over 50 jobs a second: 10 ms a job.
    assert summary["cpu_ms_per_job"] == {"web": 10.0, "workers": 12.0, "total": 22.0}


def test_rss_growth_over_ten_percent_fails() -> None:
    summary = _verdicts(_samples(web_growth=0.3))
    assert not summary["checks"]["rss_flat_within_10_percent"]
    assert summary["rss_growth_after_warmup"]["web"] > 0.1
    assert not summary["passed"]


def test_p99_drift_fails() -> None:
    summary = _verdicts(_samples(p99_growth=2.0))
    assert not summary["checks"]["p99_latency_steady"]


def test_redis_memory_left_behind_fails() -> None:
    summary = _verdicts(_samples(), drained_bytes=40 * MiB)
    assert not summary["checks"]["redis_memory_back_to_baseline"]


def test_client_errors_and_skipped_jobs_fail() -> None:
    load = Load(skipped=3)
    assert not _verdicts(_samples(), load=load)["checks"]["no_errors"]
    load = Load()
    load.errors["poll 503"] += 1
    assert not _verdicts(_samples(), load=load)["checks"]["no_errors"]


def test_the_completion_rate_is_reported_per_core() -> None:
    # 50 jobs completed a second after the warm-up (20 s of 100).
    figures = soak_verdicts.rates(_samples(), 20.0, 100.0)
    assert figures["completed_per_s"] == 50.0
    assert figures["jobs_per_s_per_core"] == round(50.0 / figures["cores"], 1)


def _gc_metrics(counts: dict[str, int]) -> str:
    """chatq_gc_pause_seconds buckets as /metrics shows them, for generations 0 and 2."""
    lines = []
    for generation in ("0", "2"):
        for le, n in counts.items():
            lines.append(
                f'chatq_gc_pause_seconds_bucket{{generation="{generation}",le="{le}"}}'
                f" {float(n) if generation == '0' else 0.0}"
            )
    return "\n".join(lines) + "\n"


def test_the_longest_gc_pause_is_bounded_by_the_buckets_of_the_load_only() -> None:
    # Before the load: one start-up collection between 0.1 and 0.25 s.
    before = gcpauses.parse(_gc_metrics({"0.01": 0, "0.05": 0, "0.1": 0, "0.25": 1, "+Inf": 1}))
    # During it: 40 more pauses, the longest between 0.01 and 0.05 s.
    after = gcpauses.parse(_gc_metrics({"0.01": 30, "0.05": 40, "0.1": 40, "0.25": 41, "+Inf": 41}))
    assert gcpauses.longest(before, after) == {
        "pauses": 40,
        "above_s": 0.01,
        "at_most_s": 0.05,
        "over_target": 0,
    }
    # With the start-up's collection counted: one pause over the 0.05 s target.
    assert gcpauses.longest(None, after)["at_most_s"] == 0.25
    assert gcpauses.longest(None, after)["over_target"] == 1
    over = gcpauses.parse(_gc_metrics({"0.01": 0, "0.25": 0, "+Inf": 2}))
    assert gcpauses.longest(None, over) == {
        "pauses": 2,
        "above_s": 0.25,
        "at_most_s": None,
        "over_target": 2,
    }
    assert gcpauses.longest(after, after)["pauses"] == 0


def test_the_worst_gc_bound_of_web_and_workers_is_the_summary_figure() -> None:
    quiet = gcpauses.parse(_gc_metrics({"0.01": 5, "0.05": 5, "+Inf": 5}))
    slow = gcpauses.parse(_gc_metrics({"0.01": 5, "0.05": 6, "+Inf": 6}))
    summary = soak_verdicts.gc_longest(
        {"web": None, "workers": [None, None]}, {"web": quiet, "workers": [quiet, slow]}
    )
    assert summary["at_most_s"] == 0.05 and summary["read"]
    unread = soak_verdicts.gc_longest(
        {"web": None, "workers": [None]}, {"web": quiet, "workers": [None]}
    )
    assert not unread["read"]


@pytest.mark.slow
def test_a_short_soak_of_the_real_stack_passes(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    args = [
        "--minutes",
        "0.3",
        "--rate",
        "10",
        "--waiters",
        "10",
        "--ttl",
        "2",
        "--sample-seconds",
        "1",
        "--out",
        str(out),
    ]
    assert soak.main(args) == 0
    result = json.loads(out.read_text())
    summary = result["summary"]
    assert summary["submitted"] == summary["completed"] >= 150
    assert set(summary["cpu_ms_per_job"]) == {
        "web",
        "workers",
        "redis",
        "fakellm",
        "load_generator",
        "total",
    }
    assert all(value > 0 for value in summary["cpu_ms_per_job"].values())
    assert summary["gc_pause_longest"]["read"] and summary["completed_per_s"] > 0
    assert result["alive"] == {"web": True, "workers": [True, True]}
