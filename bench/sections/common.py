"""Helpers the sections share: request bodies, load specs and outcome summaries."""

from __future__ import annotations

from typing import Any

import requests

from bench.stats import summary_ms
from tests.procs import ALICE_KEY, METRICS_AUTH

JSON = dict[str, Any]


def body(model: str = "fake", content: str = "hello") -> JSON:
    """A chat request with one user message."""
    return {"model": model, "messages": [{"role": "user", "content": content}]}


def scrape(metrics_url: str) -> str:
    """A web's /metrics as its scraper reads it, with the metrics token: an API key is refused
    (401), and a refusal raises rather than reading as no series."""
    answer = requests.get(metrics_url, headers=METRICS_AUTH, timeout=10)
    answer.raise_for_status()
    return answer.text


def target(base: str, request: JSON, key: str = ALICE_KEY, wait_s: float = 30.0) -> JSON:
    """The `target` part of a load spec."""
    return {"base": base, "key": key, "body": request, "wait_s": wait_s}


def closed_spec(
    flow: str, tgt: JSON, clients: int, duration_s: float, stagger_s: float = 0.5, max_jobs: int = 0
) -> JSON:
    """A closed-loop load spec; clients start spread over `stagger_s`; with `max_jobs`, no
    more jobs than that in all (then `duration_s` is only a bound)."""
    return {
        "mode": "closed",
        "flow": flow,
        "target": tgt,
        "clients": clients,
        "duration_s": duration_s,
        "stagger_s": stagger_s,
        "timeout_s": 120,
        "max_jobs": max_jobs,
    }


def open_spec(flow: str, tgt: JSON, rate_per_s: float, duration_s: float) -> JSON:
    """An open-loop (Poisson arrivals) load spec."""
    return {
        "mode": "open",
        "flow": flow,
        "target": tgt,
        "rate_per_s": rate_per_s,
        "duration_s": duration_s,
        "timeout_s": 60,
    }


def latencies_s(outcomes: list[JSON], minus_s: float = 0.0) -> list[float]:
    """Client-seen seconds of the successful outcomes, less `minus_s`."""
    return [o["t1"] - o["t0"] - minus_s for o in outcomes if o["ok"]]


def outcome_summary(result: JSON, minus_s: float = 0.0) -> JSON:
    """Latency summary, error count, requests per job and completed jobs/s of one load run."""
    outcomes: list[JSON] = result["outcomes"]
    ok = [o for o in outcomes if o["ok"]]
    start, end = result["window"]
    in_window = [o for o in ok if start <= o["t1"] <= end]
    return {
        "jobs": len(outcomes),
        "errors": len(outcomes) - len(ok),
        "error_kinds": sorted({o["error"] or str(o["code"]) for o in outcomes if not o["ok"]}),
        "latency": summary_ms(latencies_s(outcomes, minus_s)),
        "requests_per_job": round(sum(o["requests"] for o in ok) / len(ok), 2) if ok else None,
        "jobs_per_s": round(len(in_window) / (end - start), 1) if end > start else None,
    }


def _p50_ms(values: list[float]) -> float | None:
    found = summary_ms(values)["p50_ms"]
    return None if found is None else float(found)


def breakdown(outcomes: list[JSON], upstream_s: float) -> JSON:
    """Where a chatq job's added time goes (p50 each), from its record's wall-clock stamps."""
    done = [o for o in outcomes if o["ok"] and o.get("completed") and o.get("started")]
    return {
        "submit_to_created_ms": _p50_ms([o["created"] - o["t0_wall"] for o in done]),
        "queued_ms": _p50_ms([o["started"] - o["created"] for o in done]),
        "run_beyond_upstream_ms": _p50_ms(
            [o["completed"] - o["started"] - upstream_s for o in done]
        ),
        "completed_to_client_ms": _p50_ms([o["t1_wall"] - o["completed"] for o in done]),
    }
