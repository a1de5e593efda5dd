"""Issue 4: cache-hit latency at submit (POST /v1/jobs answered 200 with `"cached": true`).

A hook: while the running chatq answers no cache hit, the section reports `todo` instead of
figures, so the harness works before and after the cache exists.
"""

from __future__ import annotations

import re
import time

import requests

from bench.lab import Lab
from bench.sections.common import JSON, body, scrape
from bench.stats import summary_ms
from tests.procs import ALICE_KEY

REQUEST = {**body(content="what is the capital of France?"), "temperature": 0}
_BUCKET = re.compile(
    r"^chatq_http_request_duration_seconds_bucket\{(?P<labels>[^}]*)\} (?P<n>\S+)$"
)


def submit_buckets(metrics_text: str) -> dict[float, float]:
    """Cumulative counts by upper bound (s) of POST /v1/jobs answered 200, from /metrics."""
    out: dict[float, float] = {}
    for line in metrics_text.splitlines():
        m = _BUCKET.match(line)
        labels = m.group("labels") if m else ""
        if (
            m
            and 'endpoint="/v1/jobs"' in labels
            and 'method="POST"' in labels
            and 'status="200"' in labels
        ):
            le = labels.split('le="', 1)[1].split('"', 1)[0]
            out[float(le)] = out.get(float(le), 0.0) + float(m.group("n"))
    return out


def quantile_ms(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The q-quantile of the requests between two readings, interpolated in its bucket."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return None
    rank, low, below = q * counts[-1], 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            share = (rank - below) / max(count - below, 1e-9)
            return (
                round(1000 * (low + share * (bound - low)), 2)
                if bound != float("inf")
                else round(1000 * low, 2)
            )
        low, below = bound, count
    return None


STACKS = [("main", {})]


def _timed(call: object, count: int) -> list[float]:
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        call()  # type: ignore[operator]
        out.append(time.perf_counter() - t0)
    return out


def run(lab: Lab) -> JSON:
    """Prime the cache with one job, then time identical submits and a bare /healthz."""
    stack = lab.chatq()
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {ALICE_KEY}"
    url = f"{stack.url}/v1/jobs"
    session.post(url, params={"wait": 10}, json=REQUEST, timeout=30).raise_for_status()
    probe = session.post(url, json=REQUEST, timeout=30)
    if probe.status_code != 200 or not probe.json().get("cached"):
        return {
            "status": "todo",
            "note": "no cache hit answered at submit (cache not built?)",
            "probe_status": probe.status_code,
        }
    hits: list[bool] = []

    def submit() -> None:
        resp = session.post(url, json=REQUEST, timeout=30)
        hits.append(resp.status_code == 200 and bool(resp.json().get("cached")))

    metrics_url = f"{stack.url}/metrics"
    before = submit_buckets(scrape(metrics_url))
    latency = _timed(submit, lab.sizes.cache_hits)
    after = submit_buckets(scrape(metrics_url))
    floor = _timed(lambda: session.get(f"{stack.url}/healthz", timeout=5), lab.sizes.cache_hits)
    return {
        "status": "measured",
        "hits": sum(hits),
        "submits": len(hits),
        "server_p50_ms": quantile_ms(before, after, 0.5),
        "server_p99_ms": quantile_ms(before, after, 0.99),
        "client_latency": summary_ms(latency),
        "healthz_latency": summary_ms(floor),
    }
