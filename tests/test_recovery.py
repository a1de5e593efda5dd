"""What happens when parts fail: a queued cancel, a killed worker, Redis going away."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
import redis
import requests

from chatq import keys
from chatq.admission import fairness
from chatq.config import settings as config
from scripts.localredis import LocalRedis
from tests.conftest import Stack, fresh_each_test, start_stack
from tests.procs import (
    base_env,
    leases_count,
    longpoll_waiters,
    outbox_length,
    start_web,
    start_worker,
    wait_until,
    wait_worker_ready,
)

pytestmark = pytest.mark.long


def _db(redis_url: str, db: int) -> str:
    return redis_url.rsplit("/", 1)[0] + f"/{db}"


@pytest.fixture(scope="module")
def web_alone(redis_url: str, fakellm: str) -> Iterator[Stack]:
    """A web process with no worker behind it, on a Redis database of its own; its jobs'
    leases and resend period (and those of the workers the tests start) are a second."""
    s = start_stack(_db(redis_url, 3), fakellm, workers=0, CHATQ_LEASE="1", CHATQ_QUEUE_RESEND="1")
    yield s
    s.stop()


@pytest.fixture
def web_only(web_alone: Stack) -> Iterator[Stack]:
    """The module's web alone, its database emptied for the test; the workers the test starts
    are stopped at its end."""
    yield from fresh_each_test(web_alone)


def test_cancel_of_a_queued_job_is_final(web_only: Stack) -> None:
    job_id = web_only.submit("never runs").json()["id"]
    assert web_only.get(job_id).json()["status"] == "queued"
    r = web_only.session().post(f"{web_only.url}/v1/jobs/{job_id}/cancel", timeout=10)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    # A worker that turns up later finds the job cancelled and leaves it so.
    worker = start_worker(web_only.env, "")
    web_only.procs.append(worker)
    said = f"job {job_id} not run: it is cancelled"
    wait_until(lambda: said in worker.log_text(), 10, "the worker to take and drop the job")
    job = web_only.get(job_id).json()
    assert job["status"] == "cancelled" and job["attempts"] == 0 and job["output_text"] == ""


def test_waiters_on_a_queued_job_are_woken_by_its_cancel(web_only: Stack) -> None:
    from concurrent.futures import ThreadPoolExecutor

    job_id = web_only.submit("x").json()["id"]
    url = f"{web_only.url}/v1/jobs/{job_id}"
    session = web_only.session()
    with ThreadPoolExecutor(4) as pool:
        # Waits of 50 s that the client gives up after 20: only the cancel can end them.
        waits = [pool.submit(session.get, url, params={"wait": 50}, timeout=20) for _ in range(4)]
        wait_until(lambda: longpoll_waiters(web_only.url) >= 4, 10, "four parked waits")
        web_only.session().post(f"{url}/cancel", timeout=10)
        answers = [w.result() for w in waits]
    assert [(a.status_code, a.json()["status"]) for a in answers] == [(200, "cancelled")] * 4


def test_jobs_of_a_killed_worker_finish_on_another(redis_url: str, fakellm: str) -> None:
    s = start_stack(_db(redis_url, 4), fakellm, workers=1, CHATQ_LEASE="2")
    try:
        s.redis.flushdb()
        model = "fake:ttft=0.3,tps=10,tokens=30"
        ids = [s.submit(f"job {i}", model=model).json()["id"] for i in range(30)]
        wait_until(lambda: all(s.get(i).json()["output_text"] for i in ids), 20, "all streaming")
        # Nothing records the running jobs' messages in Redis: the leases alone recover them.
        assert not s.redis.exists("unacked", "unacked_index")
        s.procs[0].kill()
        s.procs.append(start_worker(s.env, ""))
        for job_id in ids:
            job = s.get(job_id, wait=30).json()
            assert job["status"] == "completed", job
            assert len(job["output_text"].split()) == 30
        events = s.redis.xrange(keys.events(ids[0]))
        assert any(fields["t"] == "reset" for _, fields in events)
        assert leases_count(s.redis) == 0
    finally:
        s.stop()


# A worker's consumer as kombu runs it for chatq (no ack emulation: nothing in Redis records
# what it reserved): it takes one message, then the process is SIGKILLed before it claims
# the job.
RESERVE_ONE = """
import sys, time, kombu
options = {"ack_emulation": False}
with kombu.Connection(sys.argv[1], transport_options=options) as connection:
    message = connection.default_channel.basic_get(sys.argv[2], no_ack=False)
    print("reserved" if message else "none", flush=True)
    time.sleep(60)
"""


def test_a_job_reserved_by_a_worker_killed_before_its_claim_runs_once_on_another(
    web_only: Stack,
) -> None:
    s = web_only
    job_id = s.submit("reserved, then orphaned").json()["id"]
    queue = fairness.plan(config.load(s.env)).queue_for("interactive", "alice")
    args = [sys.executable, "-c", RESERVE_ONE, s.env["CHATQ_REDIS_URL"], queue]
    reserver = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert reserver.stdout is not None and reserver.stdout.readline() == "reserved\n"
    finally:
        reserver.kill()
        reserver.wait(10)
    assert s.redis.llen(queue) == 0 and not s.redis.exists("unacked")  # the message is gone
    s.procs.append(start_worker(s.env, ""))
    job = s.get(job_id, wait=20).json()
    assert job["status"] == "completed" and job["attempts"] == 1, job


def test_redis_outage_answers_503_then_recovers_without_restart(fakellm: str) -> None:
    server = LocalRedis().start()
    # A token budget: each job's end goes through the outbox, whose group the restart loses.
    env = base_env(server.url, fakellm, CHATQ_KEY_TOKENS_PER_DAY="1000000")
    worker = start_worker(env, server.url)
    web, url = start_web(env)
    s = Stack(url=url, redis=None, env=env, procs=[worker, web])  # type: ignore[arg-type]
    try:
        assert s.submit("before", wait=10).json()["status"] == "completed"
        server.stop(kill=True)
        r = s.submit("during")
        assert r.status_code == 503 and r.json()["error"]["code"] == "backend_unavailable"
        assert int(r.headers["Retry-After"]) >= 1
        assert s.get("job_" + "b" * 32).status_code == 503
        assert requests.get(f"{url}/readyz", timeout=10).status_code == 503
        assert requests.get(f"{url}/healthz", timeout=10).status_code == 200
        server = LocalRedis(port=server.port).start()
        r = wait_until(lambda: s.submit("after", wait=5).status_code == 200 or None, 40, "recovery")
        assert worker.alive() and web.alive()
        assert s.submit("after", wait=10).json()["status"] == "completed"
        assert requests.get(f"{url}/readyz", timeout=10).status_code == 200
        client = redis.Redis.from_url(server.url, decode_responses=True)
        wait_until(lambda: outbox_length(client) == 0 or None, 20, "the relay reading again")
        client.close()
    finally:
        s.stop()
        server.stop()


def test_the_celery_command_line_runs_the_same_worker(web_only: Stack) -> None:
    from tests.procs import Proc

    args = [
        "celery",
        "-A",
        "worker",
        "worker",
        "--pool=gevent",
        "--concurrency=5",
        "--without-mingle",
        "--without-gossip",
    ]
    proc = Proc("celery-worker", args, {**web_only.env, "CHATQ_WORKER_METRICS_BIND": ""}).start()
    web_only.procs.append(proc)
    wait_worker_ready(proc)
    job = web_only.submit("via celery -A worker", wait=10).json()
    assert job["status"] == "completed" and job["output_text"] == "via celery -A worker"
