"""Pacing across real processes: a worker that has learned fakellm's limits from its headers
sends a burst at the pace they allow, instead of into a storm of 429s."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import requests

from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.procs import start_fakellm

BURST = 60
# 40 requests, refilled 10 a second: a "minute" of 4 s keeps the test short.
LIMITS = ("--rpm", "40", "--limit-window", "4")


@pytest.fixture
def limited_fakellm() -> Iterator[str]:
    proc, url = start_fakellm(*LIMITS)
    yield url
    proc.stop()


def _stack(fakellm: str, **env: str) -> Iterator[Stack]:
    server = LocalRedis().start()
    stack = start_stack(server.url, fakellm, **env)
    yield stack
    stack.stop()
    server.stop()


@pytest.fixture
def paced(limited_fakellm: str) -> Iterator[Stack]:
    yield from _stack(limited_fakellm)


def _stats(fakellm: str) -> dict[str, int]:
    return dict(requests.get(fakellm.removesuffix("/v1") + "/stats", timeout=5).json())


def _reset(fakellm: str) -> None:
    requests.post(fakellm.removesuffix("/v1") + "/stats/reset", timeout=5).raise_for_status()


def _run_burst(stack: Stack, count: int) -> list[str]:
    """Submit `count` jobs at once, then wait for each; answers their final statuses."""
    ids = [stack.submit(f"burst {i}").json()["id"] for i in range(count)]
    return [stack.get(job_id, wait=30).json()["status"] for job_id in ids]


def _worker_metrics(stack: Stack) -> str:
    bind = stack.procs[0].env["CHATQ_WORKER_METRICS_BIND"]
    return requests.get(f"http://{bind}/metrics", timeout=5).text


def test_a_burst_waits_for_its_turns_instead_of_meeting_429s(
    paced: Stack, limited_fakellm: str
) -> None:
    # One job teaches the worker the upstream's limits (from its x-ratelimit-* headers).
    assert _run_burst(paced, 1) == ["completed"]
    _reset(limited_fakellm)
    assert _run_burst(paced, BURST) == ["completed"] * BURST
    stats = _stats(limited_fakellm)
    assert stats["requests"] == BURST
    assert stats["rate_limited"] <= 1
    waits = re.search(
        r"chatq_upstream_pacing_wait_seconds_count\{[^}]*\} (\S+)", _worker_metrics(paced)
    )
    assert waits is not None and float(waits.group(1)) >= BURST


@pytest.mark.slow
def test_without_pacing_a_burst_meets_429s() -> None:
    # 40 requests refilled over a whole minute: however slowly the burst is submitted on a
    # busy machine, its last third does not fit.
    proc, fakellm = start_fakellm("--rpm", "40")
    try:
        for stack in _stack(fakellm, CHATQ_UPSTREAM_PACING="0"):
            assert _run_burst(stack, 1) == ["completed"]
            _reset(fakellm)
            _run_burst(stack, BURST)
            assert _stats(fakellm)["rate_limited"] >= BURST // 4
    finally:
        proc.stop()


@pytest.mark.slow
def test_a_cold_burst_learns_from_its_429s_and_all_complete(limited_fakellm: str) -> None:
    for stack in _stack(limited_fakellm):
        # No answer seen yet: the burst goes out at once, the 429s teach every worker.
        assert _run_burst(stack, BURST) == ["completed"] * BURST
        stats = _stats(limited_fakellm)
        assert stats["rate_limited"] <= BURST
        assert stats["requests"] - stats["rate_limited"] == BURST


@pytest.mark.slow
def test_configured_limits_pace_and_a_turn_past_the_deadline_fails_at_once(
    fakellm: str,
) -> None:
    # An upstream that sends no limits, configured at one request a minute.
    for stack in _stack(fakellm, CHATQ_UPSTREAM_RPM="1", CHATQ_JOB_TIMEOUT="20"):
        first = stack.submit("first", wait=10).json()
        assert first["status"] == "completed"
        second = stack.submit("second", wait=10).json()
        # Its turn would come a minute later, past its 20 s deadline: it waits for nothing.
        assert second["status"] == "failed"
        assert second["error"]["code"] == "upstream_timeout"
        assert "no turn before its deadline" in second["error"]["message"]
        assert second["completed_at"] - second["started_at"] < 5
        waits = re.search(
            r"chatq_upstream_pacing_wait_seconds_count\{[^}]*\} (\S+)", _worker_metrics(stack)
        )
        assert waits is not None and float(waits.group(1)) == 1
