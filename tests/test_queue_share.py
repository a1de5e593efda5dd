"""GET /v1/queue shows a key its own share (its jobs waiting, its rates, its batches) and totals
that name no other key; the whole picture only to a key of CHATQ_ADMIN_KEYS (alice here).

A real web and no worker on a Redis of their own: jobs stay where they were queued."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from chatq import keys
from chatq.admission import fairness
from chatq.broker import backlog as broker
from chatq.config import settings as config
from chatq.jobs import rates
from chatq.metrics import queue_share
from scripts.localredis import LocalRedis
from tests import chatq_schemas
from tests.batchkit import create_batch, jsonl, request_line, upload
from tests.conftest import Stack, start_stack
from tests.procs import ALICE_KEY, BOB_KEY, wait_until


@pytest.fixture(scope="module")
def idle(fakellm: str) -> Iterator[Stack]:
    """A web, no worker: alice has 3 interactive and 2 batch jobs queued, bob 1 and 0, and a
    batch each (not yet validated: no worker)."""
    server = LocalRedis().start()
    stack = start_stack(server.url, fakellm, workers=0)
    for key, interactive, batch in ((ALICE_KEY, 3, 2), (BOB_KEY, 1, 0)):
        for i in range(interactive):
            assert stack.submit(f"i{i}", key=key).status_code == 202
        for i in range(batch):
            assert stack.submit(f"b{i}", key=key, priority="batch").status_code == 202
        uploaded = upload(stack.url, jsonl([request_line("x", "hi")] * 2), key=key)
        assert create_batch(stack.url, uploaded.json()["id"], key=key).status_code == 200
    yield stack
    stack.stop()
    server.stop()


def _queue(s: Stack, key: str) -> dict[str, Any]:
    answer = s.session(key).get(f"{s.url}/v1/queue", timeout=10)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    chatq_schemas.check("QueueShare" if "key" in body else "Queue", body)
    return body


def test_a_key_sees_its_own_jobs_and_totals_that_name_no_other_key(idle: Stack) -> None:
    share = _queue(idle, BOB_KEY)
    assert share["key"] == "bob"
    assert share["queues"]["interactive"]["depth"] == 1 and share["queues"]["batch"]["depth"] == 0
    assert share["queues"]["interactive"]["oldest_age_s"] >= 0
    assert share["batches"]["active"] == 1
    totals = share["totals"]
    assert (totals["queues"]["interactive"]["depth"], totals["queues"]["batch"]["depth"]) == (4, 2)
    assert totals["workers"] == {"count": 0, "slots": 0, "busy": 0} and totals["in_progress"] == 0
    assert "recommended_concurrency" not in share and "alice" not in str(share)


def test_an_admin_key_sees_the_whole_picture(idle: Stack) -> None:
    whole = _queue(idle, ALICE_KEY)
    assert "key" not in whole and "totals" not in whole
    assert (whole["queues"]["interactive"]["depth"], whole["queues"]["batch"]["depth"]) == (4, 2)
    assert whole["batches"]["active"] == 2
    assert whole["recommended_concurrency"] == 0 and whole["workers"]["count"] == 0


def test_the_rates_are_counted_per_key_too(idle: Stack) -> None:
    def counted(owner: str) -> float:
        # The minutes are read anew at each look: a count sent after a minute's end is in the
        # next one.
        minute = int(time.time() // 60)
        fields = [rates.owner_field("arrivals", owner)]
        return sum(
            float(idle.redis.hmget(keys.stats(m), fields)[0] or 0)
            for m in range(minute - 2, minute + 1)
        )

    # The web sends its counts once a second: 5 of alice's jobs, 1 of bob's (6 in all).
    wait_until(lambda: counted("alice") == 5 and counted("bob") == 1, 10, "the arrivals counted")
    bob, whole = _queue(idle, BOB_KEY), _queue(idle, ALICE_KEY)
    assert 0 < bob["arrival_rate_per_s"] < whole["arrival_rate_per_s"]


def test_a_jobs_parked_over_its_cap_counts_in_its_owners_depth(idle: Stack) -> None:
    job_id = "job_parkedForTheQueueShareTest0"
    lane = keys.parked("interactive")
    idle.redis.hset(keys.job(job_id), mapping={"id": job_id, "owner": "bob"})
    idle.redis.zadd(lane, {job_id: 0})
    try:
        share = _queue(idle, BOB_KEY)
        assert share["queues"]["interactive"]["depth"] == 2
        assert share["totals"]["queues"]["interactive"]["depth"] == 5
        assert _queue(idle, ALICE_KEY)["queues"]["interactive"]["depth"] == 5
    finally:
        idle.redis.zrem(lane, job_id)
        idle.redis.delete(keys.job(job_id))


def test_where_keys_share_a_queue_a_keys_own_depth_is_unknown(idle: Stack) -> None:
    client = redis.Redis.from_url(idle.env["CHATQ_REDIS_URL"], decode_responses=True)
    shared = broker.RedisBroker(client, plan=fairness.Plan())  # CHATQ_FAIR_DISPATCH=0
    depths, ages = queue_share.own_depths(shared, "bob", time.time())
    assert depths == ages == {"interactive": None, "batch": None}
    own = broker.RedisBroker(client, plan=fairness.Plan(("alice", "bob")))
    assert queue_share.own_depths(own, "bob", time.time())[0] == {"interactive": 1, "batch": 0}


def test_admin_keys_are_names_of_api_keys_and_an_error_never_repeats_one() -> None:
    loaded = config.load({"CHATQ_API_KEYS": "ops:sk-ops-1,a:sk-a-1", "CHATQ_ADMIN_KEYS": "ops"})
    assert loaded.admin_key_names == ("ops",)
    with pytest.raises(config.ConfigError) as caught:
        config.load({"CHATQ_API_KEYS": "ops:sk-ops-1", "CHATQ_ADMIN_KEYS": "sk-ops-1"})
    assert "CHATQ_ADMIN_KEYS" in str(caught.value) and "sk-ops-1" not in str(caught.value)
