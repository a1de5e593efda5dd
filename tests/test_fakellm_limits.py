"""fakellm's RPM and TPM limits: OpenAI's headers on every answer, its 429, its counters."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from chatq.admission.pacing import parse_duration_s
from tests.procs import UPSTREAM_KEY, start_fakellm

AUTH = {"Authorization": f"Bearer {UPSTREAM_KEY}"}
KINDS = ("requests", "tokens")


@pytest.fixture(scope="module")
def limited() -> Iterator[str]:
    """A fakellm limited to 3 requests and 100 tokens a minute; answers its root URL."""
    proc, url = start_fakellm("--rpm", "3", "--tpm", "100")
    yield url.removesuffix("/v1")
    proc.stop()


def _limits(root: str, **wanted: Any) -> None:
    requests.post(root + "/limits", json=wanted, timeout=5).raise_for_status()
    requests.post(root + "/stats/reset", timeout=5).raise_for_status()


def _chat(root: str, words: int = 2, max_tokens: int = 10, stream: bool = False) -> Any:
    body = {
        "model": "fake",
        "messages": [{"role": "user", "content": " ".join(["word"] * words)}],
        "max_tokens": max_tokens,
        "stream": stream,
    }
    return requests.post(root + "/v1/chat/completions", json=body, headers=AUTH, timeout=5)


def test_every_answer_carries_openais_headers(limited: str) -> None:
    _limits(limited, rpm=3, tpm=100)
    first, streamed = _chat(limited), _chat(limited, stream=True)
    assert first.status_code == streamed.status_code == 200
    h = first.headers
    assert (h["x-ratelimit-limit-requests"], h["x-ratelimit-limit-tokens"]) == ("3", "100")
    # One request, and 2 prompt words + max_tokens 10 tokens, taken on arrival.
    assert (h["x-ratelimit-remaining-requests"], h["x-ratelimit-remaining-tokens"]) == ("2", "88")
    assert parse_duration_s(h["x-ratelimit-reset-requests"]) == pytest.approx(20.0, abs=0.1)
    assert parse_duration_s(h["x-ratelimit-reset-tokens"]) == pytest.approx(7.2, abs=0.1)
    assert streamed.headers["x-ratelimit-remaining-requests"] == "1"


def test_over_the_rpm_is_a_429_shaped_like_openais(limited: str) -> None:
    _limits(limited, rpm=3, tpm=0)
    assert [_chat(limited).status_code for _ in range(3)] == [200] * 3
    refused = _chat(limited)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
    assert "Limit 3, Used 3, Requested 1" in error["message"]
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert "x-ratelimit-limit-tokens" not in refused.headers
    wait_ms = int(refused.headers["retry-after-ms"])
    assert 19_000 < wait_ms <= 20_000
    assert refused.headers["Retry-After"] == "20"
    stats = requests.get(limited + "/stats", timeout=5).json()
    assert (stats["requests"], stats["rate_limited"]) == (4, 1)


def test_over_the_tpm_is_a_429_of_type_tokens(limited: str) -> None:
    _limits(limited, rpm=0, tpm=100)
    assert _chat(limited, words=10, max_tokens=80).status_code == 200
    refused = _chat(limited, words=10, max_tokens=20)
    assert refused.status_code == 429
    assert refused.json()["error"]["type"] == "tokens"
    assert refused.headers["x-ratelimit-remaining-tokens"] == "10"
    # 20 more tokens refill in 12 s at 100 a minute.
    assert int(refused.headers["retry-after-ms"]) == pytest.approx(12_000, abs=100)


def test_a_shorter_window_refills_sooner_and_limits_can_be_lifted(limited: str) -> None:
    # Long enough for three calls on a loaded machine (0.2 s was not, under CI's 4 workers).
    _limits(limited, rpm=2, tpm=0, window_s=4.0)
    answers = [_chat(limited) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    wait_ms = int(answers[2].headers["retry-after-ms"])
    assert 0 < wait_ms <= 2_000  # one request of 2 comes back in 2 s, not in 30
    time.sleep(wait_ms / 1000 + 0.05)
    assert _chat(limited).status_code == 200
    got = requests.get(limited + "/limits", timeout=5).json()
    assert got == {"rpm": 2, "tpm": 0, "window_s": 4.0}
    _limits(limited, rpm=0, tpm=0)
    answer = _chat(limited)
    assert answer.status_code == 200
    assert not [h for h in answer.headers if h.lower().startswith("x-ratelimit-")]


def test_bad_limits_are_a_400(limited: str) -> None:
    for wanted in ({"rpm": -1}, {"window_s": 0}, {"rpm": "many"}):
        assert requests.post(limited + "/limits", json=wanted, timeout=5).status_code == 400
