"""A bare key (CHATQ_API_KEYS=<key>, no name) never lands anywhere: not in any log line of
the web or the workers, not in any Redis key name or value, not in any notification."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from chatq import keys
from chatq.config.settings import bare_key_name
from chatq.jobs.notify import CHANNELS
from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.procs import wait_until

# No `sk-` prefix: the pattern redactor would not catch it by its shape.
BARE_KEY = "bare7f3c91d04e6a2b58c1d9"


class Notifications:
    """Everything published on chatq's notification channel while it listens."""

    def __init__(self, url: str) -> None:
        self.pubsub = redis.Redis.from_url(url, decode_responses=True).pubsub()
        self.pubsub.subscribe(*CHANNELS)
        self.messages: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self.pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
            if message:
                self.messages.append(str(message["data"]))

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(5)
        self.pubsub.close()
        return self.messages


def _decoded_bodies(value: Any) -> Iterator[str]:
    """Celery messages carry their body in base64: the decoded bodies inside `value`."""
    if isinstance(value, dict):
        properties = value.get("properties")
        if (
            isinstance(value.get("body"), str)
            and isinstance(properties, dict)
            and properties.get("body_encoding") == "base64"
        ):
            yield base64.b64decode(value["body"]).decode(errors="replace")
        for item in value.values():
            yield from _decoded_bodies(item)
    elif isinstance(value, list):
        for item in value:
            yield from _decoded_bodies(item)


def _with_bodies(texts: list[str]) -> list[str]:
    out = list(texts)
    for text in texts:
        try:
            out += _decoded_bodies(json.loads(text))
        except ValueError:
            continue
    return out


def _dump(client: redis.Redis) -> dict[str, list[str]]:
    """Every key of the database and everything in it, as text (and message bodies decoded)."""
    dump: dict[str, list[str]] = {}
    for name in client.scan_iter(count=1000):
        kind = client.type(name)
        if kind == "string":
            texts = [client.get(name) or ""]
        elif kind == "hash":
            texts = [t for pair in client.hgetall(name).items() for t in pair]
        elif kind == "list":
            texts = client.lrange(name, 0, -1)
        elif kind == "set":
            texts = list(client.smembers(name))
        elif kind == "zset":
            texts = [f"{m} {s}" for m, s in client.zrange(name, 0, -1, withscores=True)]
        elif kind == "stream":
            texts = [f"{i} {json.dumps(f)}" for i, f in client.xrange(name)]
        else:
            texts = [f"<{kind}>"]
        dump[name] = _with_bodies([str(t) for t in texts])
    return dump


@pytest.fixture
def bare_stack(fakellm: str) -> Iterator[tuple[Stack, LocalRedis]]:
    """A stack of its own (own Redis) whose only client key is given bare, rate limits on."""
    server = LocalRedis().start()
    stack = start_stack(
        server.url, fakellm, CHATQ_API_KEYS=BARE_KEY, CHATQ_RATE_LIMIT="1000/minute"
    )
    yield stack, server
    stack.stop()
    server.stop()


def _exercise(stack: Stack) -> list[str]:
    """Run jobs through every kind of endpoint with the bare key; the job ids."""
    s = stack.session(BARE_KEY)
    url = f"{stack.url}/v1"
    body = {
        "model": "fake:tps=50,tokens=6",
        "temperature": 0,
        "messages": [{"role": "user", "content": "count to six"}],
    }
    done = s.post(
        f"{url}/jobs",
        json=body,
        params={"wait": 20},
        timeout=30,
        headers={"Idempotency-Key": "idem-1"},
    )
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text
    job_id = done.json()["id"]
    events = s.get(f"{url}/jobs/{job_id}/events", params={"wait": 5}, timeout=10)
    assert events.status_code == 200 and events.json()["done"] is True
    sse = s.get(f"{url}/jobs/{job_id}/events", headers={"Accept": "text/event-stream"}, timeout=10)
    assert sse.status_code == 200 and "end" in sse.text
    assert s.get(f"{url}/jobs/{job_id}/result", timeout=10).status_code == 200
    assert s.get(f"{url}/jobs/{job_id}", timeout=10).json()["status"] == "completed"
    cached = s.post(f"{url}/jobs", json=body, timeout=10)
    assert cached.json()["cached"] is True
    slow = {"model": "fake:ttft=30", "messages": [{"role": "user", "content": "slow"}]}
    other = s.post(f"{url}/jobs", json=slow, timeout=10).json()["id"]
    wait_until(
        lambda: s.get(f"{url}/jobs/{other}", timeout=5).json()["status"] == "in_progress",
        20,
        "the slow job to start",
    )
    assert s.post(f"{url}/jobs/{other}/cancel", timeout=10).json()["status"] == "cancelled"
    front = s.post(
        f"{url}/chat/completions",
        timeout=30,
        json={"model": "fake", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert front.status_code == 200, front.text
    assert s.get(f"{url}/queue", timeout=10).status_code == 200
    return [job_id, other, front.headers["Chatq-Job-Id"]]


def test_a_bare_key_appears_in_no_log_no_redis_key_or_value_and_no_notification(
    bare_stack: tuple[Stack, LocalRedis],
) -> None:
    stack, server = bare_stack
    listener = Notifications(server.url)
    job_ids = _exercise(stack)
    worker_log = stack.procs[0]
    wait_until(
        lambda: all(j in worker_log.log_text() for j in job_ids), 20, "the worker to log every job"
    )
    notifications = listener.stop()
    stack.stop()  # every process flushes its last lines
    # The jobs really ran, were logged and notified: the checks below looked at something.
    owner = stack.redis.hget(keys.job(job_ids[0]), "owner")
    assert owner
    assert any(job_ids[0] in n for n in notifications)
    logs = {proc.log_path.name: proc.log_text() for proc in stack.procs}
    assert any(f"key={owner}" in text for text in logs.values())
    leaks = [name for name, text in logs.items() if BARE_KEY in text]
    dump = _dump(stack.redis)
    assert any(name.startswith("chatq:ratelimit") for name in dump), sorted(dump)
    leaks += [f"redis key {name}" for name in dump if BARE_KEY in name]
    leaks += [
        f"redis value of {name}"
        for name, texts in dump.items()
        if any(BARE_KEY in t for t in texts)
    ]
    leaks += [f"notification {n[:60]}" for n in notifications if BARE_KEY in n]
    assert leaks == []
    assert owner == bare_key_name(BARE_KEY)
