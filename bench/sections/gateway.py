"""Gateway overhead: chatq's `/v1/chat/completions` and LiteLLM's proxy against the direct call.

The same request (`model: fake`, instant, not streamed) to fakellm directly, through chatq's
front door (held until the job ends) and through LiteLLM's proxy (issue 12: its own venv,
fakellm behind it): first one request at a time, then open-loop Poisson arrivals at rising
rates. Each gateway climbs until it saturates; the named rates are run for every system
whether or not it saturated below them, so that all are compared at those rates.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench import litellm
from bench.lab import Lab
from bench.loadrun import run_load
from bench.procstat import CpuMeter
from bench.sections.common import JSON, body, closed_spec, open_spec, outcome_summary, target
from tests.procs import UPSTREAM_KEY

P99_SATURATED_MS = 2000.0
WARMUP_REQUESTS = 10
GATEWAYS = ("chatq", "litellm")
STACKS: list[tuple[str, JSON]] = [("main", {})]


@dataclass
class System:
    """Where one system is reached, and the processes whose CPU it costs."""

    name: str
    base: str
    key: str
    pids: dict[str, int]


def _litellm(lab: Lab) -> tuple[System | None, JSON]:
    """The proxy, when its venv is (or may be) built and it starts; and what happened."""
    if not (lab.sizes.litellm_build or litellm.built()):
        return None, {
            "status": "not run",
            "note": "its venv is not built and a --quick run "
            "builds nothing (python -m bench.litellm builds it)",
        }
    built = litellm.build()
    if built.command is None:
        return None, {"status": "not installed", "note": built.note}
    upstream = lab.fakellm("litellm")
    try:
        proxy = litellm.start(built.command, upstream, UPSTREAM_KEY, lab.tmp)
    except AssertionError as exc:
        return None, {"status": "did not start", "note": f"{built.note}; {exc}"}
    lab.track(proxy.proc)
    pids = {"litellm": proxy.proc.pid, "fakellm": lab.fakellm_pid("litellm")}
    return System("litellm", proxy.base, proxy.key, pids), {
        "status": "measured",
        "note": built.note,
        "version": litellm.VERSION,
    }


def _systems(lab: Lab) -> tuple[list[System], JSON]:
    stack = lab.chatq()
    # A fakellm of its own: the main one's counters are the chatq worker's alone (the
    # `connections` section reads them), not the load generator's direct calls too.
    direct = System(
        "direct",
        lab.fakellm("direct").removesuffix("/v1"),
        UPSTREAM_KEY,
        {"fakellm": lab.fakellm_pid("direct")},
    )
    chatq = System("chatq", stack.url, "", {**stack.pids(), "fakellm": lab.fakellm_pid("main")})
    peer, about = _litellm(lab)
    return [direct, chatq, *([peer] if peer else [])], about


def _target(system: System) -> JSON:
    if system.key:
        return target(system.base, body(), key=system.key)
    return target(system.base, body())


def _measure(lab: Lab, system: System, spec: JSON, tag: str) -> JSON:
    """One load run against one system: outcomes, completions per second, CPU by process."""
    meter = CpuMeter(system.pids).start()
    pids = {k: v for k, v in system.pids.items() if k in ("web", "worker")}
    with lab.profiled(f"gateway-{tag}-{system.name}", pids):
        result = run_load(spec)
    summary = outcome_summary(result)
    summary["cpu"] = {**meter.stop(), "loadgen": result["loadgen_cpu"]}
    ok = [o for o in result["outcomes"] if o["ok"]]
    # Open loop: completions over the arrival window; one at a time: over the whole run.
    span_s = (
        float(spec["duration_s"])
        if spec["mode"] == "open"
        else max((o["t1"] for o in ok), default=0.0) - min((o["t0"] for o in ok), default=0.0)
    )
    summary["jobs_per_s"] = round(len(ok) / span_s, 1) if span_s > 0 else None
    if "send_lag_max_s" in result:
        summary["send_lag_max_ms"] = round(1000 * result["send_lag_max_s"], 1)
    return summary


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 2)


def _overheads(runs: dict[str, JSON]) -> JSON:
    """Each gateway's percentiles less the direct call's, in the same run."""
    direct = runs["direct"]["latency"]
    return {
        name: {
            f"{q}_ms": _minus(runs[name]["latency"][f"{q}_ms"], direct[f"{q}_ms"])
            for q in ("p50", "p90", "p99")
        }
        for name in runs
        if name != "direct"
    }


def saturated(run: JSON, rate: float) -> bool:
    """Past saturation: errors over 1 %, completions under 90 % of arrivals, or p99 over 2 s."""
    p99 = run["latency"]["p99_ms"]
    slow = p99 is None or p99 > P99_SATURATED_MS
    behind = (run["jobs_per_s"] or 0) < 0.9 * rate
    return slow or behind or run["errors"] > 0.01 * max(run["jobs"], 1)


def _sequential(lab: Lab, systems: list[System]) -> JSON:
    """One request at a time, after a few to warm each system up (connections, lazy state)."""
    for system in systems:
        run_load(closed_spec("front_door", _target(system), 1, 60, 0.0, WARMUP_REQUESTS))
    count = lab.sizes.gateway_sequential
    runs = {
        s.name: _measure(
            lab, s, closed_spec("front_door", _target(s), 1, 600, 0.0, count), "sequential"
        )
        for s in systems
    }
    return {"requests": count, **runs, "overhead": _overheads(runs)}


def _ladder(lab: Lab, systems: list[System]) -> tuple[list[JSON], JSON]:
    """Rising rates; a system leaves the climb once saturated but still runs the named rates."""
    named = set(lab.sizes.gateway_named_rates)
    climbing = {s.name for s in systems if s.name != "direct"}
    points, first_saturated = [], {}
    for rate in sorted(set(lab.sizes.gateway_rates) | named):
        due = [s for s in systems if s.name in climbing or rate in named or s.name == "direct"]
        if len(due) == 1:
            continue  # only the direct call left: nothing to compare it with
        runs = {
            s.name: _measure(
                lab,
                s,
                open_spec("front_door", _target(s), rate, lab.sizes.gateway_duration_s),
                f"{rate:g}",
            )
            for s in due
        }
        for name, run in runs.items():
            run["saturated"] = saturated(run, rate)
            if run["saturated"] and name not in first_saturated:
                first_saturated[name] = rate
                climbing.discard(name)
        points.append({"rate_per_s": rate, **runs, "overhead": _overheads(runs)})
    return points, first_saturated


def _saturation(points: list[JSON], first: JSON, names: list[str]) -> JSON:
    """Per system: the lowest rate it saturated at, and the highest it held below that."""
    out = {}
    for name in names:
        limit = first.get(name)
        held = [
            p["rate_per_s"]
            for p in points
            if name in p and not p[name]["saturated"] and (limit is None or p["rate_per_s"] < limit)
        ]
        out[name] = {"saturated_at_per_s": limit, "max_rate_held_per_s": max(held, default=None)}
    return out


def run(lab: Lab) -> JSON:
    """Sequential, then the open-loop climb, for the direct call, chatq and LiteLLM."""
    systems, about = _systems(lab)
    sequential = _sequential(lab, systems)
    points, first = _ladder(lab, systems)
    saturation = _saturation(points, first, [s.name for s in systems])
    return {
        "systems": [s.name for s in systems],
        "litellm": about,
        "named_rates": sorted(lab.sizes.gateway_named_rates),
        "sequential": sequential,
        "points": points,
        "saturation": saturation,
        "max_rate_held_per_s": saturation["chatq"]["max_rate_held_per_s"],
        "saturated_at_per_s": saturation["chatq"]["saturated_at_per_s"],
    }
