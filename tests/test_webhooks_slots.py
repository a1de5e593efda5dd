"""Webhook deliveries under receivers that trickle their answer a byte at a time: each attempt
ends at its deadline, a delivery is never attempted twice at once, attempts run in each
worker's delivery pool (never in a job's slot), neither one endpoint nor one key can take that
pool, a running attempt shows in the log, /v1/queue and the metrics, and deleting its endpoint
cuts it and leaves none of the endpoint's deliveries. Real webs and workers on Redis servers of
their own: a stack per test, but for the two tests of one attempt held open, which share one."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from chatq import keys
from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.procs import ALICE_KEY, BOB_KEY, wait_until
from tests.webhook_receiver import Answer, Receiver
from web.openapi.document import document

pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def held(fakellm: str) -> Iterator[Stack]:
    """One worker whose attempts may run two minutes: the tests of a single attempt held open
    share it, each ending with no delivery running or due."""
    server = LocalRedis().start()
    stack = start_stack(server.url, fakellm, CHATQ_WEBHOOK_TIMEOUT="120")
    yield stack
    stack.stop()
    server.stop()


def _endpoint(stack: Stack, url: str, key: str = ALICE_KEY) -> str:
    answer = stack.session(key).post(f"{stack.url}/v1/webhooks", json={"url": url}, timeout=10)
    assert answer.status_code == 200, answer.text
    endpoint_id: str = answer.json()["id"]
    return endpoint_id


def _job(stack: Stack, hook: str | None, key: str = ALICE_KEY, wait_s: int = 30) -> Any:
    answer = stack.session(key).post(
        f"{stack.url}/v1/jobs?wait={wait_s}",
        json={"model": "fake", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Chatq-Webhook": hook} if hook else {},
        timeout=wait_s + 10,
    )
    assert answer.status_code in (200, 202), answer.text
    return answer.json()


def _log(stack: Stack, endpoint_id: str, key: str = ALICE_KEY) -> list[dict[str, Any]]:
    url = f"{stack.url}/v1/webhooks/{endpoint_id}/deliveries"
    answer = stack.session(key).get(url, timeout=10)
    assert answer.status_code == 200, answer.text
    data: list[dict[str, Any]] = answer.json()["data"]
    return data


def _settled(stack: Stack, endpoint_id: str, key: str = ALICE_KEY) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        log = _log(stack, endpoint_id, key)
        return log[0] if log and log[0]["status"] != "pending" else None

    found: dict[str, Any] = wait_until(ended, 60, "the delivery ended", every_s=0.2)
    return found


def _webhook_figures(stack: Stack) -> dict[str, int]:
    answer = stack.session().get(f"{stack.url}/v1/queue", timeout=10)
    assert answer.status_code == 200, answer.text
    figures: dict[str, int] = answer.json()["webhooks"]
    return figures


def _valid_delivery(value: Any) -> None:
    """`value` matches the WebhookDelivery schema of /openapi.json."""
    resource = Resource.from_contents(document(), default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:doc", resource)
    schema = {"$ref": "urn:doc#/components/schemas/WebhookDelivery"}
    Draft202012Validator(schema, registry=registry).validate(value)


def _sample(text: str, name: str) -> float | None:
    found = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


@pytest.mark.parametrize("pool", ["gevent", "threads"])
def test_a_trickling_answer_is_cut_at_the_deadline_and_never_sent_twice_at_once(
    fakellm: str, own_redis_url: str, receiver: Receiver, pool: str
) -> None:
    receiver.plan("/slow", Answer(trickle=True), Answer(trickle=True), Answer(200))
    stack = start_stack(
        own_redis_url,
        fakellm,
        CHATQ_WORKER_POOL=pool,
        CHATQ_WEBHOOK_TIMEOUT="1",
        CHATQ_WEBHOOK_RETRY_SCALE="0.001",
    )
    try:
        hook = _endpoint(stack, receiver.url("/slow"))
        _job(stack, hook)
        delivery = _settled(stack, hook)
    finally:
        stack.stop()
    attempts = [(a["outcome"], a["status_code"]) for a in delivery["attempts"]]
    assert attempts == [("timeout", None), ("timeout", None), ("delivered", 200)]
    assert delivery["attempts"][0]["reason"] == "no answer within 1 s"
    # One connection per attempt, each closed before the next opened.
    assert len(receiver.at("/slow")) == 3 and receiver.open_max["/slow"] == 1


def test_a_running_attempt_shows_in_the_log_the_queue_and_the_metrics(
    held: Stack, receiver: Receiver
) -> None:
    stack = held
    receiver.plan("/held", Answer(trickle=True))
    hook = _endpoint(stack, receiver.url("/held"))
    _job(stack, hook)
    receiver.wait_for("/held", 1)
    [running] = _log(stack, hook)
    figures = _webhook_figures(stack)
    bind = stack.procs[0].env["CHATQ_WORKER_METRICS_BIND"]
    worker_metrics = requests.get(f"http://{bind}/metrics", timeout=5).text
    web_metrics = requests.get(f"{stack.url}/metrics", timeout=5).text
    receiver.release.set()  # the answer ends: the attempt is delivered
    delivery = _settled(stack, hook)
    after = _webhook_figures(stack)
    [attempt] = running["attempts"]
    assert (attempt["outcome"], attempt["duration_s"], running["status"]) == (
        "in_progress",
        None,
        "pending",
    )
    _valid_delivery(running)
    assert figures == {"in_flight": 1, "due": 0, "scheduled": 0}
    assert _sample(worker_metrics, "chatq_webhook_slots_busy") == 1
    assert _sample(worker_metrics, "chatq_webhook_slots") == 50
    assert _sample(web_metrics, 'chatq_webhook_queue{state="in_flight"}') == 1
    assert [a["outcome"] for a in delivery["attempts"]] == ["delivered"]
    assert after == {"in_flight": 0, "due": 0, "scheduled": 0}


def test_one_endpoint_runs_at_most_its_cap_of_attempts_across_workers(
    fakellm: str, own_redis_url: str, receiver: Receiver
) -> None:
    receiver.plan("/busy", *[Answer(trickle=True)] * 3)
    stack = start_stack(
        own_redis_url,
        fakellm,
        workers=2,
        CHATQ_WEBHOOK_TIMEOUT="60",
        CHATQ_WEBHOOK_CONCURRENCY="2",
        CHATQ_WEBHOOK_ENDPOINT_CONCURRENCY="1",
    )
    try:
        busy = _endpoint(stack, receiver.url("/busy"))
        other = _endpoint(stack, receiver.url("/other"))
        for _ in range(3):
            _job(stack, busy)
        wait_until(lambda: len(_log(stack, busy)) == 3, 30, "three deliveries due")
        receiver.wait_for("/busy", 1)
        _job(stack, other)
        _settled(stack, other)  # taken while the endpoint at its cap had two due
        busy_log = _log(stack, busy)
        reached = (len(receiver.at("/busy")), receiver.open_max["/busy"])
        receiver.release.set()
    finally:
        stack.stop()
    assert reached == (1, 1)
    assert sorted(len(d["attempts"]) for d in busy_log) == [0, 0, 1]


def test_a_tenant_s_trickling_receivers_cannot_stop_another_tenant_s_job(
    fakellm: str, own_redis_url: str, receiver: Receiver
) -> None:
    stack = start_stack(
        own_redis_url,
        fakellm,
        CHATQ_WORKER_CONCURRENCY="2",
        CHATQ_WEBHOOK_CONCURRENCY="2",
        CHATQ_WEBHOOK_TIMEOUT="60",
    )
    try:
        hooks = []
        for n in range(3):
            receiver.plan(f"/alice{n}", Answer(trickle=True), Answer(trickle=True))
            hooks.append(_endpoint(stack, receiver.url(f"/alice{n}")))
        jobs = [_job(stack, None, wait_s=0)["id"] for _ in range(2)]
        for job_id in jobs:  # both ran in the job slots, and each made three deliveries
            assert stack.get(job_id, wait=30).json()["status"] == "completed"
        wait_until(lambda: sum(len(_log(stack, h)) for h in hooks) == 6, 30, "six deliveries")
        wait_until(lambda: sum(receiver.open_now.values()) >= 2, 30, "two attempts trickling")
        bobs = _job(stack, None, key=BOB_KEY, wait_s=20)
        assert bobs["status"] == "completed"
        figures = _webhook_figures(stack)
        receiver.release.set()
    finally:
        stack.stop()
    assert figures["in_flight"] == 2 and figures["due"] + figures["scheduled"] == 4


def test_a_key_at_its_cap_leaves_the_delivery_slots_to_another_key(
    fakellm: str, own_redis_url: str, receiver: Receiver
) -> None:
    receiver.plan("/alice0", Answer(trickle=True))
    receiver.plan("/alice1", Answer(trickle=True))
    stack = start_stack(
        own_redis_url,
        fakellm,
        workers=2,
        CHATQ_WEBHOOK_TIMEOUT="120",
        CHATQ_WEBHOOK_CONCURRENCY="1",
        CHATQ_WEBHOOK_KEY_CONCURRENCY="1",
    )
    try:
        first, second = (_endpoint(stack, receiver.url(f"/alice{n}")) for n in range(2))
        bobs = _endpoint(stack, receiver.url("/bob"), key=BOB_KEY)
        _job(stack, first)
        receiver.wait_for("/alice0", 1)  # one worker's slot, and alice's one
        _job(stack, second)

        def placed() -> bool:  # attempted in the other worker's slot, or set aside
            return bool(receiver.at("/alice1") or stack.redis.exists(keys.webhooks_key_waiting()))

        wait_until(placed, 30, "alice's second delivery placed")
        _job(stack, bobs, key=BOB_KEY)
        delivered = _settled(stack, bobs, key=BOB_KEY)
        [waiting] = _log(stack, second)
        reached = len(receiver.at("/alice1"))
        receiver.release.set()
    finally:
        stack.stop()
    assert [a["outcome"] for a in delivered["attempts"]] == ["delivered"]
    assert (reached, waiting["status"], waiting["attempts"]) == (0, "pending", [])


def test_deleting_an_endpoint_cuts_its_running_attempt_and_leaves_none_of_its_deliveries(
    held: Stack, receiver: Receiver
) -> None:
    stack = held
    receiver.plan("/gone", Answer(trickle=True))
    gone = _endpoint(stack, receiver.url("/gone"))
    _job(stack, gone)
    receiver.wait_for("/gone", 1)
    [delivery] = _log(stack, gone)
    answer = stack.session().delete(f"{stack.url}/v1/webhooks/{gone}", timeout=10)
    assert answer.status_code == 200, answer.text
    wait_until(lambda: receiver.open_now["/gone"] == 0, 30, "the attempt cut")
    left = [k for k in stack.redis.scan_iter() if gone in k or delivery["id"] in k]
    still = [
        stack.redis.zscore(k, delivery["id"])
        for k in (keys.webhooks_due(), keys.webhooks_running())
    ]
    after = _endpoint(stack, receiver.url("/after"))
    _job(stack, after)
    delivered = _settled(stack, after)  # the worker goes on
    worker_log = stack.procs[0].log_text()
    assert (left, still) == ([], [None, None])
    assert [a["outcome"] for a in delivered["attempts"]] == ["delivered"]
    assert "Traceback" not in worker_log and "not recorded" not in worker_log
