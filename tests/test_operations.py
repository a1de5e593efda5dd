"""Operating chatq: metrics, /v1/queue, admission control, priorities, graceful shutdown."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis
import requests

from tests.conftest import Stack, start_stack
from tests.procs import longpoll_waiters, start_web, start_worker, wait_until
from web.admission.control import DEPTH_MAX_AGE_S

pytestmark = pytest.mark.long


def _db(redis_url: str, db: int) -> str:
    return redis_url.rsplit("/", 1)[0] + f"/{db}"


@pytest.fixture
def idle(redis_url: str, fakellm: str) -> Iterator[Stack]:
    """A web process with no worker, on a database of its own, for this test alone: a
    database emptied under a running web loses the broker's bindings it declared once."""
    s = start_stack(_db(redis_url, 8), fakellm, workers=0, CHATQ_MAX_QUEUE_DEPTH="30")
    s.redis.flushdb()
    yield s
    s.stop()


def _promtool(text: str) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: make test installs Debian's `prometheus` package"
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


def _sample(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        named = line.startswith((name + "{", name + " "))
        if named and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_of_web_and_worker_pass_promtool_and_move(stack: Stack) -> None:
    web_before = requests.get(f"{stack.url}/metrics", timeout=10).text
    bind = stack.procs[0].env["CHATQ_WORKER_METRICS_BIND"]
    worker_before = requests.get(f"http://{bind}/metrics", timeout=10).text
    for i in range(3):
        stack.submit(f"metric {i}", wait=10)
    stack.submit("fails", model="fake:status=400", wait=10)
    stack.get("job_" + "z" * 32)
    web = requests.get(f"{stack.url}/metrics", timeout=10).text
    worker = requests.get(f"http://{bind}/metrics", timeout=10).text
    _promtool(web)
    _promtool(worker)
    assert 'endpoint="/v1/jobs/<job_id>"' in web and "job_zzz" not in web
    # prometheus-flask-exporter's series under chatq's names: scrapes not counted, no info gauge.
    assert 'endpoint="/metrics"' not in web and "chatq_exporter_info" not in web
    unknown = {"method": "GET", "status": "404"}
    total = "chatq_http_request_total"
    assert _sample(web, total, **unknown) - _sample(web_before, total, **unknown) >= 1
    done = "chatq_jobs_finished_total"
    assert (
        _sample(worker, done, status="completed") - _sample(worker_before, done, status="completed")
        == 3
    )
    assert (
        _sample(worker, done, status="failed") - _sample(worker_before, done, status="failed") == 1
    )
    submitted = "chatq_jobs_submitted_total"
    assert (
        _sample(web, submitted, priority="interactive")
        - _sample(web_before, submitted, priority="interactive")
        == 4
    )
    for name in (
        "chatq_queue_depth",
        "chatq_longpoll_waiters",
        "chatq_http_request_duration_seconds_bucket",
        "chatq_http_requests_in_progress",
    ):
        assert name in web, name
    for name in (
        "chatq_upstream_request_duration_seconds_bucket",
        "chatq_job_time_to_first_token_seconds_bucket",
        "chatq_tokens_total",
        "chatq_job_queue_wait_seconds_bucket",
        "chatq_job_duration_seconds_bucket",
    ):
        assert name in worker, name
    # A worker exports none of the web's series (they would always read 0 there).
    for name in (
        "chatq_longpoll_waiters",
        "chatq_http_requests_in_progress",
        submitted,
        "chatq_cache_lookups_total",
        "chatq_admission_rejections_total",
    ):
        assert name not in worker, name


def test_queue_depth_counts_what_no_worker_took(idle: Stack) -> None:
    for i in range(7):
        idle.submit(f"i{i}")
    for i in range(4):
        idle.submit(f"b{i}", priority="batch")
    time.sleep(0.3)
    q = idle.session().get(f"{idle.url}/v1/queue", timeout=10).json()
    assert q["queues"]["interactive"]["depth"] == 7 and q["queues"]["batch"]["depth"] == 4
    assert q["queues"]["interactive"]["oldest_age_s"] >= 0.3
    assert q["workers"]["count"] == 0 and q["in_progress"] == 0
    # The web adds its counts to Redis once a second; the rate spans 60 to 120 s.
    wait_until(lambda: _queue(idle)["arrival_rate_per_s"] >= 11 / 120, 5, "the arrivals counted")
    metrics = requests.get(f"{idle.url}/metrics", timeout=10).text
    assert _sample(metrics, "chatq_queue_depth", queue="batch") == 4
    assert requests.get(f"{idle.url}/v1/queue", timeout=10).status_code == 401


def test_a_follower_of_a_queued_job_hears_at_once_that_it_started(idle: Stack) -> None:
    """A claim announces a start only to jobs whose events a request follows (the web marks
    them as it parks): the follower wakes at the start, not 5 s later at the first text."""
    job_id = idle.submit("slow to start", model="fake:ttft=5").json()["id"]
    first = idle.get(job_id, suffix="/events").json()
    assert first["events"] == [{"type": "status", "status": "queued"}]
    with ThreadPoolExecutor(1) as pool:
        page = pool.submit(idle.get, job_id, suffix="/events", cursor=first["cursor"], wait=30)
        wait_until(lambda: longpoll_waiters(idle.url) >= 1, 10, "the events request parked")
        worker = start_worker(idle.env, idle.env["CHATQ_REDIS_URL"])
        try:
            started = time.monotonic()
            events = page.result(timeout=30).json()["events"]
            assert events == [{"type": "status", "status": "in_progress"}]
            assert time.monotonic() - started < 3
        finally:
            worker.kill()  # a stop would wait the 5 s of its job's first byte


def _queue(stack: Stack) -> dict[str, Any]:
    body: dict[str, Any] = stack.session().get(f"{stack.url}/v1/queue", timeout=10).json()
    return body


def test_the_rates_count_what_the_workers_ran(redis_url: str, fakellm: str) -> None:
    # Emptied before the worker starts: the jobs the `idle` web's tests left (its database too)
    # would be run by it, each counted as a run of a few milliseconds.
    redis.Redis.from_url(_db(redis_url, 8)).flushdb()
    stack = start_stack(_db(redis_url, 8), fakellm)
    try:
        for i in range(4):
            stack.submit(f"timed {i}", model="fake:ttft=0.4", wait=10)
        # Four runs of about 0.4 s: the web and the worker send their counts once a second.
        q = wait_until(
            lambda: (
                (q := _queue(stack))["arrival_rate_per_s"] >= 4 / 120
                and q["mean_job_seconds"] > 0
                and q
            ),
            5,
            "the arrivals and runs counted",
        )
        assert 0.35 <= q["mean_job_seconds"] < 2 and q["recommended_concurrency"] >= 1, q
    finally:
        stack.stop()


def test_a_full_queue_answers_503_with_retry_after(idle: Stack) -> None:
    statuses = [idle.submit(f"fill {i}").status_code for i in range(30)]
    assert statuses == [202] * 30
    time.sleep(2 * DEPTH_MAX_AGE_S)  # the web reads the depth anew at most this often
    r = idle.submit("one too many")
    assert r.status_code == 503 and r.json()["error"]["code"] == "queue_full"
    assert 1 <= int(r.headers["Retry-After"]) <= 60


def test_the_rate_limit_holds_across_two_web_processes(redis_url: str, fakellm: str) -> None:
    s = start_stack(
        _db(redis_url, 9),
        fakellm,
        workers=0,
        CHATQ_RATE_LIMIT="6/minute",
        CHATQ_RATE_LIMIT_OVERRIDES="bob=100/minute",
    )
    try:
        s.redis.flushdb()
        second, url2 = start_web(s.env)
        s.procs.append(second)
        job = s.submit("x").json()["id"]
        urls = [s.url, url2] * 4
        codes = [s.session().get(f"{u}/v1/jobs/{job}", timeout=10) for u in urls[:7]]
        assert [c.status_code for c in codes[:5]] == [202] * 5
        limited = codes[5]
        assert limited.status_code == 429
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"
        assert int(limited.headers["Retry-After"]) >= 1
        from tests.procs import BOB_KEY

        assert s.submit("bob is not limited", key=BOB_KEY).status_code == 202
    finally:
        s.stop()


def test_interactive_jobs_run_before_batch_ones(idle: Stack) -> None:
    batch = [idle.submit(f"b{i}", priority="batch").json()["id"] for i in range(12)]
    interactive = [idle.submit(f"i{i}").json()["id"] for i in range(12)]
    # One slot, so that order is observable; the threads pool, so that this pool runs in
    # the suite too (the others use the default gevent pool).
    one_slot = {**idle.env, "CHATQ_WORKER_CONCURRENCY": "1", "CHATQ_WORKER_POOL": "threads"}
    worker = start_worker(one_slot, "")
    idle.procs.append(worker)
    done = {j: idle.get(j, wait=30).json() for j in batch + interactive}
    assert all(job["status"] == "completed" for job in done.values())
    last_interactive = max(done[j]["started_at"] for j in interactive)
    first_batch = min(done[j]["started_at"] for j in batch)
    assert last_interactive < first_batch


def test_sigterm_on_a_worker_finishes_its_running_jobs(redis_url: str, fakellm: str) -> None:
    s = start_stack(_db(redis_url, 10), fakellm, workers=1)
    try:
        s.redis.flushdb()
        ids = [s.submit(f"x{i}", model="fake:tps=10,tokens=20").json()["id"] for i in range(5)]
        wait_until(lambda: all(s.get(i).json()["output_text"] for i in ids), 10, "streaming")
        worker = s.procs[0]
        worker.signal(signal.SIGTERM)
        assert worker.process is not None
        worker.process.wait(20)
        for job_id in ids:
            job = s.get(job_id).json()
            assert job["status"] == "completed" and len(job["output_text"].split()) == 20
            events = s.get(job_id, suffix="/events").json()["events"]
            assert {"type": "reset"} not in events
    finally:
        s.stop()


def test_sigterm_on_web_answers_parked_long_polls_then_exits(stack: Stack) -> None:
    web, url = start_web(stack.env)
    job_id = stack.submit("x", model="fake:ttft=20").json()["id"]
    session = stack.session()
    with ThreadPoolExecutor(3) as pool:
        polls = [
            pool.submit(session.get, f"{url}/v1/jobs/{job_id}", params={"wait": 50}, timeout=60)
            for _ in range(3)
        ]
        wait_until(lambda: longpoll_waiters(url) >= 3, 10, "three parked long polls")
        t0 = time.monotonic()
        web.signal(signal.SIGTERM)
        answers = [p.result() for p in polls]
    assert time.monotonic() - t0 < 5
    session.close()  # idle keep-alive connections would hold the exit until graceful_timeout
    assert [a.status_code for a in answers] == [202] * 3
    assert web.process is not None and web.process.wait(15) == 0
    stack.session().post(f"{stack.url}/v1/jobs/{job_id}/cancel", timeout=10)
