"""`make soak`: its verdicts catch growth and drift, and a tiny run of the whole script passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scripts import soak

MiB = 1024 * 1024
BASELINE = {"used_memory": 2 * MiB, "used_memory_rss": 8 * MiB, "keys": 10}


def _samples(web_growth: float = 0.0, p99_growth: float = 0.0) -> list[dict[str, Any]]:
    """100 samples, one a second, of a load that grows by the given fractions over its run."""
    out = []
    for t in range(1, 101):
        share = t / 100
        out.append({
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
        })
    return out


def _verdicts(samples: list[dict[str, Any]], drained_bytes: int = 2 * MiB,
              load: soak.Load | None = None) -> dict[str, Any]:
    drained = {**BASELINE, "used_memory": drained_bytes}
    return soak._verdicts(samples, 100.0, 20.0, BASELINE, drained, load or soak.Load())


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
    load = soak.Load(skipped=3)
    assert not _verdicts(_samples(), load=load)["checks"]["no_errors"]
    load = soak.Load()
    load.errors["poll 503"] += 1
    assert not _verdicts(_samples(), load=load)["checks"]["no_errors"]


@pytest.mark.slow
def test_a_short_soak_of_the_real_stack_passes(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    args = ["--minutes", "0.3", "--rate", "10", "--waiters", "10", "--ttl", "2",
            "--sample-seconds", "1", "--out", str(out)]
    assert soak.main(args) == 0
    result = json.loads(out.read_text())
    summary = result["summary"]
    assert summary["submitted"] == summary["completed"] >= 150
    assert set(summary["cpu_ms_per_job"]) == {"web", "workers", "redis", "fakellm",
                                              "load_generator", "total"}
    assert all(value > 0 for value in summary["cpu_ms_per_job"].values())
    assert result["alive"] == {"web": True, "workers": [True, True]}
