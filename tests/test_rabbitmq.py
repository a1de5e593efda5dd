"""RabbitMQ as the broker (CHATQ_BROKER_URL=amqp://...): real web and worker processes on a
RabbitMQ node of the tests' own, each test in a vhost of its own, on a Redis and a fakellm of
its own whose calls are counted.

Jobs of both lanes complete, each with one upstream call; a backlog is counted exactly (the
admission cap, GET /v1/queue and the metrics) and `interactive` runs before `batch` queued
earlier; only a job whose message RabbitMQ never confirmed is sent again; webhook deliveries
and batch lines go through RabbitMQ too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from chatq import keys
from chatq.broker import rabbitmq
from chatq.jobs import record as jobs
from chatq.jobs.store import Store
from scripts.localredis import free_port
from tests.batchkit import request_line, run_batch, wait_ended
from tests.procs import wait_swept, wait_until
from tests.rabbitmq import RabbitNode, RabbitStack, StackFactory, rabbit_stacks
from tests.webhook_receiver import Receiver, verify

pytestmark = pytest.mark.long

# Holds a worker's slot until cancelled: it streams (a cancel cuts a stream at once, not a call
# still waiting for its first byte), a token a second for ten minutes.
BLOCKER = "fake:tps=1,tokens=600"


@pytest.fixture(scope="module")
def node() -> Iterator[RabbitNode]:
    """One RabbitMQ node for the module; every test has a vhost of its own on it."""
    started = RabbitNode().start()
    yield started
    started.stop()


@pytest.fixture
def stacks(node: RabbitNode) -> Iterator[StackFactory]:
    with rabbit_stacks(node) as build:
        yield build


def _submit(r: RabbitStack, tag: str, count: int, model: str = "fake", **params: Any) -> list[str]:
    answers = [r.stack.submit(f"{tag} {i}", model=model, **params) for i in range(count)]
    assert [a.status_code for a in answers] == [202] * count, [a.text for a in answers]
    return [a.json()["id"] for a in answers]


def _ended(r: RabbitStack, ids: list[str], wait_s: float = 60) -> list[dict[str, Any]]:
    deadline = time.monotonic() + wait_s
    return [r.stack.get(j, wait=max(0.1, deadline - time.monotonic())).json() for j in ids]


def _running(r: RabbitStack, job_id: str) -> None:
    wait_until(lambda: r.stack.get(job_id).json()["output_text"], 20, f"{job_id} streaming")


def _cancel(r: RabbitStack, job_id: str) -> None:
    answer = r.stack.session().post(f"{r.stack.url}/v1/jobs/{job_id}/cancel", timeout=10)
    assert answer.status_code == 200, answer.text


def _metrics(r: RabbitStack) -> str:
    return requests.get(f"{r.stack.url}/metrics", timeout=10).text


def test_jobs_of_both_lanes_complete_through_rabbitmq_with_one_call_each(
    stacks: StackFactory,
) -> None:
    r = stacks(workers=1)
    interactive = _submit(r, "streamed", 8, "fake:tps=50,tokens=6")
    batch = _submit(r, "batch", 8, priority="batch")
    held = r.stack.session().post(
        f"{r.stack.url}/v1/chat/completions",
        timeout=60,
        json={"model": "fake", "messages": [{"role": "user", "content": "front door"}]},
    )
    assert held.status_code == 200, held.text
    assert held.json()["choices"][0]["message"]["content"] == "front door"
    done = _ended(r, interactive + batch)
    assert [j["status"] for j in done] == ["completed"] * 16
    assert [len(j["output_text"].split()) for j in done[:8]] == [6] * 8
    assert [j["output_text"] for j in done[8:]] == [f"batch {i}" for i in range(8)]
    assert {j["priority"] for j in done[8:]} == {"batch"}
    assert r.calls() == 17
    # Every message acknowledged, none left behind or sent twice.
    wait_until(lambda: r.messages() == 0, 30, "the jobs queue empty")
    queue = r.node.queue(r.vhost, rabbitmq.JOBS_QUEUE)
    assert queue["durable"] is True
    assert queue["arguments"] == {"x-max-priority": rabbitmq.MAX_PRIORITY}
    figures = r.queue_figures()["queues"]
    assert figures == {
        "interactive": {"depth": 0, "oldest_age_s": None},
        "batch": {"depth": 0, "oldest_age_s": None},
    }
    text = _metrics(r)
    assert re.search(r'^chatq_queue_depth\{queue="batch"\} 0\.0$', text, re.M)
    assert "chatq_queue_oldest_age_seconds{" not in text  # RabbitMQ cannot tell: no sample
    assert r.password not in r.logs()  # nor in Celery's banner, with the broker's URL
    assert f"{r.user}:**@" in r.logs()


def test_a_backlog_is_counted_exactly_and_interactive_runs_before_earlier_batch(
    stacks: StackFactory,
) -> None:
    r = stacks(workers=1, CHATQ_WORKER_CONCURRENCY="1", CHATQ_MAX_QUEUE_DEPTH="10")
    [blocker] = _submit(r, "blocker", 1, BLOCKER)
    _running(r, blocker)  # the one slot is taken; everything below waits in the queue
    batch = _submit(r, "batch", 5, priority="batch")
    interactive = _submit(r, "interactive", 5)
    # Exact: the ten waiting, not the one the worker holds (reserved, unacknowledged).
    assert r.ready() == 10
    expected = {"interactive": 5, "batch": 5}
    wait_until(
        lambda: {q: v["depth"] for q, v in r.queue_figures()["queues"].items()} == expected,
        30,
        "GET /v1/queue showing the backlog",
    )
    text = _metrics(r)
    for lane, depth in expected.items():
        assert re.search(rf'^chatq_queue_depth\{{queue="{lane}"\}} {depth}\.0$', text, re.M)
    # The admission cap reads the live count: the eleventh waiting job is refused.
    refused = r.stack.submit("one too many")
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "queue_full"
    assert int(refused.headers["Retry-After"]) >= 1
    _cancel(r, blocker)
    done = _ended(r, batch + interactive)
    assert [j["status"] for j in done] == ["completed"] * 10
    started = sorted(done, key=lambda j: j["started_at"])
    assert [j["priority"] for j in started] == ["interactive"] * 5 + ["batch"] * 5
    assert r.calls() == 11


def test_only_a_job_whose_message_was_never_confirmed_is_sent_again(
    stacks: StackFactory,
) -> None:
    r = stacks(workers=1, CHATQ_WORKER_CONCURRENCY="1", CHATQ_LEASE="1", CHATQ_QUEUE_RESEND="1")
    [blocker] = _submit(r, "blocker", 1, BLOCKER)
    _running(r, blocker)
    backlog = _submit(r, "backlog", 5)
    assert all(r.stack.redis.hget(keys.job(j), rabbitmq.SENT_FIELD) == "0" for j in backlog)
    # Two jobs whose web died between writing them and sending their message.
    store = Store(r.stack.redis, 3600)
    unsent = [jobs.new_job_id() for _ in range(2)]
    for i, job_id in enumerate(unsent):
        request = {"model": "fake", "messages": [{"role": "user", "content": f"unsent {i}"}]}
        store.create(
            record=jobs.new_record(job_id, "alice", "fake", "interactive", request, time.time()),
            lease_s=1,
        )
    wait_until(lambda: r.ready() == 7, 20, "the two unsent jobs sent by the sweeper")
    wait_swept(r.stack.redis, backlog, looks=2)  # the sweeper looks at the backlog again
    assert r.ready() == 7  # and sends none of it twice: its messages were confirmed
    _cancel(r, blocker)
    done = _ended(r, backlog + unsent)
    assert [j["status"] for j in done] == ["completed"] * 7
    assert [j["output_text"] for j in done[5:]] == ["unsent 0", "unsent 1"]
    assert r.calls() == 8
    wait_until(lambda: r.messages() == 0, 30, "the jobs queue empty")


def test_without_rabbitmq_s_management_api_the_queue_figures_are_503_and_jobs_still_run(
    stacks: StackFactory,
) -> None:
    r = stacks(workers=1, CHATQ_BROKER_API_URL=f"http://127.0.0.1:{free_port()}")
    answer = r.stack.session().get(f"{r.stack.url}/v1/queue", timeout=10)
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "backend_unavailable"
    assert int(answer.headers["Retry-After"]) >= 1
    metrics = requests.get(f"{r.stack.url}/metrics", timeout=10)
    assert metrics.status_code == 200 and "chatq_queue_depth{" not in metrics.text
    # Admission counts over AMQP, not through the API: submitting is unaffected.
    done = _ended(r, _submit(r, "no api", 3))
    assert [j["status"] for j in done] == ["completed"] * 3


def test_webhook_deliveries_run_beside_rabbitmq_without_a_queue_of_their_own(
    stacks: StackFactory,
) -> None:
    receiver = Receiver()
    try:
        r = stacks(workers=1, CHATQ_WEBHOOK_ALLOW_PRIVATE="1")
        created = r.stack.session().post(
            f"{r.stack.url}/v1/webhooks", timeout=10, json={"url": receiver.url("/rabbit")}
        )
        assert created.status_code == 200, created.text
        endpoint = created.json()
        answer = r.stack.session().post(
            f"{r.stack.url}/v1/jobs?wait=30",
            timeout=40,
            headers={"Chatq-Webhook": endpoint["id"]},
            json={"model": "fake", "messages": [{"role": "user", "content": "hook"}]},
        )
        assert answer.status_code == 200, answer.text
        [got] = receiver.wait_for("/rabbit", 1)
        event = verify(got, endpoint["signing_secret"])
        assert (event.type, event.data.id) == ("job.completed", answer.json()["id"])
        with pytest.raises(requests.HTTPError, match="404"):  # no queue of their own
            r.node.queue(r.vhost, "webhooks")
    finally:
        receiver.stop()


def test_a_batch_s_lines_run_through_rabbitmq_once_each(stacks: StackFactory) -> None:
    r = stacks(workers=1, CHATQ_LEASE="1", CHATQ_QUEUE_RESEND="1")
    lines = [request_line(f"q{i}", f"question {i}", model="fake:ttft=0.3") for i in range(6)]
    batch = run_batch(r.stack.url, lines)
    ended = wait_ended(r.stack.url, batch["id"])
    assert ended["status"] == "completed", ended
    assert ended["request_counts"] == {"total": 6, "completed": 6, "failed": 0}
    assert r.calls() == 6
    wait_until(lambda: r.messages() == 0, 30, "the jobs queue empty")
