"""Each job costs one upstream call, whatever happens around it; the calls are counted.

A duplicate call is money spent twice. These tests run stacks on Redis servers of their own
(a test whose clock or Redis misbehaves, one of its own; the others share one of the module's
two stacks) and count the requests of the module's fakellm while clocks disagree, Redis goes
away for longer than a lease, messages are delivered twice or wait in a long backlog, and many
identical requests arrive at once.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from chatq import keys
from chatq.broker import backlog as broker
from chatq.broker import celery_app
from chatq.config.settings import load
from scripts.localredis import LocalRedis
from tests.conftest import Stack, fresh_each_test, start_stack
from tests.procs import (
    Proc,
    start_fakellm,
    start_worker,
    wait_swept,
    wait_until,
    wait_worker_ready,
)

pytestmark = pytest.mark.long

StackFactory = Callable[..., tuple[Stack, str]]


@pytest.fixture(scope="module")
def counting_fakellm() -> Iterator[str]:
    """The module's fakellm (…/v1): no other module's calls reach it, and own_stack zeroes its
    count for each stack, whose processes are all gone before the next test's start."""
    proc, url = start_fakellm()
    yield url
    proc.stop()


@pytest.fixture
def own_stack(counting_fakellm: str) -> Iterator[StackFactory]:
    """Builds stacks on a Redis of their own, calling the module's fakellm with its count
    zeroed; stops them all afterwards."""
    started: list[Stack] = []
    servers: list[LocalRedis] = []

    def build(workers: int = 1, **env: str) -> tuple[Stack, str]:
        server = LocalRedis().start()
        servers.append(server)
        stack = start_stack(server.url, counting_fakellm, workers=workers, **env)
        started.append(stack)
        stack.env["REDIS_PID"] = str(server.process.pid if server.process else "")
        return stack, _reset(counting_fakellm)

    yield build
    for stack in started:
        stack.stop()
    for server in servers:
        server.stop()


def _reset(counting_fakellm: str) -> str:
    """The module's fakellm (base URL, no /v1) with its count of calls zeroed."""
    fakellm = counting_fakellm.removesuffix("/v1")
    requests.post(f"{fakellm}/stats/reset", timeout=5).raise_for_status()
    return fakellm


def _module_stack(counting_fakellm: str, workers: int, **env: str) -> Iterator[Stack]:
    server = LocalRedis().start()
    stack = start_stack(server.url, counting_fakellm, workers=workers, **env)
    yield stack
    stack.stop()
    server.stop()


@pytest.fixture(scope="module")
def plain(counting_fakellm: str) -> Iterator[Stack]:
    """One worker, at most two followers a leader: the tests that need no clock or
    Redis of their own share it, each waiting for its jobs to end."""
    yield from _module_stack(counting_fakellm, 1, CHATQ_MAX_FOLLOWERS="2")


@pytest.fixture
def shared(plain: Stack, counting_fakellm: str) -> tuple[Stack, str]:
    """The module's plain stack, the count of calls zeroed for the test."""
    return plain, _reset(counting_fakellm)


@pytest.fixture(scope="module")
def resending(counting_fakellm: str) -> Iterator[Stack]:
    """A web alone whose jobs' leases and resend period are a second: the tests start
    the workers, one slot each."""
    yield from _module_stack(
        counting_fakellm,
        0,
        CHATQ_LEASE="1",
        CHATQ_QUEUE_RESEND="1",
        CHATQ_WORKER_CONCURRENCY="1",
    )


@pytest.fixture
def web_alone(resending: Stack, counting_fakellm: str) -> Iterator[tuple[Stack, str]]:
    """The module's resending web, its database emptied and the count of calls zeroed for
    the test; the workers it starts are stopped at its end."""
    for stack in fresh_each_test(resending):
        yield stack, _reset(counting_fakellm)


def _calls(fakellm: str) -> int:
    return int(requests.get(f"{fakellm}/stats", timeout=5).json()["requests"])


def _submit(s: Stack, count: int, model: str, tag: str) -> list[str]:
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: s.submit(f"{tag} {i}", model=model), range(count)))
    assert {a.status_code for a in answers} == {202}
    return [a.json()["id"] for a in answers]


def _all_completed(s: Stack, ids: list[str], wait_s: float = 45) -> list[dict[str, Any]]:
    deadline = time.monotonic() + wait_s
    jobs = [s.get(j, wait=max(0.1, deadline - time.monotonic())).json() for j in ids]
    assert [j["status"] for j in jobs] == ["completed"] * len(ids), jobs
    return jobs


def test_a_worker_whose_clock_runs_30s_ahead_takes_over_no_healthy_job(
    own_stack: StackFactory,
) -> None:
    s, fakellm = own_stack(workers=1, CHATQ_LEASE="3")
    ahead = Proc("worker-ahead", ["worker"], {**s.env, "CHATQ_WORKER_METRICS_BIND": ""})
    ahead.args = ["faketime", "-f", "+30s", *ahead.args]
    s.procs.append(ahead.start())
    wait_worker_ready(ahead)
    # Jobs longer than a lease run on both workers while each sweeps the other's leases.
    ids = _submit(s, 20, "fake:ttft=0.2,tps=4,tokens=16", "clock")
    jobs = _all_completed(s, ids)
    assert _calls(fakellm) == 20
    assert all(j["attempts"] == 1 for j in jobs), [j["attempts"] for j in jobs]


def _text_is_the_answer(job: dict[str, Any], words: int) -> None:
    """The text written by the worker is the upstream's answer, no piece written twice."""
    answer = job["result"]["choices"][0]["message"]["content"]
    assert job["output_text"] == answer and len(answer.split()) == words, job


def test_redis_away_for_longer_than_a_lease_costs_no_second_call(
    own_stack: StackFactory,
) -> None:
    s, fakellm = own_stack(workers=2, CHATQ_LEASE="1.5")
    ids = _submit(s, 10, "fake:ttft=0.2,tps=5,tokens=30", "outage")
    wait_until(lambda: all(s.get(j).json()["output_text"] for j in ids), 20, "all streaming")
    redis_pid = int(s.env["REDIS_PID"])
    os.kill(redis_pid, signal.SIGSTOP)  # every worker loses Redis; the leases run out
    try:
        time.sleep(4)
    finally:
        os.kill(redis_pid, signal.SIGCONT)
    for job in _all_completed(s, ids):
        _text_is_the_answer(job, 30)
        assert job["attempts"] == 1
    assert _calls(fakellm) == 10


def test_redis_out_of_memory_mid_job_is_waited_out(shared: tuple[Stack, str]) -> None:
    s, fakellm = shared
    ids = _submit(s, 5, "fake:ttft=0.2,tps=5,tokens=20", "oom")
    wait_until(lambda: all(s.get(j).json()["output_text"] for j in ids), 20, "all streaming")
    s.redis.config_set("maxmemory", 1)  # noeviction: every write is refused with OOM
    try:
        time.sleep(2)
    finally:
        s.redis.config_set("maxmemory", 0)
    for job in _all_completed(s, ids):
        _text_is_the_answer(job, 20)
    assert _calls(fakellm) == 5


def test_a_message_delivered_twice_runs_its_job_once(shared: tuple[Stack, str]) -> None:
    s, fakellm = shared
    app = celery_app.make_celery(load(s.env))
    ids = _submit(s, 5, "fake:ttft=0.5,tps=10,tokens=10", "twice")
    for job_id in ids:  # again while queued or running...
        celery_app.enqueue(app, job_id, "interactive")
    _all_completed(s, ids)
    for job_id in ids:  # ...and once it has ended
        celery_app.enqueue(app, job_id, "interactive")
    wait_until(
        lambda: sum(s.redis.llen(k) for k in broker.queue_keys("interactive")) == 0,
        10,
        "the duplicates consumed",
    )
    assert _calls(fakellm) == 5
    assert all(j["attempts"] == 1 for j in _all_completed(s, ids))


def test_a_backlog_older_than_the_resend_period_is_not_sent_again(
    web_alone: tuple[Stack, str],
) -> None:
    s, fakellm = web_alone
    s.procs.append(start_worker(s.env, ""))
    # Holds the one slot until cancelled: it streams a token a second for ten minutes.
    [blocker] = _submit(s, 1, "fake:tps=1,tokens=600", "blocker")
    wait_until(lambda: s.get(blocker).json()["output_text"], 10, "the blocker streaming")
    backlog = _submit(s, 10, "fake", "backlog")
    wait_swept(s.redis, backlog, 2)  # each found still in the broker, twice
    queue = s.session().get(f"{s.url}/v1/queue", timeout=10).json()
    assert queue["queues"]["interactive"]["depth"] == 10, queue
    cancelled = s.session().post(f"{s.url}/v1/jobs/{blocker}/cancel", timeout=10)
    assert cancelled.status_code == 200, cancelled.text
    _all_completed(s, backlog)
    assert _calls(fakellm) == 11


def test_a_message_the_broker_lost_is_sent_again(web_alone: tuple[Stack, str]) -> None:
    s, fakellm = web_alone
    ids = _submit(s, 3, "fake", "lost")
    for key in broker.queue_keys("interactive"):
        s.redis.delete(key)  # the broker lost them; the jobs are still queued
    s.procs.append(start_worker(s.env, ""))
    _all_completed(s, ids)
    assert _calls(fakellm) == 3


def test_identical_requests_share_one_call_up_to_the_followers_cap(
    shared: tuple[Stack, str],
) -> None:
    s, fakellm = shared
    body = {
        "model": "fake:ttft=2",
        "temperature": 0,
        "messages": [{"role": "user", "content": "the same question"}],
    }
    session = s.session()
    with ThreadPoolExecutor(5) as pool:
        posted = list(
            pool.map(lambda _: session.post(f"{s.url}/v1/jobs", json=body, timeout=30), range(5))
        )
    jobs = _all_completed(s, [p.json()["id"] for p in posted])
    # One leader with two followers; the two beyond the cap each run on their own.
    assert _calls(fakellm) == 3
    assert {j["output_text"] for j in jobs} == {"the same question"}
    assert s.redis.scard(keys.followers(jobs[0]["id"])) == 0
