"""Upstream resilience and efficiency through real workers: retries, timeouts, failover,
pooled connections, the cache, single-flight and context limits."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import requests

from chatq import keys
from chatq.config.settings import load
from chatq.jobs import cache
from scripts.localredis import free_port
from tests.conftest import BOB_KEY, Stack, start_stack
from tests.inproc import in_process
from tests.procs import ALICE_KEY, base_env, start_fakellm

pytestmark = pytest.mark.long

SHORT = {
    "CHATQ_JOB_TIMEOUT": "6",
    "CHATQ_UPSTREAM_FIRST_BYTE_TIMEOUT": "1",
    "CHATQ_UPSTREAM_READ_TIMEOUT": "1",
    "CHATQ_UPSTREAM_MAX_ATTEMPTS": "3",
    "CHATQ_RETRY_BASE": "0.05",
    "CHATQ_UPSTREAM_COOLDOWN": "30",
    "CHATQ_MAX_CONTEXT_TOKENS": "300",
}


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[str, str]]:
    """A fakellm of its own (so its /stats count only this module) and a dead endpoint."""
    proc, url = start_fakellm()
    yield url, f"http://127.0.0.1:{free_port()}/v1"
    proc.stop()


def _stack(redis_url: str, db: int, upstream_urls: str) -> Stack:
    s = start_stack(redis_url.rsplit("/", 1)[0] + f"/{db}", upstream_urls, **SHORT)
    s.redis.flushdb()
    return s


@pytest.fixture(scope="module")
def short(redis_url: str, upstreams: tuple[str, str]) -> Iterator[Stack]:
    """A stack with short timeouts on the live fakellm."""
    s = _stack(redis_url, 5, upstreams[0])
    yield s
    s.stop()


@pytest.fixture
def failover(redis_url: str, upstreams: tuple[str, str]) -> Iterator[Stack]:
    """A stack whose upstream list is led by an endpoint that refuses connections."""
    live, dead = upstreams
    s = _stack(redis_url, 7, f"{dead},{live}")
    yield s
    s.stop()


def _stats(upstream: str) -> dict[str, int]:
    return dict(requests.get(upstream.removesuffix("/v1") + "/stats", timeout=5).json())


def _body(content: str, model: str = "fake", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


def test_429_is_retried_after_its_retry_after(short: Stack) -> None:
    job = short.submit("x", model="fake:status=429,fail_first=1,retry_after=1", wait=10).json()
    assert job["status"] == "completed" and job["attempts"] == 2
    # The job's own times: the second attempt waited out Retry-After (1 s), not the 0.05 s
    # backoff of CHATQ_RETRY_BASE (a lower bound: load can only lengthen it).
    assert job["completed_at"] - job["started_at"] >= 1.0


def test_a_permanent_400_fails_at_once(short: Stack) -> None:
    r = short.submit("x", model="fake:status=400", wait=10)
    job = r.json()
    # One call, no retry: `attempts` counts the calls made to the upstream.
    assert r.status_code == 200 and job["status"] == "failed" and job["attempts"] == 1
    assert job["error"]["code"] == "upstream_error" and "400" in job["error"]["message"]


@pytest.mark.parametrize("knobs", ["garbage=1", "hang=1", "tps=5,tokens=50,drop_after=3"])
def test_faulty_upstreams_end_terminal_within_the_deadline(short: Stack, knobs: str) -> None:
    r = short.submit("x", model=f"fake:{knobs}", wait=20)
    job = r.json()
    # 200: the job ended (by its 6 s CHATQ_JOB_TIMEOUT at the latest) before the 20 s wait did.
    assert r.status_code == 200 and job["status"] == "failed", job
    assert 1 <= job["attempts"] <= int(SHORT["CHATQ_UPSTREAM_MAX_ATTEMPTS"])
    assert job["error"]["code"] in (
        "upstream_error",
        "upstream_timeout",
        "upstream_invalid_response",
    )
    assert "Traceback" not in json.dumps(job)


def test_a_failing_endpoint_is_skipped_and_cools_down(failover: Stack) -> None:
    jobs = [failover.submit(f"via the live one {i}", wait=10).json() for i in range(6)]
    assert [j["status"] for j in jobs] == ["completed"] * 6
    assert len(list(failover.redis.scan_iter(keys.cooldown("*")))) == 1
    bind = failover.procs[0].env["CHATQ_WORKER_METRICS_BIND"]
    metrics = requests.get(f"http://{bind}/metrics", timeout=5).text
    assert "chatq_upstream_cooldowns_total" in metrics
    # Once cooling, the dead endpoint is not even tried: one attempt per job.
    assert [failover.submit(f"after {i}", wait=10).json()["attempts"] for i in range(5)] == [1] * 5


def test_identical_concurrent_submissions_reach_the_upstream_once(
    short: Stack, upstreams: tuple[str, str]
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    # The module's fakellm, its count zeroed: no other test runs while the count is taken.
    upstream = upstreams[0]
    requests.post(upstream.removesuffix("/v1") + "/stats/reset", timeout=5).raise_for_status()
    body = _body(f"coalesce {time.time()}", "fake:ttft=0.5,tps=50,tokens=30", temperature=0)
    session = short.session()
    url = f"{short.url}/v1/jobs"
    with ThreadPoolExecutor(50) as pool:
        posted = list(pool.map(lambda _: session.post(url, json=body, timeout=30), range(100)))
        ids = [r.json()["id"] for r in posted]
        done = list(pool.map(lambda i: short.get(i, wait=20).json(), ids))
    assert len(set(ids)) == 100
    assert {j["status"] for j in done} == {"completed"}
    assert len({j["output_text"] for j in done}) == 1
    # One leader with one attempt; every other job followed it or hit the cache.
    assert sorted(j["attempts"] for j in done) == [0] * 99 + [1]
    assert _stats(upstream)["requests"] == 1


def test_a_repeated_deterministic_request_is_a_cache_hit(short: Stack) -> None:
    body = _body(f"cache me {time.time()}", temperature=0)
    first = short.session().post(f"{short.url}/v1/jobs?wait=10", json=body, timeout=20).json()
    r = short.session().post(f"{short.url}/v1/jobs", json=body, timeout=20)
    # 200 without a wait: answered at submit, completed, never queued.
    assert r.status_code == 200
    hit = r.json()
    assert hit["cached"] is True and hit["attempts"] == 0 and hit["id"] != first["id"]
    assert hit["result"] == first["result"] and hit["output_text"] == first["output_text"]
    # The cache is per key: another key's identical request runs on its own.
    other = short.session(BOB_KEY).post(f"{short.url}/v1/jobs", json=body, timeout=20).json()
    assert other["cached"] is False


def test_cache_control_no_cache_no_store_and_max_age(short: Stack) -> None:
    s = short.session()
    body = _body(f"controls {time.time()}", temperature=0)
    s.post(
        f"{short.url}/v1/jobs?wait=10", json=body, headers={"Cache-Control": "no-store"}, timeout=20
    )
    second = s.post(f"{short.url}/v1/jobs", json=body, timeout=20)
    assert second.status_code == 202
    # Ended, and so cached: no-cache must still not be answered from it.
    ended = s.get(f"{short.url}/v1/jobs/{second.json()['id']}", params={"wait": 10}, timeout=20)
    assert ended.json()["status"] == "completed"
    fresh = s.post(
        f"{short.url}/v1/jobs", json=body, headers={"Cache-Control": "no-cache"}, timeout=20
    )
    assert fresh.status_code == 202
    warm = _body(f"warm {time.time()}", temperature=0.9)
    s.post(f"{short.url}/v1/jobs?wait=10", json=warm, timeout=20)
    assert s.post(f"{short.url}/v1/jobs", json=warm, timeout=20).status_code == 202
    s.post(
        f"{short.url}/v1/jobs?wait=10",
        json=warm,
        headers={"Cache-Control": "max-age=60"},
        timeout=20,
    )
    assert (
        s.post(
            f"{short.url}/v1/jobs", json=warm, headers={"Cache-Control": "max-age=60"}, timeout=20
        ).json()["cached"]
        is True
    )


def test_context_over_the_limit_is_422_naming_both_numbers(short: Stack) -> None:
    body = _body("word " * 400)
    r = short.session().post(f"{short.url}/v1/jobs", json=body, timeout=20)
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "context_length_exceeded" and "300" in err["message"]
    assert any(ch.isdigit() for ch in err["message"].replace("300", ""))


def test_truncate_oldest_keeps_the_system_message_and_newest_turns(short: Stack) -> None:
    messages = [{"role": "system", "content": "be brief"}]
    for i in range(30):
        messages += [
            {"role": "user", "content": f"old question {i} " + "pad " * 20},
            {"role": "assistant", "content": "old answer " + "pad " * 20},
        ]
    messages.append({"role": "user", "content": "the newest question"})
    headers = {"Chatq-Context-Overflow": "truncate_oldest"}
    r = short.session().post(
        f"{short.url}/v1/jobs?wait=10",
        headers=headers,
        timeout=20,
        json={"model": "fake", "messages": messages},
    )
    assert r.status_code == 200 and r.json()["output_text"] == "the newest question"
    stored = json.loads(short.redis.hget(keys.job(r.json()["id"]), "request"))
    kept = stored["messages"]
    assert kept[0]["role"] == "system" and kept[-1]["content"] == "the newest question"
    assert 2 < len(kept) < len(messages)
    bad = short.session().post(
        f"{short.url}/v1/jobs",
        headers={"Chatq-Context-Overflow": "x"},
        json={"model": "fake", "messages": messages},
        timeout=20,
    )
    assert bad.status_code == 400


def test_a_cache_hit_never_reaches_celery(redis_url: str, fakellm: str) -> None:
    # The web in process, with no worker anywhere: a hit is answered from the cache alone.
    db = redis_url.rsplit("/", 1)[0] + "/6"
    client = redis.Redis.from_url(db, decode_responses=True)
    client.flushdb()
    body = _body("seeded", temperature=0)
    result = {
        "id": "chatcmpl-seed",
        "object": "chat.completion",
        "created": 1,
        "model": "fake",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "from the cache"},
            }
        ],
    }
    client.set(keys.cache(cache.cache_key({**body}, "alice")), json.dumps(result), ex=60)
    auth = {"Authorization": f"Bearer {ALICE_KEY}"}
    with in_process(load(base_env(db, fakellm))) as app:
        web = app.test_client()
        r = web.post("/v1/jobs", json=body, headers=auth)
        assert r.status_code == 200 and r.json is not None, r.text
        assert r.json["output_text"] == "from the cache"
        assert client.llen("interactive") == 0 and client.llen("batch") == 0
        events = web.get(f"/v1/jobs/{r.json['id']}/events", headers=auth).json
        assert events is not None and events["done"] is True
    client.close()


# 600 calls through at most 105 connections already rules out a connection per call; the
# long run (slow) shows that the pool holds over 3,000 (`make bench` counts 10,000).
@pytest.mark.parametrize(
    "count",
    [
        600,
        pytest.param(3_000, marks=pytest.mark.slow, id="3000"),
    ],
)
def test_pooled_connections_serve_many_calls(
    short: Stack, upstreams: tuple[str, str], count: int
) -> None:
    import asyncio

    import aiohttp

    requests.post(upstreams[0].removesuffix("/v1") + "/stats/reset", timeout=5)
    headers = dict(short.session().headers)

    async def main() -> list[int]:
        async with aiohttp.ClientSession(
            headers=headers, connector=aiohttp.TCPConnector(limit=200)
        ) as http:

            async def one(i: int) -> int:
                async with http.post(
                    f"{short.url}/v1/jobs", params={"wait": "30"}, json=_body(f"pool {i}")
                ) as r:
                    return r.status

            return await asyncio.gather(*(one(i) for i in range(count)))

    statuses = asyncio.run(main())
    assert statuses.count(200) == count
    stats = _stats(upstreams[0])
    assert stats["requests"] >= count
    # One connection per concurrent slot at most (default 100 slots), never one per call.
    assert stats["connections_opened"] <= 100 + 5
