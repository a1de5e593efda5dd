"""Issue 14: pacing to the upstream's own rate limits.

fakellm is limited to 600 requests and 20,000 tokens a minute (a `--quick` run shortens the
"minute" to 1 s and the limits with it: the same rates). Jobs arrive at twice the request
rate (Poisson, long-polled) at four chatq stacks in turn: workers that pace themselves
(learning the limits from fakellm's headers), workers that do not (CHATQ_UPSTREAM_PACING=0),
unpaced workers that may try each job 20 times, and unpaced workers whose clients submit a
failed job again until it completes (as a client that needs every answer does). fakellm's
buckets are reset to full before each. A job is 3 prompt words and `max_tokens` 20: 23
tokens as fakellm counts them, so the request limit is the one that binds.
"""

from __future__ import annotations

import requests

from bench.lab import Lab
from bench.loadrun import run_load
from bench.sections.common import JSON, target
from bench.stats import summary_ms
from tests.procs import start_fakellm

RPM, TPM = 600, 20_000
OFFERED = 2.0  # times the request limit
MAX_TOKENS = 20
# Unpaced as configured by default (4 attempts a job), and with attempts enough for every
# job to get through the 429s in the end (so that latencies compare over the same jobs).
VARIANTS: dict[str, dict[str, str]] = {
    "paced": {"CHATQ_UPSTREAM_PACING": "1"},
    "unpaced": {"CHATQ_UPSTREAM_PACING": "0"},
    "unpaced_20_attempts": {"CHATQ_UPSTREAM_PACING": "0", "CHATQ_UPSTREAM_MAX_ATTEMPTS": "20"},
    "unpaced_resubmitted": {"CHATQ_UPSTREAM_PACING": "0"},
}
# How each variant's clients run a job (bench/load/flows.py); the others long-poll once.
FLOWS = {"unpaced_resubmitted": "chatq_resubmit"}


def _fakellm(lab: Lab) -> tuple[str, str]:
    """A limited fakellm of this section's own: (its …/v1 URL, its root)."""
    proc, url = start_fakellm()
    lab.track(proc)
    return url, url.removesuffix("/v1")


def _limits(root: str, window_s: float) -> JSON:
    scale = window_s / 60
    wanted = {"rpm": round(RPM * scale), "tpm": round(TPM * scale), "window_s": window_s}
    requests.post(root + "/limits", json=wanted, timeout=5).raise_for_status()
    requests.post(root + "/stats/reset", timeout=5).raise_for_status()
    return wanted


def _rate_per_s(times: list[float], skip: int) -> float | None:
    """Completions per second after the first `skip`, to the last: the pace the limit
    allows once its bucket is spent."""
    times = sorted(times)[skip:]
    if len(times) < 10 or times[-1] <= times[0]:
        return None
    return round((len(times) - 1) / (times[-1] - times[0]), 3)


def _variant(lab: Lab, name: str, fakellm: str, root: str) -> JSON:
    s = lab.sizes
    limits = _limits(root, s.pacing_window_s)
    rate_per_s = OFFERED * RPM / 60
    stack = lab.chatq(f"pacing_{name}", upstream=fakellm, **VARIANTS[name])
    request = {
        "model": "fake",
        "messages": [{"role": "user", "content": "pace me please"}],
        "max_tokens": MAX_TOKENS,
    }
    spec = {
        "mode": "open",
        "flow": FLOWS.get(name, "chatq"),
        "target": target(stack.url, request, wait_s=30.0),
        "rate_per_s": rate_per_s,
        "duration_s": s.pacing_jobs / rate_per_s,
        "timeout_s": 900,
    }
    with lab.profiled(f"pacing-{name}", stack.python_pids()):
        result = run_load(spec, timeout_s=1800)
    lab.drop(f"pacing_{name}")
    stats = requests.get(root + "/stats", timeout=5).json()
    outcomes = result["outcomes"]
    ok = [o for o in outcomes if o["ok"]]
    # The full bucket lets jobs through as they come until the arrivals beyond the refill
    # have spent it: then a backlog forms, and the limit alone sets the pace.
    spent_after = round(limits["rpm"] * OFFERED / (OFFERED - 1))
    return {
        "jobs": len(outcomes),
        "completed": len(ok),
        "failed": len(outcomes) - len(ok),
        "upstream_requests": stats["requests"],
        "upstream_429": stats["rate_limited"],
        "client_requests": sum(o["requests"] for o in outcomes),
        "latency": summary_ms([o["t1"] - o["t0"] for o in ok]),
        # Every job's time to its end, completed or failed.
        "latency_to_end": summary_ms([o["t1"] - o["t0"] for o in outcomes]),
        "completed_per_s_after_burst": _rate_per_s(
            [o["completed"] for o in ok if o.get("completed")], spent_after
        ),
        "limit_per_s": RPM / 60,
        "offered_per_s": rate_per_s,
    }


def run(lab: Lab) -> JSON:
    """The paced stack, then the unpaced ones, against the same limited fakellm."""
    fakellm, root = _fakellm(lab)
    out: JSON = {"rpm": RPM, "tpm": TPM, "window_s": lab.sizes.pacing_window_s}
    for name in VARIANTS:
        out[name] = _variant(lab, name, fakellm, root)
    paced = out["paced"]
    rate = paced["completed_per_s_after_burst"]
    out["paced_rate_vs_limit_pct"] = (
        None if rate is None else round(100 * (rate / paced["limit_per_s"] - 1), 1)
    )
    for other in ("unpaced", "unpaced_20_attempts", "unpaced_resubmitted"):
        p99_on, p99_off = paced["latency"]["p99_ms"], out[other]["latency"]["p99_ms"]
        ratio = round(p99_on / p99_off, 2) if p99_on and p99_off else None
        out[f"p99_paced_over_{other}"] = ratio
    return out
