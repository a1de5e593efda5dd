"""chatq on a Redis behind Sentinel: processes that know only the Sentinels, writes that wait
for replicas (CHATQ_REDIS_MIN_REPLICAS), and a primary SIGKILLed under load (slow).

A primary, two replicas and three Sentinels on loopback ports (scripts/localsentinel.py).
CHATQ_REDIS_URL names a closed port: its host is never used, only its database.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import redis
import requests

from chatq import keys
from chatq.config import settings as config
from chatq.topology import connections as redis_conn
from scripts.localredis import LocalRedis
from scripts.localsentinel import LocalSentinel
from tests.conftest import Stack
from tests.procs import BOB_KEY, base_env, start_fakellm, start_web, start_worker

UNUSED_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
# Each module here starts six Redis processes and a chatq: too long for `make test`.
pytestmark = pytest.mark.slow


@dataclass
class OnSentinel:
    """A chatq on a LocalSentinel, with a second web that waits for both replicas."""

    redis: LocalSentinel
    stack: Stack
    durable_url: str


def _stack(servers: LocalSentinel, fakellm: str, **env: str) -> Stack:
    full_env = base_env(UNUSED_URL, fakellm, **servers.env, **env)
    worker = start_worker(full_env, UNUSED_URL)
    web, url = start_web(full_env)
    client = redis_conn.connect_sentinel(config.load(full_env), max_connections=8)
    return Stack(url=url, redis=client, env=full_env, procs=[worker, web])


@pytest.fixture(scope="module")
def on_sentinel() -> Iterator[OnSentinel]:
    servers = LocalSentinel().start()
    fake, fake_url = start_fakellm()
    stack = _stack(servers, fake_url, CHATQ_LEASE="2", CHATQ_RATE_LIMIT_OVERRIDES="bob=3/minute")
    durable_env = {
        **stack.env,
        "CHATQ_REDIS_MIN_REPLICAS": "2",
        "CHATQ_REDIS_WAIT_TIMEOUT_MS": "300",
    }
    durable, durable_url = start_web(durable_env)
    stack.procs.append(durable)
    yield OnSentinel(servers, stack, durable_url)
    stack.stop()
    fake.stop()
    servers.stop()


def _submit(stack: Stack, url: str, content: str, **params: str) -> requests.Response:
    body = {"model": "fake", "messages": [{"role": "user", "content": content}]}
    headers = {}
    if "idempotency_key" in params:
        headers["Idempotency-Key"] = params.pop("idempotency_key")
    session = stack.session()
    return session.post(f"{url}/v1/jobs", json=body, params=params, headers=headers, timeout=30)


def test_a_job_runs_on_a_stack_that_knows_only_the_sentinels(on_sentinel: OnSentinel) -> None:
    stack = on_sentinel.stack
    job = stack.submit("through the sentinels", wait=20).json()
    assert job["status"] == "completed" and job["output_text"] == "through the sentinels"
    ready = requests.get(f"{stack.url}/readyz", timeout=5).json()
    assert ready["redis_primary"] == f"127.0.0.1:{on_sentinel.redis.primary.port}"


def test_the_rate_limiter_counts_on_the_primary_the_sentinels_name(
    on_sentinel: OnSentinel,
) -> None:
    stack = on_sentinel.stack
    codes = [stack.submit(f"limited {i}", key=BOB_KEY).status_code for i in range(4)]
    assert codes == [202, 202, 202, 429]
    primary = redis.Redis(port=on_sentinel.redis.primary.port, decode_responses=True)
    assert any(primary.scan_iter("chatq:ratelimit*"))


def test_min_replicas_writes_reach_both_replicas_before_the_answer(
    on_sentinel: OnSentinel,
) -> None:
    stack = on_sentinel.stack
    answer = _submit(stack, on_sentinel.durable_url, "kept twice")
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["id"]
    for replica in on_sentinel.redis.replicas:  # read at once: WAIT said both have it
        client = redis.Redis(port=replica.port, decode_responses=True)
        assert client.hget(keys.job(job_id), "status") is not None
    assert stack.get(job_id, wait=20).json()["status"] == "completed"


@contextmanager
def _paused(servers: list[LocalRedis]) -> Iterator[None]:
    """The servers stopped (SIGSTOP): connected, but acknowledging nothing."""
    for server in servers:
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for server in servers:
            assert server.process is not None
            os.kill(server.process.pid, signal.SIGCONT)


def test_min_replicas_without_the_replicas_answers_503_and_the_retry_finds_the_job(
    on_sentinel: OnSentinel,
) -> None:
    stack, key = on_sentinel.stack, f"idem-{uuid.uuid4().hex}"
    with _paused(on_sentinel.redis.replicas):
        refused = _submit(stack, on_sentinel.durable_url, "unreplicated", idempotency_key=key)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "backend_unavailable"
    assert int(refused.headers["Retry-After"]) >= 1
    # The job was written on the primary all the same: the retry with its key finds it, and
    # it runs once its lease ends and the sweeper sends the message it never had.
    retried = _submit(
        stack, on_sentinel.durable_url, "unreplicated", idempotency_key=key, wait="20"
    )
    assert retried.status_code == 200, retried.text
    assert retried.json()["status"] == "completed"


def test_a_primary_failover_is_followed_without_a_restart() -> None:
    """The primary SIGKILLed while jobs arrive and a long-poll is parked: a replica is
    promoted, submits answer 503 meanwhile, then 202 again; every job accepted (each waiting
    for one replica) ends completed; no chatq process was restarted."""
    servers = LocalSentinel().start()
    fake, fake_url = start_fakellm()
    # A loaded machine may bring a second failover on the heels of the first (see Watch in
    # scripts/localsentinel.py): the primary thrown away then held messages of accepted jobs,
    # which the sweeper sends again after CHATQ_QUEUE_RESEND (300 s by default).
    stack = _stack(
        servers, fake_url, CHATQ_REDIS_MIN_REPLICAS="1", CHATQ_LEASE="2", CHATQ_QUEUE_RESEND="2"
    )
    try:
        parked_id = stack.submit("parked", model="fake:ttft=6").json()["id"]
        with ThreadPoolExecutor(1) as pool:
            parked = pool.submit(stack.get, parked_id, wait=30)
            accepted, refused, took_s = _load_through_a_failover(stack, servers)
            parked_answer = parked.result()
        ends = [stack.get(job_id, wait=40).json().get("status") for job_id in accepted]
        print(
            f"sentinel failover: promoted after {took_s:.1f} s; {len(accepted)} accepted, "
            f"{refused} refused with 503"
        )
        assert ends == ["completed"] * len(accepted)
        assert parked_answer.status_code in (200, 503), parked_answer.text
        assert stack.get(parked_id, wait=30).json()["status"] == "completed"
        assert all(proc.alive() for proc in stack.procs)
        ready = requests.get(f"{stack.url}/readyz", timeout=5).json()
        assert ready["redis_primary"] == f"127.0.0.1:{servers.primary_port()}"
    finally:
        stack.stop()
        fake.stop()
        servers.stop()


def _load_through_a_failover(stack: Stack, servers: LocalSentinel) -> tuple[list[str], int, float]:
    """10 submits a second for 10 s, the primary SIGKILLed after 2 s: (accepted ids, 503s,
    seconds until a replica was promoted)."""
    accepted: list[str] = []
    refused = 0
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        failover = None
        for i in range(100):
            time.sleep(max(0.0, started + i / 10 - time.monotonic()))
            if failover is None and time.monotonic() - started > 2:
                failover = pool.submit(servers.kill_primary)
            answer = stack.submit(f"failover {i}", model="fake:ttft=0.2")
            if answer.status_code == 202:
                accepted.append(answer.json()["id"])
            else:
                assert answer.status_code == 503, answer.text
                assert answer.json()["error"]["code"] == "backend_unavailable"
                refused += 1
            last = i
        assert failover is not None
        _, took_s = failover.result()
    assert refused < len(accepted) and answer.status_code == 202, (refused, last)
    return accepted, refused, took_s
