"""A worker process's side of pacing (worker/upstream/pacing.py) on a real Redis: what it learned
from an answer reaches the shared buckets whatever order its concurrent calls arrive in."""

from __future__ import annotations

import time
import uuid

import redis

from chatq import keys
from chatq.config.settings import Settings
from worker.jobs.running import Handle
from worker.upstream.attempts import Attempt
from worker.upstream.endpoints import endpoint_id
from worker.upstream.pacing import Pacer

REQUEST = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
# 10 requests a refill of 6 s, 9 of them left.
HEADERS = {
    "x-ratelimit-limit-requests": "10",
    "x-ratelimit-remaining-requests": "9",
    "x-ratelimit-reset-requests": "6s",
}


def _handle() -> Handle:
    return Handle("job", "run", time.monotonic() + 30)


def test_a_call_that_finds_the_shared_limits_gone_brings_them_back(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    pacer, url = Pacer(Settings(), client), f"http://{uuid.uuid4().hex}.invalid/v1"
    state = keys.pacing(endpoint_id(url))
    pacer.after(url, Attempt(ok=True, status=200, rate_headers=HEADERS, sent_at=time.monotonic()))
    assert pacer.before(url, REQUEST, _handle())
    assert client.hget(state, "rq_limit") == b"10"
    # Gone: in a worker, a concurrent call reaching Redis before the one that carried the
    # answer's limits finds them so (and so does any call after Redis lost its data).
    client.delete(state)
    assert pacer.before(url, REQUEST, _handle())
    assert client.hget(state, "rq_limit") == b"10"
    assert pacer.active(url)
