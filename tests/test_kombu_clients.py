"""kombu's Redis channel reuses one redis-py client (chatq/broker/kombu_clients.py): building one
per message cost about 0.1 ms each time, once per submit in the web and twice per job in the worker.
Messages still go where they went."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from chatq.broker.celery_app import QUEUES, enqueue, make_celery
from chatq.config.settings import Settings
from scripts.localredis import LocalRedis


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A Redis of this module's own: no worker of another test consumes what it sends."""
    server = LocalRedis().start()
    yield server.url
    server.stop()


def test_a_channel_builds_its_client_once_and_again_for_a_new_pool(redis_url: str) -> None:
    app = make_celery(Settings(redis_url=redis_url))
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
            assert first.ping()
        channel._pool = None  # as kombu does when it drops a channel's connections
        with channel.conn_or_acquire() as third:
            assert third is not first and third.ping()
        given = redis.Redis.from_url(redis_url)
        with channel.conn_or_acquire(given) as passed:
            assert passed is given


def test_messages_sent_through_the_reused_client_are_queued(redis_url: str) -> None:
    app = make_celery(Settings(redis_url=redis_url))
    client = redis.Redis.from_url(redis_url)
    lane = QUEUES[0]
    ids = [f"job_kombu{i:023d}" for i in range(20)]
    for job_id in ids:
        enqueue(app, job_id, lane)
    assert client.llen(lane) == len(ids)
