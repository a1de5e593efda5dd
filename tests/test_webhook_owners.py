"""Whether a key has webhook endpoints is asked at every submit. A web keeps the answer while
its notification listener hears every change (chatq/webhooks/owners.py): no Redis call for it
then, and an endpoint made or deleted through one web counts on another within the
notification's delay."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
import requests

from chatq import keys
from chatq.webhooks.owners import KnownOwners
from scripts.localredis import LocalRedis
from tests.procs import ALICE_KEY, base_env, start_web, stop_all, wait_until

AUTH = {"Authorization": f"Bearer {ALICE_KEY}"}
BODY = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def webs(fakellm: str) -> Iterator[tuple[str, str, redis.Redis]]:
    """Two webs on a Redis of their own, no worker: (URL of one, of the other, the Redis)."""
    server = LocalRedis().start()
    env = base_env(server.url, fakellm, CHATQ_WEBHOOK_ALLOW_PRIVATE="1")
    (one, one_url), (two, two_url) = start_web(env), start_web(env)
    yield one_url, two_url, redis.Redis.from_url(server.url, decode_responses=True)
    stop_all([one, two])
    server.stop()


def _announced(url: str, client: redis.Redis) -> bool:
    """Whether a job submitted through `url` now is announced to webhooks."""
    answer = requests.post(f"{url}/v1/jobs", json=BODY, headers=AUTH, timeout=10)
    assert answer.status_code == 202, answer.text
    return client.hget(keys.job(answer.json()["id"]), "announce") == "1"


def _asked_redis(url: str, client: redis.Redis) -> bool:
    """Whether a job submitted through `url` (not announced) made it ask Redis."""
    before = _scard_calls(client)
    assert not _announced(url, client)
    return _scard_calls(client) > before


def _scard_calls(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_scard", {}).get("calls", 0))


def test_a_web_asks_redis_once_then_hears_changes_made_through_another(
    webs: tuple[str, str, redis.Redis],
) -> None:
    one, two, client = webs
    # The first submit starts web two's listener; it keeps answers once it has subscribed.
    wait_until(lambda: not _asked_redis(two, client), 5, "web two keeping its answer")
    asked = _scard_calls(client)
    assert not any(_announced(two, client) for _ in range(5))
    assert _scard_calls(client) == asked
    made = requests.post(
        f"{one}/v1/webhooks", json={"url": "http://127.0.0.1:9/hook"}, headers=AUTH, timeout=10
    )
    assert made.status_code == 200, made.text
    wait_until(lambda: _announced(two, client), 2, "an endpoint made on web one counted on two")
    gone = requests.delete(f"{one}/v1/webhooks/{made.json()['id']}", headers=AUTH, timeout=10)
    assert gone.status_code == 200, gone.text
    wait_until(lambda: not _announced(two, client), 2, "its deletion counted on web two")


def test_answers_are_kept_only_while_the_listener_hears_every_change() -> None:
    owners = KnownOwners()
    _, generation = owners.get("alice")
    owners.put("alice", False, generation)
    assert owners.get("alice")[0] is None  # not listening yet
    owners.reset(listening=True)
    _, generation = owners.get("alice")
    owners.put("alice", False, generation)
    assert owners.get("alice")[0] is False
    _, generation = owners.get("bob")
    owners.changed("alice")  # a change arrives while bob's answer is being read
    owners.put("bob", False, generation)
    assert owners.get("alice")[0] is None and owners.get("bob")[0] is None
    owners.put("alice", True, owners.get("alice")[1])
    owners.reset(listening=False)  # Redis lost: changes may go unheard
    assert owners.get("alice")[0] is None
