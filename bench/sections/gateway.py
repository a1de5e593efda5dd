"""Issue 6 measures 5 and 6: chatq's front door against fakellm direct, by arrival rate."""

from __future__ import annotations

from bench.lab import Lab
from bench.loadrun import run_load
from bench.procstat import CpuMeter
from bench.sections.common import JSON, body, open_spec, outcome_summary, target
from tests.procs import UPSTREAM_KEY

P99_SATURATED_MS = 2000.0

STACKS = [("main", {})]

def _point(lab: Lab, rate: float) -> JSON:
    """Direct and through chatq at one arrival rate; the difference of their percentiles."""
    stack = lab.chatq()
    duration_s = lab.sizes.gateway_duration_s
    direct_base = lab.fakellm("main").removesuffix("/v1")
    direct = outcome_summary(run_load(open_spec(
        "front_door", target(direct_base, body(), key=UPSTREAM_KEY), rate, duration_s)))
    meter = CpuMeter({**stack.pids(), "fakellm": lab.fakellm_pid("main")}).start()
    with lab.profiled(f"gateway-{rate:g}", stack.python_pids()):
        result = run_load(open_spec("front_door", target(stack.url, body()), rate, duration_s))
    cpu = meter.stop()
    chatq = outcome_summary(result)
    chatq["jobs_per_s"] = round(len([o for o in result["outcomes"] if o["ok"]]) / duration_s, 1)
    overhead = {
        f"{q}_ms": _minus(chatq["latency"][f"{q}_ms"], direct["latency"][f"{q}_ms"])
        for q in ("p50", "p90", "p99")
    }
    return {"rate_per_s": rate, "direct": direct, "chatq": chatq, "overhead": overhead,
            "cpu": {**cpu, "loadgen": result["loadgen_cpu"]},
            "send_lag_max_ms": round(1000 * result["send_lag_max_s"], 1)}


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 2)


def saturated(point: JSON) -> bool:
    """Past saturation: errors, completions well under arrivals, or p99 beyond 2 s."""
    chatq = point["chatq"]
    p99 = chatq["latency"]["p99_ms"]
    slow = p99 is None or p99 > P99_SATURATED_MS
    behind = (chatq["jobs_per_s"] or 0) < 0.9 * point["rate_per_s"]
    return slow or behind or chatq["errors"] > 0.01 * max(chatq["jobs"], 1)


def run(lab: Lab) -> JSON:
    """Rising arrival rates until chatq saturates."""
    points = []
    for rate in lab.sizes.gateway_rates:
        points.append(_point(lab, rate))
        if saturated(points[-1]):
            break
    held = [p["rate_per_s"] for p in points if not saturated(p)]
    return {"points": points, "max_rate_held_per_s": max(held, default=None),
            "saturated_at_per_s": points[-1]["rate_per_s"] if saturated(points[-1]) else None}
