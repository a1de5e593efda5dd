"""CHATQ_BROKER_URL naming another Redis than CHATQ_REDIS_URL: Celery's lists live there, the
jobs' records stay in the state's Redis, and what chatq reads of the broker (the lanes' depth,
the oldest waiting job, the messages the sweeper looks for) is read where each lives."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
import requests

from chatq import keys
from chatq.admission import fairness
from chatq.broker import backlog as broker
from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.procs import start_fakellm, wait_swept, wait_until


@pytest.fixture
def servers() -> Iterator[tuple[LocalRedis, LocalRedis, str]]:
    """A state Redis, a broker Redis and a fakellm (base URL), all of this test's own."""
    state, messages = LocalRedis().start(), LocalRedis().start()
    fake, fake_url = start_fakellm()
    yield state, messages, fake_url
    fake.stop()
    messages.stop()
    state.stop()


# The stack's tenants (tests/procs.py): each has its queue in each lane.
PLAN = fairness.Plan(tenants=("alice", "bob"))


def _lists(client: redis.Redis) -> int:
    return sum(
        client.llen(k)
        for lane in fairness.LANES
        for q in PLAN.lane_queues(lane)
        for k in broker.queue_keys(q)
    )


def _calls(fake_url: str) -> int:
    return int(requests.get(fake_url.removesuffix("/v1") + "/stats", timeout=5).json()["requests"])


def test_a_broker_on_another_redis_is_read_there_and_the_records_stay_in_the_state(
    servers: tuple[LocalRedis, LocalRedis, str],
) -> None:
    state, messages, fake_url = servers
    s: Stack = start_stack(
        state.url,
        fake_url,
        workers=1,
        CHATQ_BROKER_URL=messages.url,
        CHATQ_WORKER_CONCURRENCY="1",
        CHATQ_LEASE="1",
        CHATQ_QUEUE_RESEND="1",
    )
    broker_redis = redis.Redis.from_url(messages.url, decode_responses=True)
    try:
        blocker = s.submit("blocker", model="fake:tps=1,tokens=600").json()["id"]
        wait_until(lambda: s.get(blocker).json()["output_text"], 20, "the blocker streaming")
        ids = [s.submit(f"waiting {i}").json()["id"] for i in range(3)]
        submitted = time.monotonic()
        assert _lists(broker_redis) == 3 and _lists(s.redis) == 0
        # In the list named after the queue: chatq sends no priority on Redis.
        assert broker_redis.llen("interactive.alice") == 3
        assert broker_redis.exists(keys.job(ids[0])) == 0 and s.redis.exists(keys.job(ids[0]))
        # The backlog waits longer than a lease: the sweeper finds each message in the broker.
        wait_swept(s.redis, ids, 1)
        waited_s = round(time.monotonic() - submitted, 3)
        figures = s.session().get(f"{s.url}/v1/queue", timeout=10).json()["queues"]
        assert figures["interactive"]["depth"] == 3
        # Its record's age, from the state: at least as long as the test has waited since.
        assert figures["interactive"]["oldest_age_s"] >= max(waited_s, 1.0)
        for key in broker.queue_keys("interactive.alice"):
            broker_redis.delete(key)  # the broker lost them: the sweeper sends them again
        wait_until(lambda: _lists(broker_redis) == 3, 20, "the lost messages sent again")
        wait_swept(s.redis, ids, 2)  # two more looks: sent once, not again
        assert _lists(broker_redis) == 3
        cancelled = s.session().post(f"{s.url}/v1/jobs/{blocker}/cancel", timeout=10)
        assert cancelled.status_code == 200
        done = [s.get(j, wait=30).json()["status"] for j in ids]
        assert done == ["completed"] * 3
        assert _calls(fake_url) == 4
    finally:
        s.stop()
