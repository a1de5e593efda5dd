"""Issue 37: the end-to-end wake. Long-polls parked on jobs that a real `python -m worker` runs
against fakellm, their ends spread over a few seconds; the wake is the client's receive time
less the job's `completed_at` (both Unix seconds on this machine's clock).

Each run submits `waiters` jobs through `POST /v1/jobs` (model `fake:ttft=…`, the ttfts spread
evenly over the run's window), parks one `GET /v1/jobs/{id}?wait=…` per job and collects the
answers. At a level above `E2E_MEASURED` waiters, the rest are parked once on jobs created
running in the store (no worker ends them during the runs) and ended together afterwards:
the web holds them all while the measured ones wake.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from bench import gcpauses
from bench.completer import chatq_finisher, chatq_store, create_running, finish_burst
from bench.lab import Lab
from bench.loadrun import LoadRun
from bench.procstat import rss_bytes, serving_pid
from bench.sections.common import JSON, body
from bench.sections.waiters import TTL_S, WAIT_S, park
from bench.stack import ChatqStack
from bench.stats import summary_ms
from tests.procs import ALICE_KEY

E2E_MEASURED = 1000
# The ends start this long after the first submission: submitting and parking come first.
SUBMIT_LEAD_S = 2.0
SUBMITS_PER_S = 80
STACKS = [
    (
        "e2ewake",
        {
            "workers": 1,
            "CHATQ_MAX_WAIT": "120",
            "CHATQ_JOB_TTL": str(TTL_S),
            "CHATQ_WORKER_CONCURRENCY": str(E2E_MEASURED + 100),
        },
    )
]


def _submit(url: str, ends_s: list[float]) -> list[str]:
    """One job per end time (Unix seconds), through the public API; their ids. Each job's
    ttft is set at its submission, so that the time the submissions take moves no end."""
    session = requests.Session()
    headers = {"Authorization": f"Bearer {ALICE_KEY}"}

    def one(end_s: float) -> str:
        ttft_s = max(0.0, end_s - time.time())
        request = body(f"fake:ttft={ttft_s:.3f}")
        resp = session.post(f"{url}/v1/jobs", json=request, headers=headers, timeout=30)
        resp.raise_for_status()
        return str(resp.json()["id"])

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, ends_s))


def wall_wakes(answers: dict[str, list[object]], parked_at_s: float) -> JSON:
    """Receive time - `completed_at` of the jobs that ended after every poll was parked."""
    lat, errors, early = [], 0, 0
    for got in answers.values():
        if got[1] != 200 or not got[2] or len(got) < 5 or got[4] is None:
            errors += 1
        elif float(got[4]) < parked_at_s:  # type: ignore[arg-type]
            early += 1  # answered at once, not woken: no wake to measure
        else:
            lat.append(float(got[3]) - float(got[4]))  # type: ignore[arg-type]
    return {"wake": summary_ms(lat), "errors": errors, "ended_before_parked": early}


def one_run(stack: ChatqStack, count: int, window_s: tuple[float, float]) -> JSON:
    """Submit `count` jobs ending over `window_s` after a lead for submitting and parking,
    park on them, collect."""
    first, last = window_s
    start_s = time.time() + SUBMIT_LEAD_S + count / SUBMITS_PER_S
    ends = [start_s + first + (last - first) * i / max(count - 1, 1) for i in range(count)]
    random.shuffle(ends)
    gc_before = gcpauses.read(f"{stack.url}/metrics")
    t0 = time.time()
    ids = _submit(stack.url, ends)
    submit_s = time.time() - t0
    run, park_s = park(stack.url, "chatq", ids, serving_pid(stack.web.pid), wall=True)
    parked_at_s = time.time()
    result = run.result(WAIT_S + 60)
    return {
        "load_1m": round(os.getloadavg()[0], 2),
        "submit_s": round(submit_s, 2),
        "park_s": round(park_s, 2),
        **wall_wakes(result["answers"], parked_at_s),
        "gc_web": gcpauses.longest(gc_before, gcpauses.read(f"{stack.url}/metrics")),
        "web_rss_mib": round(rss_bytes(serving_pid(stack.web.pid)) / 2**20, 1),
    }


def _background(stack: ChatqStack, count: int) -> tuple[LoadRun | None, list[tuple[str, str]]]:
    """`count` long-polls parked on jobs no worker ends, to be held during the runs."""
    if count <= 0:
        return None, []
    store = chatq_store(stack.redis.url, TTL_S)
    runs = create_running(store, count)
    run, _ = park(stack.url, "chatq", [r[0] for r in runs], serving_pid(stack.web.pid))
    return run, runs


def measure_level(lab: Lab, stack: ChatqStack, waiters: int, runs: int) -> JSON:
    """`runs` runs of `min(waiters, E2E_MEASURED)` measured waiters, the rest held parked."""
    measured = min(waiters, E2E_MEASURED)
    held, held_runs = _background(stack, waiters - measured)
    window = lab.sizes.e2e_window_s
    results = []
    with lab.profiled(f"e2ewake-{waiters}", stack.python_pids()):
        for _ in range(runs):
            results.append(one_run(stack, measured, window))
    if held is not None:
        finish_burst(chatq_finisher(chatq_store(stack.redis.url, TTL_S)), held_runs)
        held.result(WAIT_S + 60)
    p99s = [r["wake"]["p99_ms"] for r in results if r["wake"]["p99_ms"] is not None]
    return {
        "waiters": waiters,
        "measured_per_run": measured,
        "window_s": list(window),
        "runs": results,
        "p99_ms_median": statistics.median(p99s) if p99s else None,
        "p99_ms_worst": max(p99s) if p99s else None,
        "errors": sum(r["errors"] for r in results),
    }


def run(lab: Lab) -> JSON:
    """Each (waiters, runs) level of the sizes, on one stack."""
    name, recipe = STACKS[0]
    stack = lab.chatq(name, **recipe)
    levels = [measure_level(lab, stack, n, runs) for n, runs in lab.sizes.e2e_levels]
    lab.drop(name)
    return {"levels": levels}
