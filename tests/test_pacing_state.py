"""The shared pacing buckets (chatq/admission/pacing.lua through chatq/admission/pacing.py) on a
real Redis, and the duration notation of OpenAI's headers."""

from __future__ import annotations

import uuid

import pytest
import redis

from chatq import keys
from chatq.admission.pacing import Limit, Pacing, Seen, parse_duration_s
from fakellm.ratelimit import go_duration


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url, decode_responses=True)


def _endpoint() -> str:
    return uuid.uuid4().hex[:16]


def test_nothing_known_is_sent_at_once_and_writes_nothing(client: redis.Redis) -> None:
    ep = _endpoint()
    turn = Pacing(client, 0, 0).take(ep, 100, 10.0)
    assert (turn.known, turn.taken, turn.wait_s) == (False, True, 0.0)
    assert not client.exists(keys.pacing(ep))


def test_configured_rpm_spreads_the_calls_past_the_bucket(client: redis.Redis) -> None:
    ep, pacing = _endpoint(), Pacing(client, 60, 0)  # 60 a minute: one a second
    waits = [pacing.take(ep, 10, 30.0).wait_s for _ in range(60)]
    # The bucket is kept 5 % short of the limit (a cushion for calls that arrive late).
    assert waits[:57] == [0.0] * 57
    # Each waiting call is given its own turn, one second apart.
    assert [round(w) for w in waits[57:]] == [1, 2, 3]
    assert 0 < client.ttl(keys.pacing(ep)) <= 3600


def test_a_call_that_cannot_wait_long_enough_takes_nothing(client: redis.Redis) -> None:
    ep, pacing = _endpoint(), Pacing(client, 60, 0)
    for _ in range(57):
        pacing.take(ep, 0, 30.0)
    refused = pacing.take(ep, 0, 0.2)
    assert (refused.known, refused.taken) == (True, False)
    # Its turn is under a second away (the bucket refills while the 57 calls are made: less
    # on a loaded machine), more than the 0.2 s it could wait.
    assert 0.2 < refused.wait_s <= 1.01
    # Nothing was taken: the next call gets the same turn, not the one after (a second later).
    following = pacing.take(ep, 0, 30.0)
    assert following.taken and refused.wait_s - 0.2 < following.wait_s <= refused.wait_s


def test_limits_and_rate_are_learned_from_an_answer(client: redis.Redis) -> None:
    ep, pacing = _endpoint(), Pacing(client, 0, 0)
    # 10 requests that refill in 5 s (2 per second), none left; tokens plenty.
    seen = Seen(Limit(10, 0, 5.0), Limit(10_000, 9_000, 6.0))
    first = pacing.take(ep, 100, 30.0, seen)
    assert first.known and first.taken
    assert 0.45 < first.wait_s <= 0.51
    state = client.hgetall(keys.pacing(ep))
    assert int(state["rq_limit"]) == 10 and float(state["rq_rate"]) == pytest.approx(2.0)
    assert float(state["tk_rate"]) == pytest.approx(1000 / 6)


def test_tokens_per_minute_pace_big_calls(client: redis.Redis) -> None:
    ep, pacing = _endpoint(), Pacing(client, 0, 600)  # 10 tokens a second, 570 at once
    assert pacing.take(ep, 520, 60.0).wait_s == 0.0
    assert pacing.take(ep, 100, 60.0).wait_s == pytest.approx(5.0, abs=0.05)
    # A call larger than the bucket waits for a full bucket, not for ever.
    assert pacing.take(ep, 5000, 600.0).wait_s == pytest.approx(62.0, abs=0.1)


def test_a_429_without_limits_holds_every_call(client: redis.Redis) -> None:
    ep, pacing = _endpoint(), Pacing(client, 60, 0)
    pacing.learn(ep, Seen(None, None, 0.0, hold_s=2.0))
    assert pacing.take(ep, 0, 30.0).wait_s == pytest.approx(2.0, abs=0.05)


def test_an_answer_lowers_the_level_never_raises_it(client: redis.Redis) -> None:
    ep, pacing = _endpoint(), Pacing(client, 60, 0)
    pacing.learn(ep, Seen(Limit(60, 0, 60.0), None))  # someone else used it all
    assert round(pacing.take(ep, 0, 30.0).wait_s) == 1
    pacing.learn(ep, Seen(Limit(60, 60, 0.0), None))  # a stale answer: still our count
    assert round(pacing.take(ep, 0, 30.0).wait_s) == 2


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0s", 0.0), ("120ms", 0.12), ("1.5s", 1.5), ("6m0s", 360.0), ("1h2m3s", 3723.0), ("2", 2.0)],
)
def test_durations_read_as_openai_writes_them(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "soon", "5x", "1s later", "inf", "nan", "1e400", "\u0663s", "\u00b2", "-1s"]
)
def test_unreadable_durations_are_none(text: str) -> None:
    assert parse_duration_s(text) is None


@pytest.mark.parametrize("seconds", [0.0, 0.0004, 0.12, 0.999, 1.0, 8.64, 59.9, 360.0, 3725.5])
def test_fakellm_durations_read_back(seconds: float) -> None:
    assert parse_duration_s(go_duration(seconds)) == pytest.approx(seconds, abs=0.001)
