"""Issue 6 measures 2 and 3: idle long-polls held by one web process, woken at a set rate.

Each level parks `waiters` long-polls plus a few probes, waits until the web process is
idle (all parked), ends the probes' jobs, waits PROBE_GRACE_S, then ends the waiters' jobs
at the set rate. A probe answered within the grace proves that no request is queued behind
a parked one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from bench.completer import (
    Run,
    chatq_finisher,
    chatq_store,
    create_running,
    finish_at_rate,
    finish_burst,
)
from bench.lab import Lab
from bench.loadrun import LoadRun
from bench.procstat import CpuMeter, rss_bytes, serving_pid, wait_idle
from bench.sections.common import JSON
from bench.stack import ChatqStack
from bench.stats import summary_ms
from tests.procs import ALICE_KEY

WAIT_S = 110
TTL_S = 900
PROBE_GRACE_S = 1.0
STACKS = [("waiters", {"workers": 0, "CHATQ_MAX_WAIT": "120", "CHATQ_JOB_TTL": str(TTL_S)})]


def wake_stats(answers: dict[str, list[object]], stamps: dict[str, float]) -> JSON:
    """Wake latency (answer time minus the finish call) and the failures, over `stamps`."""
    lat, errors = [], 0
    for job_id, t_finish in stamps.items():
        got = answers.get(job_id)
        if not got or got[1] != 200 or not got[2]:
            errors += 1
            continue
        lat.append(float(got[0]) - t_finish)  # type: ignore[arg-type]
    in_grace = sum(1 for x in lat if x < PROBE_GRACE_S)
    return {"wake": summary_ms(lat), "errors": errors, "answered_in_grace": in_grace}


def park(
    url: str, kind: str, ids: list[str], web_pid: int, wall: bool = False
) -> tuple[LoadRun, float]:
    """Send one long-poll per id and wait until the server is idle: all are parked (`wall`:
    the answers carry the wall-clock receive time and the job's `completed_at`)."""
    spec = {
        "mode": "park",
        "kind": kind,
        "base": url,
        "key": ALICE_KEY,
        "ids": ids,
        "wait_s": WAIT_S,
        "ramp_per_s": 2000,
        "timeout_s": WAIT_S + 30,
        "wall": wall,
    }
    run = LoadRun(spec)
    t0 = time.monotonic()
    run.wait_for("SENT", 120)
    wait_idle(web_pid, timeout_s=120)
    return run, time.monotonic() - t0


def measure_level(
    lab: Lab,
    url: str,
    kind: str,
    server_pid: int,
    pids: dict[str, int],
    runs: list[Run],
    count: int,
    finish: Callable[[Run], None],
    rate: float,
) -> JSON:
    """Park all `runs` (the first `count` are waiters, the rest probes), then wake them."""
    web_pid = serving_pid(server_pid)
    rss_before = rss_bytes(web_pid)
    run, park_s = park(url, kind, [r[0] for r in runs], web_pid)
    rss_parked = rss_bytes(web_pid)
    meter = CpuMeter({**pids, "harness (completer)": os.getpid()}).start()
    with lab.profiled(f"{kind}-wake-{count}", {"web": server_pid}):
        probe_stamps = finish_at_rate(finish, runs[count:], rate)
        time.sleep(PROBE_GRACE_S)
        stamps = finish_at_rate(finish, runs[:count], rate)
        result = run.result(WAIT_S + 60)
    answers = result["answers"]
    return {
        "waiters": count,
        "probes": len(runs) - count,
        "rate_per_s": rate,
        "park_s": round(park_s, 1),
        "rss_before_mib": round(rss_before / 2**20, 1),
        "rss_parked_mib": round(rss_parked / 2**20, 1),
        "kib_per_waiter": round((rss_parked - rss_before) / 1024 / max(len(runs), 1), 1),
        "probe": wake_stats(answers, probe_stamps),
        **wake_stats(answers, stamps),
        "cpu": {**meter.stop(), "loadgen (whole run)": result["loadgen_cpu"]},
    }


def _burst(lab: Lab, stack: ChatqStack, count: int) -> JSON:
    """Park `count` waiters, end all their jobs at once: how fast does one process wake them?"""
    store = chatq_store(stack.redis.url, TTL_S)
    runs = create_running(store, count)
    run, _ = park(stack.url, "chatq", [r[0] for r in runs], serving_pid(stack.web.pid))
    meter = CpuMeter({**stack.pids(), "harness (completer)": os.getpid()}).start()
    with lab.profiled("chatq-burst", {"web": stack.web.pid}):
        stamps = finish_burst(chatq_finisher(store), runs)
        result = run.result(WAIT_S + 60)
    finish_s = max(stamps.values()) - min(stamps.values())
    answers = result["answers"]
    last = max(float(a[0]) for a in answers.values())  # type: ignore[arg-type]
    span_s = last - min(stamps.values())
    return {
        "waiters": count,
        "finishes_per_s": round(count / max(finish_s, 1e-9)),
        "wakes_per_s": round(count / max(span_s, 1e-9)),
        **wake_stats(answers, stamps),
        "cpu": {**meter.stop(), "loadgen (whole run)": result["loadgen_cpu"]},
    }


def run(lab: Lab) -> JSON:
    """Each waiter level at the set completion rate, then the burst."""
    name, recipe = STACKS[0]
    stack = lab.chatq(name, **recipe)
    sizes = lab.sizes
    store = chatq_store(stack.redis.url, TTL_S)
    finish = chatq_finisher(store)
    levels = []
    for count in sizes.waiter_levels:
        runs = create_running(store, count + sizes.waiter_probes)
        levels.append(
            measure_level(
                lab,
                stack.url,
                "chatq",
                stack.web.pid,
                stack.pids(),
                runs,
                count,
                finish,
                sizes.waiter_rate_per_s,
            )
        )
    burst = _burst(lab, stack, sizes.burst_waiters)
    lab.drop("waiters")
    return {"levels": levels, "burst": burst, "probe_grace_s": PROBE_GRACE_S}
