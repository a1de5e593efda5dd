"""A stalled upstream is `upstream_timeout` (504), whether it stalls before the first byte,
after the role chunk or between chunks; a cut connection stays `upstream_error` (502);
fakellm's garbage is `upstream_invalid_response`, not retried."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack

pytestmark = pytest.mark.long

ENV = {
    "CHATQ_UPSTREAM_FIRST_BYTE_TIMEOUT": "1",
    "CHATQ_UPSTREAM_READ_TIMEOUT": "1",
    "CHATQ_UPSTREAM_MAX_ATTEMPTS": "2",
    "CHATQ_RETRY_BASE": "0.05",
    "CHATQ_JOB_TIMEOUT": "20",
}
STALLS = {
    "before the first byte": "hang=1",
    "after the role chunk": "ttft=70",
    "between chunks": "tps=0.2,tokens=4",
}


@pytest.fixture(scope="module")
def stalling(fakellm: str) -> Iterator[Stack]:
    """A stack with one-second upstream timeouts and two attempts, on a Redis of its own."""
    server = LocalRedis().start()
    s = start_stack(server.url, fakellm, **ENV)
    yield s
    s.stop()
    server.stop()


def _upstream_calls(stack: Stack, status_label: str) -> float:
    """The worker's count of upstream calls whose status label is `status_label`."""
    bind = stack.procs[0].env["CHATQ_WORKER_METRICS_BIND"]
    text = requests.get(f"http://{bind}/metrics", timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "chatq_upstream_request_duration_seconds_count"
        and sample.labels.get("status_code") == status_label
    )


def _fakellm_requests(fakellm: str) -> int:
    stats = requests.get(fakellm.removesuffix("/v1") + "/stats", timeout=5).json()
    return int(stats["requests"])


def _chat(stack: Stack, model: str, content: str) -> requests.Response:
    body = {"model": model, "messages": [{"role": "user", "content": content}]}
    return stack.session().post(f"{stack.url}/v1/chat/completions", json=body, timeout=60)


@pytest.mark.parametrize("knobs", STALLS.values(), ids=STALLS.keys())
def test_a_stalled_upstream_is_an_upstream_timeout(stalling: Stack, knobs: str) -> None:
    timeouts_before = _upstream_calls(stalling, "timeout")
    job = stalling.submit(f"stall {knobs}", model=f"fake:{knobs}", wait=30).json()
    assert job["status"] == "failed", job
    assert job["error"]["code"] == "upstream_timeout" and job["attempts"] == 2
    result = stalling.get(job["id"], suffix="/result")
    assert result.status_code == 504
    assert result.json()["error"]["code"] == "upstream_timeout"
    chat = _chat(stalling, f"fake:{knobs}", f"chat stall {knobs}")
    assert chat.status_code == 504
    assert chat.json()["error"]["code"] == "upstream_timeout"
    # Two jobs of two attempts each, every one labelled a timeout.
    assert _upstream_calls(stalling, "timeout") - timeouts_before == 4


def test_a_cut_connection_is_an_upstream_error_not_a_timeout(stalling: Stack) -> None:
    before = _upstream_calls(stalling, "connection_error")
    job = stalling.submit("cut", model="fake:tps=50,tokens=20,drop_after=3", wait=30).json()
    assert job["status"] == "failed", job
    assert job["error"]["code"] == "upstream_error" and job["attempts"] == 2
    assert stalling.get(job["id"], suffix="/result").status_code == 502
    assert _upstream_calls(stalling, "connection_error") - before == 2


def test_a_body_that_is_not_json_fails_once_as_an_invalid_response(
    stalling: Stack, fakellm: str
) -> None:
    calls_before = _fakellm_requests(fakellm)
    invalid_before = _upstream_calls(stalling, "invalid_response")
    job = stalling.submit("garbage", model="fake:garbage=1", wait=30).json()
    assert job["status"] == "failed", job
    assert job["error"]["code"] == "upstream_invalid_response" and job["attempts"] == 1
    assert _fakellm_requests(fakellm) - calls_before == 1
    assert _upstream_calls(stalling, "invalid_response") - invalid_before == 1
    chat = _chat(stalling, "fake:garbage=1", "chat garbage")
    assert chat.status_code == 502
    assert chat.json()["error"]["code"] == "upstream_invalid_response"
