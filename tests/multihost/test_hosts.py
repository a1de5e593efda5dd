"""chatq across hosts (network namespaces): two web hosts, two worker hosts, Redis, the
upstream and the client each on a host of its own. Scenarios 1, 2 and 4 of "Prove it across
hosts" (docs/scaling-out.md, "Proven across hosts")."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.multihost.client import (
    Probe,
    across,
    all_terminal,
    busy_by_pid,
    long_poll,
    probing,
    submit,
    submit_then_wait,
    submits_ok,
)
from tests.multihost.site import WEBS, running_site
from tests.procs import wait_until

# `long`: started first in `make test-slow`, where these files are one unit (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.long]

JOBS = 500
IN_FLIGHT = 100


def test_jobs_submitted_on_one_web_host_wake_long_polls_on_the_other() -> None:
    """500 jobs over both web hosts, 100 at once, each long-polled on the other web host (half)
    or on its own (half): all complete, and the wake latency is reported."""
    with running_site() as site, ThreadPoolExecutor(IN_FLIGHT) as pool:
        done = list(pool.map(lambda i: submit_then_wait(site, i), range(JOBS)))
    statuses = Counter(job["status"] for job, _, _ in done)
    assert statuses == {"completed": JOBS}, statuses
    assert [job["output_text"] for job, _, _ in done] == [f"job {i}" for i in range(JOBS)]
    assert Counter(web for _, _, web in done) == {"web-1": JOBS // 2, "web-2": JOBS // 2}
    other = sorted(wake for i, (_, wake, _) in enumerate(done) if across(i))
    same = sorted(wake for i, (_, wake, _) in enumerate(done) if not across(i))
    print(
        f"\nacross hosts: {JOBS} jobs completed; wake (job end -> client has the answer) "
        f"on the other web host p50 {_ms(other, 50)} p99 {_ms(other, 99)}, "
        f"on the same p50 {_ms(same, 50)} p99 {_ms(same, 99)}"
    )


def _ms(sorted_s: list[float], percentile: int) -> str:
    index = min(len(sorted_s) - 1, round(percentile / 100 * (len(sorted_s) - 1)))
    return f"{sorted_s[index] * 1000:.1f} ms"


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
                pool.map(lambda i: submit(site, WEBS[i % 2], f"lost {i}", model), range(IN_FLIGHT))
            )
        ids = [job["id"] for job in posted]
        wait_until(lambda: sum(busy_by_pid(site).values()) == IN_FLIGHT, 30, "100 jobs running")
        worker_1 = site.procs["worker-1"][0].pid
        on_worker_1 = busy_by_pid(site)[worker_1]
        calls_before = site.calls()
        site.lose("worker-1")
        lost_at = time.monotonic()
        records = wait_until(lambda: all_terminal(site, ids), lease_s + 30, "all terminal")
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


def test_a_web_host_cut_from_redis_answers_503_and_recovers_by_itself() -> None:
    """web-2's link to Redis down for 20 s: it answers 503 backend_unavailable with
    Retry-After, its parked long-polls end with an answer, and it serves again once the link
    is back, without a restart; web-1 serves throughout."""
    partition_s = 20.0
    with running_site() as site:
        slow = [submit(site, "web-1", f"slow {i}", "fake:ttft=25") for i in range(10)]
        with ThreadPoolExecutor(10) as pool:
            # Parked on web-2 2 s before the cut; their wait runs out 10 s into it.
            parked = [pool.submit(long_poll, site, "web-2", job["id"], 12) for job in slow]
            probes = (Probe(site, "web-1", 0.25, wait_s=10), Probe(site, "web-2", 0.25))
            with probing(*probes):
                time.sleep(2)
                site.net.cut("web-2")
                cut_at = time.monotonic()
                time.sleep(partition_s)
                site.net.mend("web-2")
                mended_at = time.monotonic()
                wait_until(lambda: submits_ok(site, "web-2"), 30, "web-2 serving again")
                recovered_s = time.monotonic() - mended_at
                # A request on a pooled connection whose packets were lost in the cut waits for
                # TCP's next retransmission, and may still time out (503) a while after the mend.
                time.sleep(12)
            during = [f.result() for f in parked]
        # After the partition: web-2 wakes a long-poll by notification, in well under its wait.
        job = submit(site, "web-1", "after", "fake:ttft=1")
        woke = long_poll(site, "web-2", job["id"], 20)
        ends = [long_poll(site, "web-2", j["id"], 40)[0] for j in slow]
    web_1, web_2 = probes
    assert set(web_1.statuses()) == {200}, web_1.statuses()
    assert set(web_2.statuses()) <= {202, 503}, web_2.statuses()
    # Requests already waiting on a Redis reply when the link went down take up to the socket
    # timeout (5 s) to fail; every one after that is refused at once.
    refused = [a for a in web_2.answers if cut_at + 6 <= a.sent_at < mended_at]
    assert refused and {a.status for a in refused} == {503}, web_2.statuses(cut_at, mended_at)
    assert {a.body["error"]["code"] for a in refused} == {"backend_unavailable"}
    assert all(a.retry_after for a in refused), "Retry-After"
    after = [a for a in web_2.answers if a.sent_at > mended_at]
    late = [a.sent_at - mended_at for a in after if a.status != 202]
    assert set(web_2.statuses(since=mended_at + 10)) == {202}, late
    assert {status for status, _ in during} <= {202, 503}, during
    # Waits that ran out while Redis was away: the re-read times out (5 s, and once again).
    assert max(took for _, took in during) < 12 + 12, during
    assert woke[0] == 200 and woke[1] < 10, woke
    assert ends == [200] * len(slow)
    print(
        f"\nweb-2 cut from Redis {partition_s:g} s: {len(refused)} submits answered 503 "
        f"backend_unavailable; its {len(during)} parked long-polls ended with "
        f"{dict(Counter(s for s, _ in during))}; serving again {recovered_s:.1f} s after the "
        f"link came back ({len(late)} more 503 within {max(late, default=0):.1f} s of it); "
        f"web-1 answered {len(web_1.answers)} submits, all 200"
    )
