"""The cap on a key's delivery attempts running at once (CHATQ_WEBHOOK_KEY_CONCURRENCY), in
process on a real Redis of the test's own: a key at its cap waits aside, out of other keys'
way, first come first; its slots count across workers and free up as attempts end, or as a
lost worker's hold runs out (run out here by moving its scores)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from chatq import keys
from chatq.metrics.queue_stats import redis_time, webhook_work
from chatq.webhooks.deliveries import DELIVERED, Attempt, Deliveries
from chatq.webhooks.events import Event
from chatq.webhooks.store import CONFIG, Endpoint
from scripts.localredis import LocalRedis

EVENT = Event("evt_1", "job.completed", 1_700_000_000, "job_1")
ENDPOINT_CAP = 10


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    server = LocalRedis().start()
    yield redis.Redis.from_url(server.url, decode_responses=True)
    server.stop()


def _deliveries(client: redis.Redis) -> Deliveries:
    return Deliveries(client, 3600, 20.0)


def _add(deliveries: Deliveries, delivery_id: str, endpoint_id: str, owner: str) -> None:
    endpoint = Endpoint(endpoint_id, owner, "https://hooks.example.com/", CONFIG)
    assert deliveries.add(delivery_id, endpoint, EVENT)


def _taken(deliveries: Deliveries, key_cap: int, limit: int = 10) -> list[str]:
    return [d for d, _ in deliveries.take(limit, ENDPOINT_CAP, key_cap)]


def test_a_key_at_its_cap_leaves_the_slots_to_other_keys_in_order(client: redis.Redis) -> None:
    deliveries = _deliveries(client)
    for n in range(3):  # three endpoints of alice's, each under its own cap
        _add(deliveries, f"dlv_a{n}", f"wh_a{n}", "alice")
    _add(deliveries, "dlv_b0", "wh_b0", "bob")
    _add(deliveries, "dlv_a3", "wh_a0", "alice")
    _add(deliveries, "dlv_b1", "wh_b1", "bob")
    first = deliveries.take(10, ENDPOINT_CAP, key_cap=2)
    assert [d for d, _ in first] == ["dlv_a0", "dlv_a1", "dlv_b0", "dlv_b1"]
    assert client.zrange(keys.webhooks_key_waiting("alice"), 0, -1) == ["dlv_a2", "dlv_a3"]
    work = webhook_work(client, redis_time(client))
    assert (work.in_flight, work.due) == (4, 2)  # /v1/queue counts those waiting as due
    # Another worker: the key's cap counts every worker's attempts.
    assert _taken(_deliveries(client), key_cap=2) == []
    started = deliveries.begin(*first[0])
    assert started is not None
    assert deliveries.finish(*first[0], Attempt(DELIVERED, "delivered", 200, started.now_s, 0.1))
    # Its slot goes to alice's first waiting delivery, whichever endpoint it is for.
    assert _taken(_deliveries(client), key_cap=2) == ["dlv_a2"]
    assert client.zrange(keys.webhooks_key_waiting("alice"), 0, -1) == ["dlv_a3"]


def test_a_key_s_deliveries_set_aside_are_not_read_again_by_each_take(
    client: redis.Redis,
) -> None:
    deliveries = _deliveries(client)
    for n in range(60):  # more than one take looks at (50 for 10 free slots)
        _add(deliveries, f"dlv_a{n}", f"wh_a{n % 20}", "alice")
    _add(deliveries, "dlv_b0", "wh_b0", "bob")
    assert _taken(deliveries, key_cap=2) == ["dlv_a0", "dlv_a1"]  # 48 of alice's set aside
    assert _taken(deliveries, key_cap=2) == ["dlv_b0"]  # past the other 10, to bob's
    assert client.zcard(keys.webhooks_key_waiting("alice")) == 58
    assert client.zcard(keys.webhooks_due()) == 3  # the three held: no one else's is in front


def _run_out(client: redis.Redis, delivery_id: str, at: float) -> None:
    """The hold of `delivery_id` ran out at Redis time `at` (its worker was lost)."""
    record: dict[str, str] = client.hgetall(keys.webhook_delivery(delivery_id))  # type: ignore[assignment]
    busy = (keys.webhooks_busy(record["endpoint"]), keys.webhooks_key_busy(record["owner"]))
    for key in (keys.webhooks_due(), keys.webhooks_running(), *busy):
        client.zadd(key, {delivery_id: at})
    client.zadd(keys.webhooks_key_waiting(), {record["owner"]: at})


def test_a_lost_worker_s_hold_running_out_frees_its_key_s_slot(client: redis.Redis) -> None:
    deliveries = _deliveries(client)
    _add(deliveries, "dlv_a0", "wh_a0", "alice")
    _add(deliveries, "dlv_a1", "wh_a1", "alice")
    [lost] = deliveries.take(10, ENDPOINT_CAP, key_cap=1)
    assert lost[0] == "dlv_a0" and deliveries.begin(*lost) is not None
    assert _taken(deliveries, key_cap=1) == []  # dlv_a1 waits for alice's slot
    came_due = client.zscore(keys.webhooks_key_waiting("alice"), "dlv_a1")
    assert came_due is not None
    _run_out(client, "dlv_a0", came_due + 0.001)  # the worker renews no more
    # The slot is alice's again: her first due delivery takes it (dlv_a1 came due before the
    # lost attempt's hold ran out), and the lost one waits its turn.
    assert _taken(deliveries, key_cap=1) == ["dlv_a1"]
    assert client.zrange(keys.webhooks_key_waiting("alice"), 0, -1) == ["dlv_a0"]
    assert deliveries.renew([lost]) == set()  # the lost worker, if it comes back, holds none
