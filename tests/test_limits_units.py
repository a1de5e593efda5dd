"""The arithmetic of the keys' limits and budgets, against a real Redis (its scripts, its
clock), and the headers and errors it becomes: fast, no chatq process."""

from __future__ import annotations

import datetime
import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from chatq.admission.quotas import SETTLE, Limits, Window, duration_text
from chatq.config import settings as config
from chatq.config.limit_settings import KeyLimits
from chatq.config.settings import ConfigError, Settings
from web.admission.control import rate_headers, refusal
from worker.admission.quotas import used_by


@pytest.fixture(scope="module")
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    yield c
    c.close()


def _limits(client: redis.Redis, owner: str, **limits: int) -> Limits:
    """Limits where key name `owner` has `limits` (and nobody else any)."""
    settings = Settings(
        api_keys=((owner, "sk-unused"),),
        default_output_budget=100,
        key_limit_overrides=((owner, KeyLimits(**limits)),),
    )
    return Limits(client, settings)


def _owner() -> str:
    return "unit-" + secrets.token_hex(6)  # a key name of this test alone


@pytest.mark.parametrize(
    "seconds,text",
    [
        (0, "0s"),
        (0.0004, "1ms"),
        (0.25, "250ms"),
        (1, "1s"),
        (8.64, "8.64s"),
        (59.9991, "1m0s"),
        (60, "1m0s"),
        (86.4, "1m26.4s"),
        (360, "6m0s"),
        (3723.5, "1h2m3.5s"),
        (-3, "0s"),
    ],
)
def test_durations_are_written_as_openai_writes_its_reset_headers(
    seconds: float, text: str
) -> None:
    assert duration_text(seconds) == text


def test_key_limits_are_read_with_their_overrides() -> None:
    env = {
        "CHATQ_API_KEYS": "alice:sk-a,bob:sk-b",
        "CHATQ_KEY_TPM": "1000",
        "CHATQ_KEY_TOKENS_PER_DAY": "50000",
        "CHATQ_KEY_LIMITS": "alice=tpm:40000,rpm:60 bob=day:0,month:9",
    }
    loaded = config.load(env)
    assert loaded.key_limits == KeyLimits(tokens_per_minute=1000, tokens_per_day=50000)
    assert dict(loaded.key_limit_overrides) == {
        "alice": KeyLimits(60, 40000, 50000, 0),
        "bob": KeyLimits(0, 1000, 0, 9),
    }
    assert config.load({}).key_limits == KeyLimits() and not KeyLimits().any


@pytest.mark.parametrize(
    "raw",
    [
        "alice",
        "alice=",
        "alice=tpm",
        "alice=tpm:x",
        "alice=tpm:-1",
        "alice=hour:5",
        "carol=tpm:5",
        "=tpm:5",
    ],
)
def test_a_bad_key_limit_is_a_config_error(raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config.load({"CHATQ_API_KEYS": "alice:sk-a", "CHATQ_KEY_LIMITS": raw})
    assert "CHATQ_KEY_LIMITS" in str(caught.value) and "sk-a" not in str(caught.value)


@pytest.mark.parametrize(
    "request_,cost",
    [
        ({}, 10 + 100),  # the default output budget
        ({"max_tokens": 7}, 17),
        ({"max_completion_tokens": 9, "max_tokens": 7}, 19),
        ({"max_tokens": 7, "n": 3}, 10 + 21),
    ],
)
def test_a_request_costs_its_prompt_and_the_output_it_may_ask_for(
    client: redis.Redis, request_: dict[str, Any], cost: int
) -> None:
    assert _limits(client, _owner(), tokens_per_minute=1).cost(request_, 10) == cost


@pytest.mark.parametrize(
    "day,expected",
    [
        (0, (1970, 1, 1, 1970, 2, 1)),
        (19782, (2024, 2, 29, 2024, 3, 1)),  # 2024-02-29, a leap day
        (20453, (2025, 12, 31, 2026, 1, 1)),
        (47540, (2100, 2, 28, 2100, 3, 1)),  # 2100 is not a leap year
    ],
)
def test_the_calendar_of_the_budgets_is_the_utc_calendar(
    client: redis.Redis, day: int, expected: tuple[int, ...]
) -> None:
    script = (
        SETTLE.source().split(SETTLE.header())[0]
        + """
        local y, m, d = civil_from_days(tonumber(ARGV[1]))
        local index, start_s, end_s = month_of(tonumber(ARGV[1]))
        return {y, m, d, index, start_s, end_s}"""
    )
    y, m, d, index, start_s, end_s = client.eval(script, 0, day)
    assert datetime.date(1970, 1, 1) + datetime.timedelta(days=day) == datetime.date(y, m, d)
    assert (y, m, d) == expected[:3] and index == y * 12 + m - 1
    utc = datetime.UTC
    assert datetime.datetime.fromtimestamp(start_s, utc) == datetime.datetime(y, m, 1, tzinfo=utc)
    assert datetime.datetime.fromtimestamp(end_s, utc) == datetime.datetime(
        *expected[3:], tzinfo=utc
    )


def test_tokens_per_minute_refill_continuously_and_say_when_a_request_passes(
    client: redis.Redis,
) -> None:
    owner = _owner()
    lim = _limits(client, owner, tokens_per_minute=60)  # one token a second
    first = lim.admit(owner, "job_a", 50, 5)
    assert first.verdict == "ok" and first.remaining_tokens == 10
    assert 49 < first.tokens_full_in_s <= 50
    refused = lim.admit(owner, "job_b", 20, 5)
    assert refused.verdict == "tokens" and 9 < refused.wait_s <= 10
    assert refused.remaining_tokens == 10 and refused.day_tokens == 50  # nothing charged
    assert lim.admit(owner, "job_c", 61, 5).verdict == "too_large"
    assert lim.admit(owner, "job_d", 0, 0).verdict == "ok"  # a cache hit costs no tokens


def test_requests_per_minute_count_requests(client: redis.Redis) -> None:
    owner = _owner()
    lim = _limits(client, owner, requests_per_minute=2)
    assert [lim.admit(owner, f"job_{i}", 100, 5).verdict for i in range(2)] == ["ok", "ok"]
    third = lim.admit(owner, "job_2", 100, 5)
    assert third.verdict == "requests" and 29 < third.wait_s <= 30
    assert third.remaining_requests == 0 and third.day_requests == 2


def test_budgets_refuse_what_would_pass_them_and_a_job_is_charged_once(client: redis.Redis) -> None:
    owner = _owner()
    lim = _limits(client, owner, tokens_per_day=100, tokens_per_month=150)
    assert lim.admit(owner, "job_a", 60, 5).verdict == "ok"
    assert lim.admit(owner, "job_a", 60, 5).verdict == "held"  # the same job: not again
    assert lim.admit(owner, "job_b", 41, 5).verdict == "day"
    assert lim.admit(owner, "job_b", 40, 5).verdict == "ok"
    [seen] = lim.peek([owner])
    assert (seen.day_tokens, seen.day_requests, seen.month_tokens) == (100, 2, 100)
    other = _owner()
    month = _limits(client, other, tokens_per_month=50)
    assert month.admit(other, "job_c", 51, 5).verdict == "month"


def test_settling_replaces_what_a_job_held_by_what_it_used_once(client: redis.Redis) -> None:
    owner = _owner()
    lim = _limits(client, owner, tokens_per_minute=6000, tokens_per_day=10000)
    lim.admit(owner, "job_exact", 5000, 40)
    lim.admit(owner, "job_prompt", 500, 40)
    lim.admit(owner, "job_keep", 300, 40)
    [held] = lim.peek([owner])
    assert held.reserved_tokens == 5800 and held.remaining_tokens < 300
    assert lim.settle(owner, "job_exact", "exact", 12) == 12
    assert lim.settle(owner, "job_exact", "exact", 12) is None  # a repeat does nothing
    assert lim.settle(owner, "job_prompt", "prompt", 3) == 43
    assert lim.settle(owner, "job_keep", "keep") == 300
    assert lim.settle(owner, "job_never", "exact", 0) is None
    [after] = lim.peek([owner])
    assert after.reserved_tokens == 0 and after.day_tokens == 12 + 43 + 300
    assert 6000 - 12 - 43 - 300 <= after.remaining_tokens <= 6000


def test_peek_reports_the_utc_day_and_month_of_redis_clock(client: redis.Redis) -> None:
    owner = _owner()
    seconds, _ = client.time()
    [window] = _limits(client, owner, tokens_per_day=1).peek([owner])
    now = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    day = datetime.datetime(now.year, now.month, now.day, tzinfo=datetime.UTC)
    first = day.replace(day=1)
    following = (first + datetime.timedelta(days=32)).replace(day=1)
    assert (window.day_start, window.day_end) == (day.timestamp(), day.timestamp() + 86400)
    assert (window.month_start, window.month_end) == (first.timestamp(), following.timestamp())
    assert (window.day_tokens, window.reserved_tokens, window.verdict) == (0, 0, "peek")


def _window(verdict: str, wait_s: float = 0.0, **limits: int) -> Window:
    return Window(
        verdict,
        wait_s,
        KeyLimits(**limits),
        3,
        20.0,
        1200,
        8.64,
        70,
        2,
        900,
        9,
        0,
        0,
        86400,
        0,
        86400 * 31,
    )


def test_headers_are_openais_and_say_when_to_retry_or_not_to() -> None:
    ok = rate_headers(_window("ok", requests_per_minute=60, tokens_per_minute=6000))
    assert ok == {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "3",
        "x-ratelimit-reset-requests": "20s",
        "x-ratelimit-limit-tokens": "6000",
        "x-ratelimit-remaining-tokens": "1200",
        "x-ratelimit-reset-tokens": "8.64s",
    }
    assert rate_headers(_window("ok", tokens_per_day=5)) == {}  # no minute limit, no header
    waiting = rate_headers(_window("tokens", 1.2345, tokens_per_minute=6000))
    assert waiting["retry-after-ms"] == "1235" and "x-should-retry" not in waiting
    for verdict in ("day", "month", "too_large"):
        refused = rate_headers(_window(verdict, tokens_per_minute=6000, tokens_per_day=10))
        assert refused["x-should-retry"] == "false" and "retry-after-ms" not in refused


def test_refusals_are_openais_errors() -> None:
    tokens = refusal("alice", _window("tokens", 1.2, tokens_per_minute=6000), 2000)
    assert (tokens.status, tokens.code, tokens.type, tokens.retry_after_s) == (
        429,
        "rate_limit_exceeded",
        "tokens",
        2,
    )
    assert "TPM" in tokens.message and "1.2s" in tokens.message
    requests = refusal("alice", _window("requests", 0.2, requests_per_minute=60), 1)
    assert (requests.type, requests.retry_after_s) == ("requests", 1)
    budget = refusal("alice", _window("day", tokens_per_day=100), 50)
    assert (budget.status, budget.code, budget.type, budget.retry_after_s) == (
        429,
        "insufficient_quota",
        "insufficient_quota",
        None,
    )
    assert "used or reserved 70 of its 100 tokens today" in budget.message
    large = refusal("alice", _window("too_large", tokens_per_minute=6000), 7000)
    assert (large.code, large.retry_after_s) == ("rate_limit_exceeded", None)


def _record(**fields: Any) -> dict[str, str]:
    return {"model": "fake", "cached": "0", "attempts": "1", "result": "", **fields}


def test_what_a_job_used_is_the_upstreams_count_else_its_prompt_and_output() -> None:
    usage = json.dumps({"usage": {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}})
    assert used_by(_record(result=usage), "") == ("exact", 10)
    parts = json.dumps({"usage": {"prompt_tokens": 4, "completion_tokens": 6}})
    assert used_by(_record(result=parts), "") == ("exact", 10)
    assert used_by(_record(result=usage, cached="1"), "") == ("exact", 0)
    assert used_by(_record(result=usage, leader="job_x"), "") == ("exact", 0)
    assert used_by(_record(attempts="0"), "") == ("exact", 0)  # never called
    how, output = used_by(_record(model="gpt-4o"), "Hello there, world")
    assert (how, output) == ("prompt", 4)


def test_the_key_holding_a_job_is_found_without_its_record(client: redis.Redis) -> None:
    owner, other = _owner(), _owner()
    lim = _limits(client, owner, tokens_per_minute=600)
    lim.admit(owner, "job_erased", 120, 20)
    assert lim.holder("job_erased", [other, owner]) == owner
    assert lim.holder("job_unknown", [other, owner]) is None
    assert lim.settle(owner, "job_erased", "keep") == 120
    assert lim.holder("job_erased", [other, owner]) is None
