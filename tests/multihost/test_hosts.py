"""chatq across hosts (network namespaces): two web hosts, two worker hosts, Redis, the
upstream and the client each on a host of its own. Scenarios 1, 2 and 4 of "Prove it across
hosts" (README "Proven across hosts")."""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from chatq import jobs
from tests.multihost.site import WEBS, Site, job_records, running_site
from tests.procs import wait_until

pytestmark = pytest.mark.slow

JOBS = 500
IN_FLIGHT = 100


def _submit_then_wait(site: Site, i: int) -> tuple[dict[str, Any], float, str]:
    """Submit job `i` on one web host and long-poll it on the other (for half of the `i`) or
    the same; answers (the job, seconds from its end to the answer, the web that woke)."""
    session = site.session()
    submit_on = WEBS[i % 2]
    poll_on = WEBS[(i + 1) % 2] if _across(i) else submit_on
    body = {"model": "fake:ttft=1", "messages": [{"role": "user", "content": f"job {i}"}]}
    posted = session.post(f"{site.webs[submit_on]}/v1/jobs", json=body, timeout=30)
    assert posted.status_code == 202, posted.text
    got = session.get(f"{site.webs[poll_on]}/v1/jobs/{posted.json()['id']}?wait=30", timeout=40)
    woke_at = time.time()
    job = got.json()
    assert got.status_code == 200, job
    return job, woke_at - float(job["completed_at"]), poll_on


def test_jobs_submitted_on_one_web_host_wake_long_polls_on_the_other() -> None:
    """500 jobs over both web hosts, 100 at once, each long-polled on the other web host (half)
    or on its own (half): all complete, and the wake latency is reported."""
    with running_site() as site:
        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            done = list(pool.map(lambda i: _submit_then_wait(site, i), range(JOBS)))
    statuses = Counter(job["status"] for job, _, _ in done)
    assert statuses == {"completed": JOBS}, statuses
    assert [job["output_text"] for job, _, _ in done] == [f"job {i}" for i in range(JOBS)]
    assert Counter(web for _, _, web in done) == {"web-1": JOBS // 2, "web-2": JOBS // 2}
    other = sorted(wake for i, (_, wake, _) in enumerate(done) if _across(i))
    same = sorted(wake for i, (_, wake, _) in enumerate(done) if not _across(i))
    print(
        f"\nacross hosts: {JOBS} jobs completed; wake (job end -> client has the answer) "
        f"on the other web host p50 {_ms(other, 50)} p99 {_ms(other, 99)}, "
        f"on the same p50 {_ms(same, 50)} p99 {_ms(same, 99)}"
    )


def _across(i: int) -> bool:
    """Whether job `i` is long-polled on the other web host: 0 and 1 of every 4."""
    return i % 4 < 2


def _ms(sorted_s: list[float], percentile: int) -> str:
    index = min(len(sorted_s) - 1, round(percentile / 100 * (len(sorted_s) - 1)))
    return f"{sorted_s[index] * 1000:.1f} ms"


def _busy_by_pid(site: Site) -> dict[int, int]:
    """Jobs each worker process runs, per its last heartbeat: {pid: busy}."""
    from chatq import keys

    beats = site.state.hgetall(keys.workers())
    return {int(name.rsplit(":", 1)[1]): int(v.split()[1]) for name, v in beats.items()}


def test_a_lost_worker_host_leaves_its_jobs_to_the_other() -> None:
    """Worker-1's processes SIGKILLed and its link cut with 100 jobs in flight on both worker
    hosts: every job ends on worker-2 within a lease + 30 s; the upstream is called once per
    job, and once more for each job worker-1 was running."""
    lease_s = 2.0
    # 60 slots a worker: the 100 jobs cannot all land on one host.
    env = {"CHATQ_LEASE": str(lease_s), "CHATQ_WORKER_CONCURRENCY": "60"}
    with running_site(**env) as site:
        model = "fake:ttft=0.2,tps=5,tokens=40"  # about 8 s a job
        with ThreadPoolExecutor(16) as pool:
            posted = list(
                pool.map(lambda i: _submit(site, WEBS[i % 2], f"lost {i}", model), range(IN_FLIGHT))
            )
        ids = [job["id"] for job in posted]
        wait_until(lambda: sum(_busy_by_pid(site).values()) == IN_FLIGHT, 30, "100 jobs running")
        worker_1 = site.procs["worker-1"][0].pid
        on_worker_1 = _busy_by_pid(site)[worker_1]
        calls_before = site.calls()
        site.lose("worker-1")
        lost_at = time.monotonic()
        records = wait_until(lambda: _all_terminal(site, ids), lease_s + 30, "all terminal")
        took_s = time.monotonic() - lost_at
        calls = site.calls()
    assert Counter(r["status"] for r in records) == {"completed": IN_FLIGHT}
    attempts = Counter(int(r["attempts"]) for r in records)
    assert calls_before == IN_FLIGHT and 0 < on_worker_1 < IN_FLIGHT
    assert attempts == {1: IN_FLIGHT - on_worker_1, 2: on_worker_1}, attempts
    assert calls == IN_FLIGHT + on_worker_1
    print(
        f"\nworker host lost: {on_worker_1} of {IN_FLIGHT} jobs were on it; all {IN_FLIGHT} "
        f"completed on worker-2 {took_s:.1f} s after the loss (lease {lease_s:g} s); "
        f"{calls} upstream calls, at most 2 a job"
    )


def _submit(site: Site, web: str, content: str, model: str, wait_s: float = 0) -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": content}]}
    answer = site.session().post(
        f"{site.webs[web]}/v1/jobs?wait={wait_s}", json=body, timeout=wait_s + 30
    )
    assert answer.status_code in (200, 202), answer.text
    job: dict[str, Any] = answer.json()
    return job


def _all_terminal(site: Site, ids: list[str]) -> list[dict[str, Any]] | None:
    records = job_records(site, ids)
    return records if all(jobs.is_terminal(r.get("status", "")) for r in records) else None
