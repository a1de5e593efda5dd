"""One trace from the client to the upstream: the client's `traceparent` through the web, the
job's record and run message, the worker and each upstream attempt (fakellm records the
`traceparent` it received), spans exported over OTLP/HTTP to a receiver of the module's own; a
retried attempt and a job taken over after its worker was killed stay in the trace."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from chatq.webhooks.events import new_secret
from scripts.localredis import LocalRedis
from tests.batchkit import jsonl, request_line, upload, wait_ended
from tests.conftest import Stack, start_stack
from tests.otlp_receiver import OtlpReceiver, Span
from tests.procs import BOB_KEY, start_worker, wait_until
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    """The module's span receiver: each test reads the spans of its own traces."""
    receiver = OtlpReceiver()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def hooks() -> Iterator[Receiver]:
    """The module's webhook receiver: bob's jobs announce their end to it."""
    r = Receiver()
    yield r
    r.stop()


def _start_traced(redis_url: str, fakellm: str, otlp: OtlpReceiver, hooks: Receiver) -> Stack:
    """A stack exporting its spans to `otlp` within a tenth of a second of their end; bob's
    jobs announce their end to `hooks`."""
    return start_stack(
        redis_url,
        fakellm,
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url,
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_SERVICE_NAME="",
        CHATQ_LEASE="2",
        CHATQ_WEBHOOKS=f"bob={hooks.url('/hooks')}#{new_secret()}",
    )


@pytest.fixture(scope="module")
def traced(fakellm: str, otlp: OtlpReceiver, hooks: Receiver) -> Iterator[Stack]:
    """The module's traced stack, on a Redis of its own; every test's spans are those of its
    own trace ids."""
    server = LocalRedis().start()
    s = _start_traced(server.url, fakellm, otlp, hooks)
    yield s
    s.stop()
    server.stop()


@pytest.fixture
def traced_alone(
    own_redis_url: str, fakellm: str, otlp: OtlpReceiver, hooks: Receiver
) -> Iterator[Stack]:
    """A traced stack of the test's own, for a test that kills its worker."""
    s = _start_traced(own_redis_url, fakellm, otlp, hooks)
    yield s
    s.stop()


def _client_traceparent() -> tuple[str, str, str]:
    """(traceparent, its trace id, its span id) of a client's span."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def _submit(
    s: Stack, model: str, traceparent: str = "", content: str = "", **more: Any
) -> requests.Response:
    """POST /v1/jobs; `more`: the key (`key=`) and query parameters."""
    body = {"model": model, "messages": [{"role": "user", "content": content or "trace me"}]}
    headers = {"traceparent": traceparent, "tracestate": "client=1"} if traceparent else {}
    session = s.session(more.pop("key")) if "key" in more else s.session()
    url = f"{s.url}/v1/jobs"
    response = session.post(url, json=body, headers=headers, params=more, timeout=30)
    assert response.status_code in (200, 202), response.text
    return response


def _finished(s: Stack, job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = s.get(job_id, wait=30).json()
    assert job["status"] == "completed", job
    return job


def _upstream_traceparents(fakellm: str, trace_id: str) -> list[str]:
    """The traceparents fakellm received in the trace `trace_id`."""
    url = fakellm.removesuffix("/v1") + "/stats/traceparents"
    received = requests.get(url, timeout=5).json()["traceparents"]
    return [t for t in received if t.split("-")[1] == trace_id]


def _spans(otlp: OtlpReceiver, trace_id: str, name: str, count: int) -> list[Span]:
    """The spans named `name` of the trace, once `count` of them have come."""
    wait_until(
        lambda: len([s for s in otlp.trace(trace_id) if s.name == name]) >= count,
        15,
        f"{count} span(s) {name!r} of trace {trace_id}",
    )
    return [s for s in otlp.trace(trace_id) if s.name == name]


def test_one_trace_from_the_client_through_the_web_and_worker_to_the_upstream(
    traced: Stack, otlp: OtlpReceiver, fakellm: str
) -> None:
    traceparent, trace_id, client_span = _client_traceparent()
    created = _submit(traced, "fake:tokens=5", traceparent)
    assert created.headers["Chatq-Trace-Id"] == trace_id
    job = _finished(traced, created.json()["id"])
    assert job["trace_id"] == trace_id
    [server] = _spans(otlp, trace_id, "POST /v1/jobs", 1)
    assert (server.kind, server.parent_id, server.service) == ("server", client_span, "chatq-web")
    assert server.attributes["http.response.status_code"] == 202
    [run] = _spans(otlp, trace_id, "process chatq.run_job", 1)
    [queued] = _spans(otlp, trace_id, "chatq queued", 1)
    [claim] = _spans(otlp, trace_id, "chatq claim", 1)
    assert run.parent_id == queued.parent_id == claim.parent_id == server.span_id
    assert (run.kind, run.service) == ("consumer", "chatq-worker")
    [call] = _spans(otlp, trace_id, "chat fake:tokens=5", 1)
    assert (call.kind, call.parent_id) == ("client", run.span_id)
    assert call.attributes["gen_ai.operation.name"] == "chat"
    assert call.attributes["gen_ai.request.model"] == "fake:tokens=5"
    assert call.attributes["gen_ai.usage.output_tokens"] == 5
    assert call.attributes["http.response.status_code"] == 200
    # The upstream continues the trace from chatq's own span of its call.
    [upstream] = _upstream_traceparents(fakellm, trace_id)
    assert upstream.split("-")[2] == call.span_id


def test_a_job_retried_after_a_503_has_each_attempt_in_its_trace(
    traced: Stack, otlp: OtlpReceiver, fakellm: str
) -> None:
    traceparent, trace_id, _ = _client_traceparent()
    model = "fake:status=503,fail_first=1,retry_after=0"
    job = _finished(traced, _submit(traced, model, traceparent).json()["id"])
    assert (job["trace_id"], job["attempts"]) == (trace_id, 2)
    calls = _spans(otlp, trace_id, f"chat {model}", 2)
    by_attempt = {c.attributes["chatq.attempt"]: c for c in calls}
    assert by_attempt[1].attributes["http.response.status_code"] == 503
    assert by_attempt[1].attributes["error.type"] == "503"
    assert by_attempt[2].attributes["http.response.status_code"] == 200
    [run] = _spans(otlp, trace_id, "process chatq.run_job", 1)
    assert run.events == ("chatq.retry",)
    sent = _upstream_traceparents(fakellm, trace_id)
    assert [t.split("-")[2] for t in sent] == [by_attempt[1].span_id, by_attempt[2].span_id]


def test_a_job_taken_over_after_its_worker_was_killed_stays_in_its_trace(
    traced_alone: Stack, otlp: OtlpReceiver, fakellm: str
) -> None:
    traceparent, trace_id, _ = _client_traceparent()
    model = "fake:ttft=0.2,tps=10,tokens=30"
    job_id = _submit(traced_alone, model, traceparent).json()["id"]
    wait_until(lambda: traced_alone.get(job_id).json()["output_text"], 20, "the job streaming")
    traced_alone.procs[0].kill()
    traced_alone.procs.append(start_worker(traced_alone.env, ""))
    job = _finished(traced_alone, job_id)
    assert job["trace_id"] == trace_id
    # The killed worker's batch of spans died with it; the new worker's run is in the trace.
    [run] = _spans(otlp, trace_id, "process chatq.run_job", 1)
    [call] = _spans(otlp, trace_id, f"chat {model}", 1)
    assert call.parent_id == run.span_id
    sent = _upstream_traceparents(fakellm, trace_id)
    assert len(sent) == 2 and sent[-1].split("-")[2] == call.span_id


def test_a_job_without_a_traceparent_gets_a_trace_of_its_own(
    traced: Stack, otlp: OtlpReceiver, fakellm: str
) -> None:
    created = _submit(traced, "fake", content="no trace of mine")
    trace_id = created.headers["Chatq-Trace-Id"]
    job = _finished(traced, created.json()["id"])
    assert job["trace_id"] == trace_id and len(trace_id) == 32
    [server] = _spans(otlp, trace_id, "POST /v1/jobs", 1)
    assert server.parent_id == ""
    assert len(_upstream_traceparents(fakellm, trace_id)) == 1


def test_a_long_poll_is_a_span_of_its_request_with_its_wakes(
    traced: Stack, otlp: OtlpReceiver
) -> None:
    traceparent, trace_id, _ = _client_traceparent()
    created = _submit(traced, "fake:ttft=0.3", traceparent, wait="20")
    assert created.json()["status"] == "completed"
    [server] = _spans(otlp, trace_id, "POST /v1/jobs", 1)
    [poll] = _spans(otlp, trace_id, "chatq long-poll", 1)
    assert poll.parent_id == server.span_id
    assert "chatq.wake" in poll.events and poll.attributes["chatq.wakes"] >= 1


def test_a_webhook_delivery_is_a_client_span(
    traced: Stack, otlp: OtlpReceiver, hooks: Receiver
) -> None:
    _submit(traced, "fake", content="announce me", key=BOB_KEY)
    hooks.wait_for("/hooks", 1)
    wait_until(lambda: any(s.name == "POST webhook" for s in otlp.spans), 15, "the delivery's span")
    span = next(s for s in otlp.spans if s.name == "POST webhook")
    assert (span.kind, span.service) == ("client", "chatq-worker")
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes["chatq.webhook.outcome"] == "delivered"


def test_a_batch_s_lines_have_traces_of_their_own_linked_to_the_batch(
    traced: Stack, otlp: OtlpReceiver
) -> None:
    traceparent, trace_id, _ = _client_traceparent()
    lines = [request_line(f"line-{i}", f"line {i}") for i in range(3)]
    file_id = upload(traced.url, jsonl(lines)).json()["id"]
    body = {
        "input_file_id": file_id,
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    headers = {"traceparent": traceparent}
    created = traced.session().post(
        f"{traced.url}/v1/batches", json=body, headers=headers, timeout=30
    )
    assert created.status_code == 200, created.text
    assert wait_ended(traced.url, created.json()["id"])["request_counts"]["completed"] == 3
    [server] = _spans(otlp, trace_id, "POST /v1/batches", 1)
    wait_until(
        lambda: len(_linked_runs(otlp, (trace_id, server.span_id))) == 3, 15, "the lines' runs"
    )
    runs = _linked_runs(otlp, (trace_id, server.span_id))
    assert len({run.trace_id for run in runs} | {trace_id}) == 4  # each line a trace of its own


def _linked_runs(otlp: OtlpReceiver, link: tuple[str, str]) -> list[Span]:
    with otlp.lock:
        return [s for s in otlp.spans if s.name == "process chatq.run_job" and link in s.links]


def test_with_tracing_off_the_trace_is_still_carried_to_the_upstream(
    stack: Stack, fakellm: str
) -> None:
    traceparent, trace_id, client_span = _client_traceparent()
    created = _submit(stack, "fake", traceparent, content="off but carried")
    assert created.headers["Chatq-Trace-Id"] == trace_id
    assert _finished(stack, created.json()["id"])["trace_id"] == trace_id
    [sent] = _upstream_traceparents(fakellm, trace_id)
    assert sent.split("-")[2] != client_span  # an attempt's span id of its own
    assert sent.endswith("-01")
    fresh = _submit(stack, "fake", content="off and fresh")
    assert len(fresh.headers["Chatq-Trace-Id"]) == 32
    invalid = f"00-{trace_id.upper()}-{client_span}-01"
    ignored = _submit(stack, "fake", invalid, content="an invalid traceparent")
    assert ignored.headers["Chatq-Trace-Id"] not in (trace_id, trace_id.upper())
