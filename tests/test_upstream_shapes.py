"""An upstream that streams wrong-shaped chunks: one call, a failed job, a live worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.shapes_upstream import BAD_SHAPES, ShapesUpstream

ENV = {
    "CHATQ_UPSTREAM_MAX_ATTEMPTS": "4",
    "CHATQ_RETRY_BASE": "0.05",
    "CHATQ_JOB_TIMEOUT": "30",
}


@pytest.fixture(scope="module")
def shapes() -> Iterator[ShapesUpstream]:
    """The small upstream of tests/shapes_upstream.py."""
    upstream = ShapesUpstream()
    yield upstream
    upstream.stop()


@pytest.fixture(scope="module")
def shaped(shapes: ShapesUpstream) -> Iterator[Stack]:
    """A stack calling only the small upstream, on a Redis of its own."""
    server = LocalRedis().start()
    s = start_stack(server.url, shapes.url, **ENV)
    yield s
    s.stop()
    server.stop()


@pytest.mark.parametrize("shape", BAD_SHAPES)
def test_a_wrong_shaped_stream_fails_the_job_once_and_the_worker_goes_on(
    shaped: Stack, shapes: ShapesUpstream, shape: str
) -> None:
    calls = shapes.calls_to(shape)
    job = shaped.submit(f"shape {shape}", model=f"shape:{shape}", wait=25).json()
    assert job["status"] == "failed", job
    assert job["error"]["code"] == "upstream_invalid_response"
    assert "Traceback" not in job["error"]["message"]
    assert job["attempts"] == 1 and shapes.calls_to(shape) == calls + 1
    result = shaped.get(job["id"], suffix="/result")
    assert result.status_code == 502
    assert result.json()["error"]["code"] == "upstream_invalid_response"
    worker = shaped.procs[0]
    assert worker.alive()
    before = shapes.calls_to("ok")
    nxt = shaped.submit(f"after {shape}", model="shape:ok", wait=25).json()
    assert (nxt["status"], nxt["output_text"]) == ("completed", "fine")
    assert shapes.calls_to("ok") == before + 1


def test_chat_completions_answers_502_for_a_wrong_shaped_stream(
    shaped: Stack, shapes: ShapesUpstream
) -> None:
    calls = shapes.calls_to("index_null")
    body = {"model": "shape:index_null", "messages": [{"role": "user", "content": "front"}]}
    r = shaped.session().post(f"{shaped.url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 502
    assert r.json()["error"]["code"] == "upstream_invalid_response"
    assert shapes.calls_to("index_null") == calls + 1
