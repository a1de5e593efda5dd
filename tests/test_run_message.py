"""A job's run message is pushed by the script that creates the job when the broker is the job
store's Redis (chatq/jobs/create.lua): the message kombu would have sent, in the same step, and
only for a job that is to run. In process, on a Redis of this module's own, with no worker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from chatq import keys
from chatq.broker import celery_app
from chatq.config.settings import Settings
from scripts.localredis import LocalRedis
from tests.inproc import in_process

KEY = "sk-runmessage-5b1d09c2"
AUTH = {"Authorization": f"Bearer {KEY}"}
QUEUE = "interactive.alice"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalRedis]:
    """No worker reads this Redis: what is pushed stays to be read."""
    local = LocalRedis().start()
    yield local
    local.stop()


@pytest.fixture
def client(server: LocalRedis) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(server.url)
    c.flushdb()
    yield c
    c.close()


def _settings(url: str, **more: Any) -> Settings:
    return Settings(redis_url=url, api_keys=(("alice", KEY),), default_model="fake", **more)


def _messages(client: redis.Redis, queue: str = QUEUE) -> list[dict[str, Any]]:
    return [json.loads(m) for m in client.lrange(queue, 0, -1)]


def _without_tag(message: dict[str, Any]) -> dict[str, Any]:
    """A message less its delivery tag, which is new for every message sent."""
    properties = {k: v for k, v in message["properties"].items() if k != "delivery_tag"}
    return {**message, "properties": properties}


def test_the_message_built_for_the_script_is_the_one_celery_sends(
    server: LocalRedis, client: redis.Redis
) -> None:
    app = celery_app.make_celery(_settings(server.url))
    celery_app.enqueue(app, "job_" + "c" * 32, "interactive", owner="alice")
    queue, built = celery_app.run_message(app, "job_" + "c" * 32, "interactive", "alice")
    assert queue == QUEUE
    [sent] = _messages(client)
    assert _without_tag(json.loads(built)) == _without_tag(sent)
    assert json.loads(built)["properties"]["delivery_tag"] != sent["properties"]["delivery_tag"]


def test_the_message_carries_the_job_s_traceparent_as_celery_sends_it(
    server: LocalRedis, client: redis.Redis
) -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    app = celery_app.make_celery(_settings(server.url))
    celery_app.enqueue(
        app, "job_" + "d" * 32, "interactive", owner="alice", traceparent=traceparent
    )
    _, built = celery_app.run_message(app, "job_" + "d" * 32, "interactive", "alice", traceparent)
    [sent] = _messages(client)
    assert sent["headers"]["traceparent"] == traceparent
    assert _without_tag(json.loads(built)) == _without_tag(sent)


def test_a_submitted_job_has_its_message_once_and_a_follower_none(
    server: LocalRedis, client: redis.Redis
) -> None:
    body = {"messages": [{"role": "user", "content": "same"}], "temperature": 0}
    with in_process(_settings(server.url)) as app:
        web = app.test_client()
        first = web.post("/v1/jobs", json=body, headers=AUTH)
        second = web.post("/v1/jobs", json=body, headers=AUTH)
    assert (first.status_code, second.status_code) == (202, 202)
    leader, follower = first.get_json()["id"], second.get_json()["id"]
    assert client.hget(keys.job(follower), "leader") == leader.encode()
    [message] = _messages(client)
    assert message["headers"]["id"] == leader
    assert message["properties"]["delivery_info"]["routing_key"] == QUEUE
    assert client.hget(keys.job(leader), "status") == b"queued"


def test_a_broker_elsewhere_gets_the_message_from_the_web(
    server: LocalRedis, client: redis.Redis
) -> None:
    other = LocalRedis().start()
    try:
        settings = _settings(server.url, broker_url=other.url)
        body = {"messages": [{"role": "user", "content": "x"}]}
        with in_process(settings) as app:
            job_id = app.test_client().post("/v1/jobs", json=body, headers=AUTH).get_json()["id"]
        assert client.hget(keys.job(job_id), "status") == b"queued"
        assert _messages(client) == []
        [message] = _messages(redis.Redis.from_url(other.url))
        assert message["headers"]["id"] == job_id
    finally:
        other.stop()
