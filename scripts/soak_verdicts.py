"""The soak's verdicts and summary figures, computed from its samples."""

from __future__ import annotations

import os
import statistics
from typing import Any

from bench import gcpauses
from scripts.soak_load import Load

MiB = 1024 * 1024
RSS_TOLERANCE = 0.10
P99_TOLERANCE = 1.5
REDIS_SLACK_BYTES = 2 * MiB  # per-second stats hashes (300 s) and allocator noise


def window(samples: list[dict[str, Any]], start_s: float, end_s: float) -> list[dict[str, Any]]:
    """The samples taken between `start_s` and `end_s` (seconds since the start)."""
    return [s for s in samples if start_s <= s["t_s"] <= end_s]


def cpu_ms_per_job(steady: list[dict[str, Any]]) -> dict[str, float] | None:
    """CPU milliseconds per completed job, by role, over the steady samples."""
    if len(steady) < 2 or steady[-1]["completed"] == steady[0]["completed"]:
        return None
    jobs_done = steady[-1]["completed"] - steady[0]["completed"]
    per_job = {
        role: round((steady[-1]["cpu_s"][role] - cpu_s) * 1000 / jobs_done, 2)
        for role, cpu_s in steady[0]["cpu_s"].items()
    }
    return per_job | {"total": round(sum(per_job.values()), 2)}


def growth(first: list[float], last: list[float]) -> float | None:
    """Relative growth of the median from `first` to `last`; None without figures."""
    if not first or not last or statistics.median(first) == 0:
        return None
    return statistics.median(last) / statistics.median(first) - 1


def verdicts(
    samples: list[dict[str, Any]],
    load_s: float,
    warmup_s: float,
    baseline: dict[str, int],
    drained: dict[str, int],
    load: Load,
) -> dict[str, Any]:
    """Every verdict of a run and the figures behind them."""
    steady = load_s - warmup_s
    tenth = max(steady / 10, 1.0)
    first = window(samples, warmup_s, warmup_s + tenth)
    last = window(samples, load_s - tenth, load_s + 1)
    rss: dict[str, float | None] = {
        "web": growth([s["web_rss"] for s in first], [s["web_rss"] for s in last])
    }
    for i in range(len(samples[0]["worker_rss"]) if samples else 0):
        rss[f"worker{i}"] = growth(
            [s["worker_rss"][i] for s in first], [s["worker_rss"][i] for s in last]
        )
    p99_first = [s["e2e_p99_s"] for s in first if s["e2e_p99_s"] is not None]
    p99_last = [s["e2e_p99_s"] for s in last if s["e2e_p99_s"] is not None]
    p99_ratio = (max(p99_last) / max(p99_first)) if p99_first and p99_last else None
    redis_excess = drained["used_memory"] - baseline["used_memory"]
    checks = {
        "rss_flat_within_10_percent": all(
            g is not None and g <= RSS_TOLERANCE for g in rss.values()
        ),
        "redis_memory_back_to_baseline": redis_excess
        <= max(REDIS_SLACK_BYTES, 0.1 * baseline["used_memory"]),
        "p99_latency_steady": p99_ratio is not None and p99_ratio <= P99_TOLERANCE,
        "no_errors": not load.errors and load.skipped == 0,
    }
    steady_samples = window(samples, warmup_s, load_s + 1)
    return {
        "passed": all(checks.values()),
        "checks": checks,
        "rss_growth_after_warmup": {k: None if v is None else round(v, 4) for k, v in rss.items()},
        "rss_mib_end": {
            "web": last[-1]["web_rss"] / MiB if last else None,
            "workers": [r / MiB for r in last[-1]["worker_rss"]] if last else None,
        },
        "redis_used_memory_baseline": baseline["used_memory"],
        "redis_used_memory_peak": max((s["redis"]["used_memory"] for s in samples), default=0),
        "redis_used_memory_drained": drained["used_memory"],
        "redis_keys_drained": drained["keys"],
        "e2e_p99_s_first_tenth": max(p99_first) if p99_first else None,
        "e2e_p99_s_last_tenth": max(p99_last) if p99_last else None,
        "e2e_p99_s_worst_interval": max(
            (s["e2e_p99_s"] for s in steady_samples if s["e2e_p99_s"] is not None), default=None
        ),
        "submit_p99_ms_worst_interval": max(
            (s["submit_p99_ms"] for s in steady_samples if s["submit_p99_ms"] is not None),
            default=None,
        ),
        "wake_p99_ms_worst_interval": max(
            (s["wake_p99_ms"] for s in steady_samples if s["wake_p99_ms"] is not None), default=None
        ),
        "max_waiting": max((s["in_flight"] for s in samples), default=0),
        "cpu_ms_per_job": cpu_ms_per_job(steady_samples),
        "submitted": load.submitted,
        "completed": load.completed,
        "skipped": load.skipped,
        "errors": dict(load.errors),
    }


def rates(samples: list[dict[str, Any]], warmup_s: float, load_s: float) -> dict[str, Any]:
    """Jobs completed per second after the warm-up, and per core of this machine."""
    steady = window(samples, warmup_s, load_s + 1)
    cores = os.cpu_count() or 1
    if len(steady) < 2 or steady[-1]["t_s"] <= steady[0]["t_s"]:
        return {"cores": cores, "completed_per_s": None, "jobs_per_s_per_core": None}
    per_s = (steady[-1]["completed"] - steady[0]["completed"]) / (
        steady[-1]["t_s"] - steady[0]["t_s"]
    )
    return {
        "cores": cores,
        "completed_per_s": round(per_s, 1),
        "jobs_per_s_per_core": round(per_s / cores, 1),
    }


def gc_longest(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The longest GC pause of the web and of each worker over the load, as bucket bounds;
    `at_most_s` is the largest upper bound of them all (None: above every bucket)."""
    web = gcpauses.longest(before["web"], after["web"])
    workers = [
        gcpauses.longest(b, a) for b, a in zip(before["workers"], after["workers"], strict=True)
    ]
    uppers = [r["at_most_s"] for r in [web, *workers] if r["pauses"]]
    finite = [float(u) for u in uppers if u is not None]
    worst = None if len(finite) < len(uppers) else max(finite, default=0.0)
    return {
        "web": web,
        "workers": workers,
        "at_most_s": worst,
        "read": all(r["pauses"] is not None for r in [web, *workers]),
    }
