"""The two soak lines of the headline targets table, judged from `make soak` result files.

A soak takes 10 to 30 minutes, so `make bench` does not run one: `python -m bench --soak
FILE` (as often as needed) adds the JSON that `python -m scripts.soak` wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.gcpauses import describe
from bench.rows import JSON, Row, dig, missing

GC_LIMIT_S = 0.05
GC_MEASURE = "longest GC pause, worker and web, 10 min at 50 jobs/s"
SOAK_MEASURE = "soak, 30 min"
SOAK_TARGET = "the highest rate this machine holds, as jobs/s per core, every verdict passing"


def load(paths: list[Path]) -> JSON:
    """The config and summary of each soak result file."""
    runs = []
    for path in paths:
        data = json.loads(path.read_text())
        config = {k: data["config"].get(k) for k in ("minutes", "rate", "waiters", "workers")}
        runs.append({"file": path.name, "config": config, "summary": data["summary"]})
    return {"runs": runs}


def _runs(s: JSON) -> list[JSON]:
    return list(dig(s, "soak", "runs") or [])


def _how(run: JSON) -> str:
    c = run["config"]
    return (
        f"{c['minutes']:g} min at {c['rate']:g} jobs/s, commit {run['summary'].get('commit', '?')}"
    )


def _cpu_part(run: JSON) -> str:
    """The CPU time of the same collections, where the soak read it: what a pause holds
    beyond it is time the process waited for a core."""
    cpu = dig(run, "summary", "gc_pause_cpu_longest")
    if not cpu:
        return ""
    workers = ", ".join(describe(w) for w in cpu["workers"])
    return f"; their CPU time: web {describe(cpu['web'])}; workers {workers}"


def gc_pause(s: JSON) -> list[Row]:
    """The longest GC pause of the web and the workers in the soak closest to 10 min at 50/s."""
    target = "≤ 50 ms"
    fit = [
        r
        for r in _runs(s)
        if r["config"]["minutes"] >= 10
        and r["config"]["rate"] >= 50
        and dig(r, "summary", "gc_pause_longest")
    ]
    if not fit:
        return [
            missing(
                GC_MEASURE,
                target,
                12,
                "not measured: python -m scripts.soak --preset "
                "gc, then python -m bench --soak FILE",
            )
        ]
    run = min(fit, key=lambda r: (r["config"]["minutes"], r["config"]["rate"]))
    gc = run["summary"]["gc_pause_longest"]
    workers = ", ".join(describe(w) for w in gc["workers"])
    at_most = gc["at_most_s"]
    return [
        Row(
            GC_MEASURE,
            target,
            f"web {describe(gc['web'])}; workers {workers} ({_how(run)}; bounds of "
            f"chatq_gc_pause_seconds' buckets){_cpu_part(run)}",
            bool(gc["read"]) and at_most is not None and at_most <= GC_LIMIT_S,
            12,
        )
    ]


def soak(s: JSON) -> list[Row]:
    """The highest rate a 30-minute soak held with every verdict passing."""
    long = [r for r in _runs(s) if r["config"]["minutes"] >= 30]
    if not long:
        return [
            missing(
                SOAK_MEASURE,
                SOAK_TARGET,
                12,
                "not measured: python -m scripts.soak --rate R, then python -m bench --soak FILE",
            )
        ]
    passed = [r for r in long if r["summary"]["passed"]]
    failed = sorted({r["config"]["rate"] for r in long if not r["summary"]["passed"]})
    tried = f"; failed at {', '.join(f'{r:g}' for r in failed)} jobs/s" if failed else ""
    if not passed:
        return [Row(SOAK_MEASURE, SOAK_TARGET, f"no 30-minute run passed{tried}", False, 12)]
    best = max(passed, key=lambda r: r["config"]["rate"])
    summary = best["summary"]
    return [
        Row(
            SOAK_MEASURE,
            SOAK_TARGET,
            f"{best['config']['rate']:g} jobs/s: {summary.get('completed_per_s')} completed/s"
            f" = {summary.get('jobs_per_s_per_core')} jobs/s per core "
            f"({summary.get('cores')} cores), every verdict passed ({_how(best)}){tried}",
            True,
            12,
        )
    ]
