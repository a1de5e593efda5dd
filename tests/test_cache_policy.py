"""The cache's policy: `max-age` is capped at CHATQ_CACHE_TTL, and CHATQ_CACHE_TTL=0 turns
the cache (and single-flight) off, so that every request reaches the upstream."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from chatq.jobs.cache import CachePolicy, policy
from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.procs import start_fakellm

DETERMINISTIC = {"temperature": 0}
SAMPLED = {"temperature": 0.7}
THIRTY_ONE_YEARS_S = 31 * 365 * 86400


@pytest.mark.parametrize(
    "header",
    [
        f"max-age={THIRTY_ONE_YEARS_S}",
        "max-age=999999999",
        "max-age=" + "9" * 40,
        'public, max-age="86400"',
    ],
)
def test_a_max_age_over_the_cache_ttl_is_capped_at_it(header: str) -> None:
    assert policy(SAMPLED, header, 3600) == CachePolicy(lookup=True, store_ttl_s=3600)


def test_a_max_age_under_the_cache_ttl_is_kept() -> None:
    assert policy(SAMPLED, "max-age=60", 3600).store_ttl_s == 60
    assert policy(DETERMINISTIC, "max-age=60", 3600).store_ttl_s == 60
    assert policy(DETERMINISTIC, "", 3600).store_ttl_s == 3600


@pytest.mark.parametrize(
    "request_fields,header",
    [
        (DETERMINISTIC, ""),
        (DETERMINISTIC, "max-age=60"),
        (SAMPLED, "max-age=60"),
        (SAMPLED, f"max-age={THIRTY_ONE_YEARS_S}"),
    ],
)
def test_a_cache_ttl_of_zero_turns_caching_off_for_every_request(
    request_fields: dict[str, Any], header: str
) -> None:
    rule = policy(request_fields, header, 0)
    assert rule == CachePolicy(lookup=False, store_ttl_s=0) and not rule.cacheable


def test_no_cache_and_no_store_still_apply_under_the_cap() -> None:
    assert policy(SAMPLED, "no-store, max-age=99999", 3600) == CachePolicy(True, 0)
    assert policy(DETERMINISTIC, "no-cache", 3600) == CachePolicy(False, 3600)


# --- end to end: CHATQ_CACHE_TTL=0 on a real stack ----------------------------------------


@pytest.fixture(scope="module")
def uncached() -> Iterator[tuple[Stack, str]]:
    """A stack of its own (own Redis, own fakellm to count calls) with CHATQ_CACHE_TTL=0."""
    server = LocalRedis().start()
    upstream, upstream_url = start_fakellm()
    stack = start_stack(server.url, upstream_url, CHATQ_CACHE_TTL="0")
    yield stack, upstream_url.removesuffix("/v1")
    stack.stop()
    upstream.stop()
    server.stop()


def _upstream_calls(upstream: str) -> int:
    return int(requests.get(f"{upstream}/stats", timeout=5).json()["requests"])


def _post(stack: Stack, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    r = stack.session().post(
        f"{stack.url}/v1/jobs", json=body, params={"wait": 20}, headers=headers, timeout=30
    )
    assert r.status_code == 200, r.text
    job: dict[str, Any] = r.json()
    return job


def test_with_a_cache_ttl_of_zero_identical_requests_each_reach_the_upstream(
    uncached: tuple[Stack, str],
) -> None:
    stack, upstream = uncached
    body = {
        "model": "fake",
        "temperature": 0,
        "messages": [{"role": "user", "content": f"same {time.time_ns()}"}],
    }
    before = _upstream_calls(upstream)
    first = _post(stack, body)
    second = _post(stack, body, **{"Cache-Control": f"max-age={THIRTY_ONE_YEARS_S}"})
    assert [first["cached"], second["cached"]] == [False, False]
    assert first["output_text"] == second["output_text"]
    assert _upstream_calls(upstream) - before == 2
    assert list(stack.redis.scan_iter("chatq:*:cache:*")) == []


def test_with_a_cache_ttl_of_zero_identical_requests_in_flight_are_not_coalesced_even_with_max_age(
    uncached: tuple[Stack, str],
) -> None:
    stack, upstream = uncached
    body = {
        "model": "fake:ttft=1",
        "temperature": 0,
        "messages": [{"role": "user", "content": f"together {time.time_ns()}"}],
    }
    before = _upstream_calls(upstream)
    with ThreadPoolExecutor(2) as pool:
        jobs = list(
            pool.map(lambda _: _post(stack, body, **{"Cache-Control": "max-age=600"}), range(2))
        )
    assert [j["status"] for j in jobs] == ["completed", "completed"]
    assert [j["attempts"] for j in jobs] == [1, 1]
    assert _upstream_calls(upstream) - before == 2
