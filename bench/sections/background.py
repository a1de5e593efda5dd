"""Issue 15: the added cost of a background response over a plain job.

One client, one job at a time, instant upstream, four flows of the same chat request:
a job submitted then long-polled (`POST /v1/jobs`, `GET /v1/jobs/{id}?wait=30`), a background
response likewise (`POST /v1/responses` with `background: true`, `GET
/v1/responses/{id}?wait=30`), and each held in one request (`POST /v1/jobs?wait=30`, `POST
/v1/responses`). For each: client-seen latency, round trips, the web's and the worker's CPU
per job, and the web's own time for the submitting request (its request histogram).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import requests

from bench.lab import Lab
from bench.procstat import CpuMeter, wait_idle
from bench.sections.common import JSON, scrape
from bench.stats import summary_ms
from tests.procs import ALICE_KEY

STACKS = [("main", {})]
FULL_JOBS, QUICK_JOBS = 300, 10
WAIT_S = 30
_TOTAL = re.compile(
    r"^chatq_http_request_duration_seconds_(sum|count)\{(?P<labels>[^}]*)\} (?P<v>\S+)$"
)
# flow -> (method, route template, status) of its submitting request, as the web labels it.
SUBMITS = {
    "job_submit_then_poll": ("POST", "/v1/jobs", "202"),
    "response_background_then_poll": ("POST", "/v1/responses", "200"),
}
Flow = Callable[[requests.Session, str, str], int]


def _job_then_poll(s: requests.Session, url: str, text: str) -> int:
    job = s.post(f"{url}/v1/jobs", json=_chat(text), timeout=60).json()
    done = s.get(f"{url}/v1/jobs/{job['id']}", params={"wait": WAIT_S}, timeout=60).json()
    assert done["status"] == "completed", done
    return 2


def _response_then_poll(s: requests.Session, url: str, text: str) -> int:
    created = s.post(f"{url}/v1/responses", json=_input(text, background=True), timeout=60)
    rid = created.json()["id"]
    done = s.get(f"{url}/v1/responses/{rid}", params={"wait": WAIT_S}, timeout=60).json()
    assert done["status"] == "completed", done
    return 2


def _job_held(s: requests.Session, url: str, text: str) -> int:
    done = s.post(f"{url}/v1/jobs", params={"wait": WAIT_S}, json=_chat(text), timeout=60)
    assert done.json()["status"] == "completed", done.text
    return 1


def _response_held(s: requests.Session, url: str, text: str) -> int:
    done = s.post(f"{url}/v1/responses", json=_input(text), timeout=60).json()
    assert done["status"] == "completed", done
    return 1


def _chat(text: str) -> JSON:
    return {"model": "fake", "messages": [{"role": "user", "content": text}]}


def _input(text: str, **options: bool) -> JSON:
    return {"model": "fake", "input": text, **options}


FLOWS: dict[str, Flow] = {
    "job_submit_then_poll": _job_then_poll,
    "response_background_then_poll": _response_then_poll,
    "job_held": _job_held,
    "response_held": _response_held,
}


def submit_totals(
    metrics_text: str, method: str, endpoint: str, status: str
) -> tuple[float, float]:
    """(seconds, requests) the web's histogram counted for one method, route and status."""
    totals = {"sum": 0.0, "count": 0.0}
    wanted = (f'method="{method}"', f'endpoint="{endpoint}"', f'status="{status}"')
    for line in metrics_text.splitlines():
        m = _TOTAL.match(line)
        if m and all(w in m.group("labels") for w in wanted):
            totals[m.group(1)] += float(m.group("v"))
    return totals["sum"], totals["count"]


def _run_flow(lab: Lab, name: str, jobs: int) -> JSON:
    stack = lab.chatq()
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {ALICE_KEY}"
    flow, tag = FLOWS[name], f"{name}-{time.monotonic_ns()}"
    flow(session, stack.url, f"{tag} warm-up")
    wait_idle(stack.web.pid)
    metrics_url = f"{stack.url}/metrics"
    before = scrape(metrics_url)
    meter = CpuMeter({"web": stack.web.pid, "worker": stack.workers[0].pid}).start()
    latencies, requests_made = [], 0
    for i in range(jobs):
        t0 = time.perf_counter()
        requests_made += flow(session, stack.url, f"{tag} {i}")  # distinct: no cache hits
        latencies.append(time.perf_counter() - t0)
    cpu = meter.stop()
    after = scrape(metrics_url)
    out: JSON = {
        "jobs": jobs,
        "requests_per_job": requests_made / jobs,
        "latency": summary_ms(latencies),
        "web_cpu_ms_per_job": round(1000 * cpu["web"]["cpu_s"] / jobs, 2),
        "worker_cpu_ms_per_job": round(1000 * cpu["worker"]["cpu_s"] / jobs, 2),
    }
    if name in SUBMITS:
        (s0, n0), (s1, n1) = (submit_totals(text, *SUBMITS[name]) for text in (before, after))
        out["submit_server_ms"] = round(1000 * (s1 - s0) / max(n1 - n0, 1), 2)
    return out


def _added(flows: JSON, response: str, job: str) -> JSON:
    a, b = flows[response], flows[job]
    added = {
        "latency_p50_ms": round(a["latency"]["p50_ms"] - b["latency"]["p50_ms"], 2),
        "latency_p99_ms": round(a["latency"]["p99_ms"] - b["latency"]["p99_ms"], 2),
        "web_cpu_ms_per_job": round(a["web_cpu_ms_per_job"] - b["web_cpu_ms_per_job"], 2),
        "requests_per_job": a["requests_per_job"] - b["requests_per_job"],
    }
    if "submit_server_ms" in a and "submit_server_ms" in b:
        added["submit_server_ms"] = round(a["submit_server_ms"] - b["submit_server_ms"], 2)
    return added


def run(lab: Lab) -> JSON:
    """Each flow in turn, then what a response adds over the job doing the same."""
    jobs = QUICK_JOBS if lab.sizes.quick else FULL_JOBS
    flows = {name: _run_flow(lab, name, jobs) for name in FLOWS}
    return {
        "flows": flows,
        "added_background": _added(flows, "response_background_then_poll", "job_submit_then_poll"),
        "added_held": _added(flows, "response_held", "job_held"),
    }
