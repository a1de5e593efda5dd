"""The OpenAI-compatible front door, used through the official `openai` package."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
import requests

from tests import openai_schemas
from tests.conftest import Stack
from tests.procs import ALICE_KEY

pytestmark = pytest.mark.long


def _client(stack: Stack, key: str = ALICE_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key=key, max_retries=0, timeout=60)


def _lenient(name: str, instance: Any) -> None:
    # Bodies passed through from the upstream are validated as OpenAI documents them,
    # without forbidding fields a real upstream may add.
    openai_schemas.validator(name, strict=False).validate(instance)


def test_sdk_non_streaming_gets_the_upstream_completion(stack: Stack) -> None:
    raw = _client(stack).chat.completions.with_raw_response.create(
        model="fake", messages=[{"role": "user", "content": "through the sdk"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "through the sdk"
    job_id = raw.headers["Chatq-Job-Id"]
    assert job_id.startswith("job_")
    body = json.loads(raw.content)
    _lenient("CreateChatCompletionResponse", body)
    assert stack.get(job_id).json()["result"] == body


def test_sdk_streaming_chunks_reassemble_to_the_full_text(stack: Stack) -> None:
    stream = _client(stack).chat.completions.create(
        model="fake:tps=200,tokens=120",
        messages=[{"role": "user", "content": "x"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 120
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 120
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


def test_streamed_chunks_validate_strictly(stack: Stack) -> None:
    body = {
        "model": "fake:tokens=20",
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    r = stack.session().post(f"{stack.url}/v1/chat/completions", json=body, stream=True, timeout=30)
    assert r.headers["Content-Type"].startswith("text/event-stream")
    data = [line[6:] for line in r.iter_lines(decode_unicode=True) if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    for chunk in data[:-1]:
        openai_schemas.check("CreateChatCompletionStreamResponse", json.loads(chunk))


def test_streaming_without_include_usage_sends_no_usage_chunk(stack: Stack) -> None:
    chunks = list(
        _client(stack).chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "a b c"}], stream=True
        )
    )
    assert all(c.choices for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "a b c"


def test_upstream_4xx_surfaces_as_api_status_error(stack: Stack) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        _client(stack).chat.completions.create(
            model="fake:status=400", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == 400
    openai_schemas.check("ErrorResponse", caught.value.response.json())


def test_upstream_failure_in_a_stream_surfaces_as_an_error(stack: Stack) -> None:
    with pytest.raises(openai.APIError):
        list(
            _client(stack).chat.completions.create(
                model="fake:status=400", messages=[{"role": "user", "content": "x"}], stream=True
            )
        )


def test_our_own_errors_validate_strictly(stack: Stack) -> None:
    r = requests.post(f"{stack.url}/v1/chat/completions", json={}, timeout=10)
    assert r.status_code == 401
    openai_schemas.check("ErrorResponse", r.json())
    r = stack.session().post(f"{stack.url}/v1/chat/completions", json={"model": "fake"}, timeout=10)
    assert r.status_code == 400
    openai_schemas.check("ErrorResponse", r.json())
    with pytest.raises(openai.AuthenticationError):
        _client(stack, key="sk-wrong").chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "x"}]
        )


def test_prefer_wait_falls_back_to_202_with_location(stack: Stack) -> None:
    body = {"model": "fake:ttft=3", "messages": [{"role": "user", "content": "x"}]}
    for prefer in ("wait=0.3", "respond-async"):
        r = stack.session().post(
            f"{stack.url}/v1/chat/completions", json=body, headers={"Prefer": prefer}, timeout=10
        )
        assert r.status_code == 202, r.text
        job = r.json()
        assert r.headers["Location"] == f"/v1/jobs/{job['id']}"
        assert job["object"] == "chat.completion.job"
    done = stack.get(job["id"], suffix="/result", wait=10)
    assert done.status_code == 200 and done.json()["object"] == "chat.completion"


def test_without_prefer_the_request_is_held_past_the_long_poll_cap(stack: Stack) -> None:
    body = {"model": "fake:ttft=1.5", "messages": [{"role": "user", "content": "held"}]}
    r = stack.session().post(f"{stack.url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "held"


def test_models_are_passed_through(stack: Stack) -> None:
    models = _client(stack).models.list()
    assert [m.id for m in models.data] == ["fake"]
    assert requests.get(f"{stack.url}/v1/models", timeout=10).status_code == 401


def test_fakellm_output_validates_against_openai_schemas(fakellm: str) -> None:
    from tests.procs import UPSTREAM_KEY

    client = openai.OpenAI(base_url=fakellm, api_key=UPSTREAM_KEY, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="fake", messages=[{"role": "user", "content": "hi"}]
    )
    openai_schemas.check("CreateChatCompletionResponse", json.loads(raw.content))


def _disconnect_mid_stream(stack: Stack) -> str:
    body = {
        "model": "fake:tps=20,tokens=40",
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
    }
    r = stack.session().post(f"{stack.url}/v1/chat/completions", json=body, stream=True, timeout=30)
    job_id = r.headers["Chatq-Job-Id"]
    lines = r.iter_lines()
    while b"content" not in next(lines):
        pass
    r.close()
    return job_id


def test_a_client_leaving_mid_stream_does_not_cancel_the_job(stack: Stack) -> None:
    job_id = _disconnect_mid_stream(stack)
    job = stack.get(job_id, wait=15).json()
    assert job["status"] == "completed" and len(job["output_text"].split()) == 40


def test_cancel_on_disconnect_when_configured(redis_url: str, fakellm: str) -> None:
    from tests.conftest import start_stack

    s = start_stack(redis_url.rsplit("/", 1)[0] + "/11", fakellm, CHATQ_CANCEL_ON_DISCONNECT="1")
    try:
        job_id = _disconnect_mid_stream(s)
        job = s.get(job_id, wait=15).json()
        assert job["status"] == "cancelled"
    finally:
        s.stop()
