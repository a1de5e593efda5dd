"""Which queued jobs have no message in the Redis broker (chatq/broker/missing.lua), on a real
Redis: the sweeper sends those again, and only those."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from celery import Celery

from chatq.admission import fairness
from chatq.broker import backlog as broker
from chatq.broker import celery_app
from chatq.config import settings as config
from chatq.jobs import record as jobs
from chatq.jobs.results import SweepOutcome, Swept
from scripts.localredis import LocalRedis

ENV = {"CHATQ_API_KEYS": "alice:sk-alice-1,bob:sk-bob-1"}


@pytest.fixture(scope="module")
def client() -> Iterator[redis.Redis]:
    server = LocalRedis().start()
    try:
        yield redis.Redis.from_url(server.url, decode_responses=True)
    finally:
        server.stop()


@pytest.fixture
def redis_broker(client: redis.Redis) -> broker.RedisBroker:
    client.flushall()
    return broker.RedisBroker(client, plan=fairness.plan(config.load(ENV)))


@pytest.fixture(scope="module")
def app() -> Celery:
    return celery_app.make_celery(config.load(ENV))


def _waiting(owner: str, lane: str = "interactive") -> Swept:
    """A queued job of `owner` whose lease ran out."""
    return Swept(jobs.new_job_id(), SweepOutcome.QUEUED, lane, owner)


def _send(client: redis.Redis, app: Celery, job: Swept, to: str = "") -> Swept:
    """Push `job`'s run message as the web does: to its owner's queue, or to the list `to`."""
    queue, message = celery_app.run_message(app, job.job_id, job.priority, job.owner)
    client.lpush(to or queue, message)
    return job


def test_jobs_whose_message_waits_are_not_missing_wherever_they_are_in_their_lists(
    client: redis.Redis, app: Celery, redis_broker: broker.RedisBroker
) -> None:
    alice = [_send(client, app, _waiting("alice")) for _ in range(300)]
    bob = [_send(client, app, _waiting("bob", lane)) for lane in ("interactive", "batch")]
    asked = [*alice[:3], alice[150], alice[-1], *bob]
    assert client.llen("interactive.alice") == 300
    assert redis_broker.missing(asked) == []


def test_only_the_jobs_with_no_message_are_missing(
    client: redis.Redis, app: Celery, redis_broker: broker.RedisBroker
) -> None:
    sent = [_send(client, app, _waiting(owner)) for owner in ("alice", "alice", "bob")]
    lost = [_waiting("alice"), _waiting("bob", "batch")]
    missing = redis_broker.missing([lost[0], *sent, lost[1], lost[0]])  # asked twice: once
    assert sorted(missing) == sorted(job.job_id for job in lost)
    assert redis_broker.missing([]) == []


def test_a_message_in_another_list_than_its_owners_is_found(
    client: redis.Redis, app: Celery, redis_broker: broker.RedisBroker
) -> None:
    # Sent before fair dispatch gave alice a queue of her own, or after it was turned off.
    before = _send(client, app, _waiting("alice"), to="interactive")
    after = _send(client, app, _waiting("carol"), to="interactive.alice")
    for _ in range(50):
        _send(client, app, _waiting("alice"))
    lost = _waiting("alice")
    assert redis_broker.missing([before, after, lost]) == [lost.job_id]
