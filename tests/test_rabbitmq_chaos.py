"""Chaos with RabbitMQ as the broker: a worker SIGKILLed mid-flight, and the RabbitMQ node
itself SIGKILLed and restarted under load. Every accepted job ends `completed`, and the
upstream calls are counted: one per job, plus one per job a killed worker was running.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest
import requests

from chatq import keys
from chatq.jobs import record as jobs
from tests.procs import ALICE_KEY, start_worker, wait_until
from tests.rabbitmq import RabbitNode, RabbitStack, StackFactory, rabbit_stacks

# Killed workers and a restarted broker take half a minute: `make test-slow`.
pytestmark = pytest.mark.slow


@pytest.fixture
def node() -> Iterator[RabbitNode]:
    """A RabbitMQ node of this test's own: a test here may kill it."""
    started = RabbitNode().start()
    yield started
    started.stop()


@pytest.fixture
def stacks(node: RabbitNode) -> Iterator[StackFactory]:
    with rabbit_stacks(node) as build:
        yield build


def _records(r: RabbitStack, ids: list[str]) -> list[dict[str, str]]:
    pipe = r.stack.redis.pipeline(transaction=False)
    for job_id in ids:
        pipe.hgetall(keys.job(job_id))
        pipe.get(keys.text(job_id))
    out = pipe.execute()
    return [{**out[2 * i], "output_text": out[2 * i + 1] or ""} for i in range(len(ids))]


def _statuses(r: RabbitStack, ids: list[str], wait_s: float) -> Counter[str]:
    """The jobs' statuses once all are terminal, or when `wait_s` has passed."""
    deadline = time.monotonic() + wait_s
    while True:
        statuses = Counter(rec.get("status", "missing") for rec in _records(r, ids))
        if all(jobs.is_terminal(s) for s in statuses) or time.monotonic() > deadline:
            return statuses
        time.sleep(0.25)


def test_a_worker_sigkilled_mid_flight_loses_no_job_and_costs_one_call_more_each(
    stacks: StackFactory,
) -> None:
    lease_s = 2.0
    r = stacks(workers=0, CHATQ_LEASE=str(lease_s), CHATQ_WORKER_CONCURRENCY="50")
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(
                lambda i: r.stack.submit(f"kill {i}", model=("fake:ttft=0.2,tps=10,tokens=30")),
                range(30),
            )
        )
    ids = [a.json()["id"] for a in answers]
    first = start_worker(r.stack.env, "")
    r.stack.procs.append(first)
    wait_until(
        lambda: all(
            rec["status"] == "in_progress" and rec["output_text"] for rec in _records(r, ids)
        ),
        30,
        "all 30 streaming",
    )
    first.kill()
    killed_at = time.monotonic()
    killed = [rec["id"] for rec in _records(r, ids) if not jobs.is_terminal(rec["status"])]
    calls_at_kill = r.calls()
    # RabbitMQ hands the killed worker's unacknowledged messages back at once: each finds its
    # job still running (leased) and is dropped; the sweeper hands the jobs over instead.
    r.stack.procs.append(start_worker(r.stack.env, ""))
    statuses = _statuses(r, ids, 2 * lease_s + 30)
    assert statuses == {"completed": 30}, (statuses, time.monotonic() - killed_at)
    assert len(killed) == 30 and calls_at_kill == 30
    assert r.calls() - calls_at_kill == len(killed)
    for record in _records(r, ids):
        assert len(record["output_text"].split()) == 30
        events = [e for _, e in r.stack.redis.xrange(keys.events(record["id"]))]
        assert [e["t"] for e in events].count("end") == 1 and events[-1]["t"] == "end"
        assert any(e["t"] == "reset" for e in events)
    wait_until(lambda: r.messages() == 0, 30, "the jobs queue empty")


@dataclass
class Submits:
    """A client submitting a job every `every_s` from a thread, every answer kept."""

    r: RabbitStack
    every_s: float
    answers: list[tuple[int, dict[str, object]]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {ALICE_KEY}"
        n = 0
        while not self.stop.is_set():
            n += 1
            t0 = time.monotonic()
            body = {
                "model": "fake:ttft=0.3,tps=20,tokens=10",
                "messages": [{"role": "user", "content": f"load {n}"}],
            }
            try:
                answer = session.post(f"{self.r.stack.url}/v1/jobs", json=body, timeout=60)
                self.answers.append((answer.status_code, answer.json()))
            except requests.RequestException as exc:
                self.answers.append((0, {"error": type(exc).__name__}))
            self.stop.wait(max(0.0, self.every_s - (time.monotonic() - t0)))

    def accepted(self) -> list[str]:
        return [str(body["id"]) for status, body in self.answers if status in (200, 202)]


def test_a_rabbitmq_restart_under_load_loses_no_accepted_job(
    node: RabbitNode,
    stacks: StackFactory,
) -> None:
    r = stacks(workers=1, CHATQ_LEASE="2", CHATQ_QUEUE_RESEND="2")
    traffic = Submits(r, every_s=0.05)
    thread = threading.Thread(target=traffic.run)
    thread.start()
    try:
        wait_until(lambda: len(traffic.accepted()) >= 20, 30, "traffic flowing")
        before = len(traffic.accepted())
        node.kill()  # no goodbye: messages in flight, unacknowledged ones, all cut
        time.sleep(3)
        during = len(traffic.answers)
        node.start()  # the same node name, ports and data folder
        time.sleep(4)
    finally:
        traffic.stop.set()
        thread.join(90)
    ids = traffic.accepted()
    statuses = _statuses(r, ids, 60)
    assert statuses == {"completed": len(ids)}, statuses
    # Every submit was accepted, those made while the broker was away too: each job is kept
    # in Redis and its message sent once RabbitMQ is back.
    assert Counter(status for status, _ in traffic.answers) == {202: len(ids)}
    assert before >= 20 and len(ids) > during > before
    assert r.calls() == len(ids)
    wait_until(lambda: r.messages() == 0, 30, "the jobs queue empty")
    assert r.queue_figures()["queues"]["interactive"]["depth"] == 0
    # The outage was felt: sends failed in the web, and the sweeper sent those jobs later
    # (not always every one: a send whose confirm was lost may still have arrived).
    web, worker = r.stack.procs[-1], r.stack.procs[0]
    assert r.password not in r.logs()  # the lost connections were logged, masked
    unsent = web.log_text().count("could not send the message")
    resent = worker.log_text().count("sent again (message lost)")
    assert unsent >= 1 and resent >= 1, (unsent, resent)
    print(
        f"RabbitMQ restart: {len(ids)} accepted, {during - before} answered while it was "
        f"away, {unsent} sends failed, {resent} sent again by the sweeper; all completed, "
        f"one upstream call each"
    )
