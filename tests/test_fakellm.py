"""fakellm, the fake OpenAI-compatible upstream, tested as a real subprocess over loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests import openai_schemas
from tests.openai_schemas import Validate
from tests.procs import wait_until

REPO = Path(__file__).resolve().parents[1]
API_KEY = "sk-fakellm-test-secret-4242"
WRONG_KEY = "sk-wrong-key-7777"


@dataclass
class FakeServer:
    """A running `python -m fakellm` subprocess."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def chat(self, model: str, text: str = "hello fake world", **kwargs: Any) -> requests.Response:
        """POST one chat completion with a single user message."""
        return requests.post(
            f"{self.url}/v1/chat/completions", json=body(model, text, **kwargs), timeout=10
        )


def body(model: str, text: str = "hello fake world", **extra: Any) -> dict[str, Any]:
    """A chat-completions request body with one user message."""
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_until_up(server: FakeServer, headers: dict[str, str]) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"fakellm exited early:\n{server.log.read_text()}")
        try:
            requests.get(f"{server.url}/v1/models", headers=headers, timeout=1)
            return
        except requests.ConnectionError:
            time.sleep(0.05)
    pytest.fail("fakellm did not answer within 15 s")


def _start(log: Path, *extra_args: str, headers: dict[str, str]) -> Iterator[FakeServer]:
    port = _free_port()
    command = [sys.executable, "-m", "fakellm", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, *extra_args], cwd=REPO, stdout=out, stderr=subprocess.STDOUT
        )
    server = FakeServer(f"http://127.0.0.1:{port}", process, log)
    try:
        _wait_until_up(server, headers)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeServer]:
    """A fakellm without an API key."""
    yield from _start(tmp_path_factory.mktemp("fakellm") / "fakellm.log", headers={})


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeServer]:
    """A fakellm started with `--api-key`."""
    log = tmp_path_factory.mktemp("fakellm-keyed") / "fakellm.log"
    yield from _start(log, "--api-key", API_KEY, headers={"Authorization": f"Bearer {API_KEY}"})


@pytest.fixture
def validate() -> Validate:
    """Validate an instance strictly against one of OpenAI's published schemas."""
    return openai_schemas.check


def sse_data(response: requests.Response) -> Iterator[str]:
    """The `data:` payloads of a server-sent-events response, each as soon as it arrives."""
    lines = (line.decode() for line in response.iter_lines(chunk_size=None) if line)
    yield from (line.removeprefix("data: ") for line in lines if line.startswith("data: "))


def data_lines(response: requests.Response) -> list[str]:
    """The `data:` payloads of a server-sent-events response, in order."""
    return list(sse_data(response))


def stream_chunks(server: FakeServer, model: str, text: str = "hello fake world") -> list[Any]:
    """Stream one completion; return its chunks, checking it ends with `[DONE]`."""
    response = requests.post(
        f"{server.url}/v1/chat/completions",
        json=body(model, text, stream=True, stream_options={"include_usage": True}),
        stream=True,
        timeout=10,
    )
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    lines = data_lines(response)
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def streamed_text(chunks: list[Any]) -> str:
    """Concatenate the content deltas of a stream."""
    return "".join(
        choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"]
    )


def stats(session: requests.Session, server: FakeServer) -> dict[str, int]:
    """Read `/stats` through `session`."""
    result: dict[str, int] = session.get(f"{server.url}/stats", timeout=5).json()
    return result


def test_models_lists_fake(fake: FakeServer) -> None:
    response = requests.get(f"{fake.url}/v1/models", timeout=5)
    assert response.status_code == 200
    listing = response.json()
    assert listing["object"] == "list"
    assert [(m["id"], m["object"]) for m in listing["data"]] == [("fake", "model")]
    assert isinstance(listing["data"][0]["created"], int)
    assert listing["data"][0]["owned_by"]


def test_completion_matches_openai_schema(fake: FakeServer, validate: Validate) -> None:
    request = {
        "model": "fake",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "echo these four words"},
        ],
    }
    response = requests.post(f"{fake.url}/v1/chat/completions", json=request, timeout=5)
    assert response.status_code == 200
    completion = response.json()
    validate("CreateChatCompletionResponse", completion)
    assert completion["object"] == "chat.completion"
    assert completion["model"] == "fake"
    choice = completion["choices"][0]
    assert choice["message"] == {
        "role": "assistant",
        "content": "echo these four words",
        "refusal": None,
    }
    assert (choice["index"], choice["logprobs"], choice["finish_reason"]) == (0, None, "stop")
    assert completion["usage"] == {"prompt_tokens": 6, "completion_tokens": 4, "total_tokens": 10}


def test_stream_chunks_match_openai_schema(fake: FakeServer, validate: Validate) -> None:
    chunks = stream_chunks(fake, "fake", "one two three")
    for chunk in chunks:
        validate("CreateChatCompletionStreamResponse", chunk)
        assert chunk["id"] == chunks[0]["id"]
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == "fake"
    *choices, usage_chunk = chunks
    assert [c["choices"][0]["delta"] for c in choices] == [
        {"role": "assistant", "content": ""},
        {"content": "one"},
        {"content": " two"},
        {"content": " three"},
        {},
    ]
    assert [c["choices"][0]["finish_reason"] for c in choices] == [None] * 4 + ["stop"]
    assert all(c["choices"][0]["logprobs"] is None for c in choices)
    assert all(c["usage"] is None for c in choices)
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}


def test_stream_without_include_usage_has_no_usage(fake: FakeServer) -> None:
    response = requests.post(
        f"{fake.url}/v1/chat/completions", json=body("fake", stream=True), timeout=5
    )
    lines = data_lines(response)
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    assert all("usage" not in chunk and chunk["choices"] for chunk in chunks)
    assert streamed_text(chunks) == "hello fake world"


def test_echo_is_deterministic_and_joins_text_parts(fake: FakeServer) -> None:
    parts = [
        {"type": "text", "text": "first part"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "second  part"},
    ]
    request = {
        "model": "fake",
        "messages": [
            {"role": "user", "content": "an earlier question"},
            {"role": "assistant", "content": "an answer"},
            {"role": "user", "content": parts},
        ],
    }
    url = f"{fake.url}/v1/chat/completions"
    replies = [requests.post(url, json=request, timeout=5).json() for _ in range(2)]
    contents = [reply["choices"][0]["message"]["content"] for reply in replies]
    assert contents == ["first part second part"] * 2


def test_tokens_knob_generates_n_words_deterministically(fake: FakeServer) -> None:
    first = fake.chat("fake:tokens=25").json()["choices"][0]["message"]["content"]
    again = fake.chat("fake:tokens=25").json()["choices"][0]["message"]["content"]
    streamed = streamed_text(stream_chunks(fake, "fake:tokens=25"))
    other = fake.chat("fake:tokens=25", "another prompt").json()
    assert len(first.split()) == 25
    assert first == again == streamed
    assert other["choices"][0]["message"]["content"] != first
    assert other["usage"]["completion_tokens"] == 25
    assert fake.chat("fake:tokens=0").json()["choices"][0]["message"]["content"] == ""


def test_max_tokens_cuts_the_answer_with_finish_reason_length(fake: FakeServer) -> None:
    whole = fake.chat("fake:tokens=12").json()["choices"][0]["message"]["content"].split()
    for cap in ("max_tokens", "max_completion_tokens"):
        cut = fake.chat("fake:tokens=12", **{cap: 5}).json()
        assert cut["choices"][0]["message"]["content"].split() == whole[:5]
        assert cut["choices"][0]["finish_reason"] == "length"
        assert cut["usage"]["completion_tokens"] == 5
    streamed = requests.post(
        f"{fake.url}/v1/chat/completions",
        timeout=10,
        json=body("fake:tokens=12", stream=True, max_tokens=5),
    )
    chunks = [json.loads(line) for line in data_lines(streamed)[:-1]]
    assert streamed_text(chunks).split() == whole[:5]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    roomy = fake.chat("fake:tokens=12", max_tokens=12).json()["choices"][0]
    assert (roomy["finish_reason"], len(roomy["message"]["content"].split())) == ("stop", 12)
    assert fake.chat("fake", max_tokens=0).status_code == 400


# Pacing is asserted by lower bounds only: a loaded machine can make a token late, never early.
# How closely fakellm keeps to its pace is no claim of the suite.


def test_ttft_and_tps_pace_the_stream(fake: FakeServer) -> None:
    start = time.monotonic()
    response = requests.post(
        f"{fake.url}/v1/chat/completions",
        json=body("fake:ttft=0.5,tps=20,tokens=11", stream=True),
        stream=True,
        timeout=10,
    )
    content_times = []
    for line in sse_data(response):
        if line != "[DONE]" and json.loads(line)["choices"][0]["delta"].get("content"):
            content_times.append(time.monotonic() - start)
    # Eleven tokens, each in a chunk of its own: the first due 0.5 s after the start, ten more
    # at 20/s. fakellm keeps to that schedule from the start, so a late first token makes the
    # gap to the last shorter: bound each against the start.
    assert len(content_times) == 11
    assert content_times[0] >= 0.5 - 0.05
    assert content_times[-1] >= 0.5 + 10 / 20 - 0.05


def test_ttft_and_tps_delay_a_non_streamed_answer(fake: FakeServer) -> None:
    start = time.monotonic()
    assert fake.chat("fake:ttft=0.2,tps=20,tokens=5").status_code == 200
    assert time.monotonic() - start >= 0.2 + 4 / 20 - 0.05


def test_fail_first_fails_then_succeeds_with_retry_after(
    fake: FakeServer, validate: Validate
) -> None:
    model = "fake:status=503,fail_first=2,retry_after=1"
    failures = [fake.chat(model, "retry me") for _ in range(2)]
    for failure in failures:
        assert failure.status_code == 503
        assert failure.headers["Retry-After"] == "1"
        validate("ErrorResponse", failure.json())
        assert failure.json()["error"]["type"] == "server_error"
    success = fake.chat(model, "retry me")
    assert success.status_code == 200
    assert "Retry-After" not in success.headers
    assert success.json()["choices"][0]["message"]["content"] == "retry me"
    assert fake.chat(model, "a different request").status_code == 503


@pytest.mark.parametrize(
    ("status", "error_type", "code"),
    [
        (400, "invalid_request_error", None),
        (429, "requests", "rate_limit_exceeded"),
        (500, "server_error", None),
        (503, "server_error", None),
    ],
)
def test_status_knob_answers_openai_errors(
    fake: FakeServer, validate: Validate, status: int, error_type: str, code: str | None
) -> None:
    for _ in range(2):
        response = fake.chat(f"fake:status={status}")
        assert response.status_code == status
        error = response.json()
        validate("ErrorResponse", error)
        assert (error["error"]["type"], error["error"]["code"]) == (error_type, code)


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"{",
        b"[1, 2]",
        b"\xff\xfe",
        b"[" * 100_000,
        json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode(),
        json.dumps({"model": 7, "messages": [{"role": "user", "content": "hi"}]}).encode(),
        json.dumps({"model": "fake"}).encode(),
        json.dumps({"model": "fake", "messages": []}).encode(),
        json.dumps({"model": "fake", "messages": "hi"}).encode(),
        json.dumps({"model": "fake", "messages": ["hi"]}).encode(),
        json.dumps({"model": "fake", "messages": [{"content": "hi"}]}).encode(),
        json.dumps({"model": "fake", "messages": [{"role": "user", "content": 5}]}).encode(),
        json.dumps({"model": "fake", "messages": [{"role": "user", "content": [1]}]}).encode(),
        json.dumps(body("fake", stream="yes")).encode(),
        json.dumps(body("fake", stream=True, stream_options=[])).encode(),
        json.dumps(body("fake:ttft=abc")).encode(),
        json.dumps(body("fake:ttft=-1")).encode(),
        json.dumps(body("fake:tps=nan")).encode(),
        json.dumps(body("fake:tokens=1.5")).encode(),
        json.dumps(body("fake:status=200")).encode(),
        json.dumps(body("fake:hang=2")).encode(),
        json.dumps(body("fake:colour=blue")).encode(),
        json.dumps(body("fake:tokens=3,tokens=4")).encode(),
        json.dumps(body("fake:tokens")).encode(),
        json.dumps(body("fake:")).encode(),
        json.dumps(body("fake:retry_after=1")).encode(),
        json.dumps(body("fake:fail_first=1")).encode(),
    ],
)
def test_malformed_requests_get_openai_400(
    fake: FakeServer, validate: Validate, payload: bytes
) -> None:
    response = requests.post(f"{fake.url}/v1/chat/completions", data=payload, timeout=5)
    assert response.status_code == 400
    validate("ErrorResponse", response.json())
    assert response.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("model", ["gpt-4o", "fakes", "Fake", ""])
def test_unknown_model_is_404_model_not_found(
    fake: FakeServer, validate: Validate, model: str
) -> None:
    response = fake.chat(model)
    assert response.status_code == 404
    validate("ErrorResponse", response.json())
    assert response.json()["error"]["code"] == "model_not_found"


def test_unknown_path_is_an_openai_404(fake: FakeServer, validate: Validate) -> None:
    response = requests.get(f"{fake.url}/v1/nothing-here", timeout=5)
    assert response.status_code == 404
    validate("ErrorResponse", response.json())


def test_hang_never_answers_until_the_client_leaves(fake: FakeServer) -> None:
    with requests.Session() as observer:
        active_before = stats(observer, fake)["connections_active"]
        with requests.Session() as client, pytest.raises(requests.ReadTimeout):
            client.post(
                f"{fake.url}/v1/chat/completions", json=body("fake:hang=1"), timeout=(2, 0.5)
            )
        wait_until(
            lambda: stats(observer, fake)["connections_active"] == active_before,
            15,
            "the hung connection to be released",
        )


def test_drop_after_cuts_the_stream_after_n_tokens(fake: FakeServer) -> None:
    response = requests.post(
        f"{fake.url}/v1/chat/completions",
        json=body("fake:tokens=10,drop_after=3", stream=True),
        stream=True,
        timeout=5,
    )
    assert response.status_code == 200
    received = []
    with pytest.raises((requests.exceptions.ChunkedEncodingError, requests.ConnectionError)):
        for line in response.iter_lines():
            received.append(line.decode())
    data = [line.removeprefix("data: ") for line in received if line.startswith("data: ")]
    assert "[DONE]" not in data
    chunks = [json.loads(line) for line in data]
    assert len([c for c in chunks if c["choices"][0]["delta"].get("content")]) == 3
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)


def test_drop_after_without_stream_cuts_without_an_answer(fake: FakeServer) -> None:
    with pytest.raises(requests.ConnectionError):
        fake.chat("fake:drop_after=2")


def test_drop_after_with_fail_first_cuts_only_the_first_attempts(fake: FakeServer) -> None:
    model = "fake:drop_after=1,fail_first=1"
    with pytest.raises(requests.ConnectionError):
        fake.chat(model, "cut once")
    assert fake.chat(model, "cut once").json()["choices"][0]["message"]["content"] == "cut once"


def test_garbage_is_neither_json_nor_sse(fake: FakeServer) -> None:
    plain = fake.chat("fake:garbage=1")
    assert plain.status_code == 200
    with pytest.raises(ValueError):
        plain.json()
    streamed = fake.chat("fake:garbage=1", stream=True)
    assert streamed.status_code == 200
    lines = data_lines(streamed)
    assert "[DONE]" not in lines
    with pytest.raises(ValueError):
        [json.loads(line) for line in lines]


def test_api_key_is_required_and_never_echoed(keyed: FakeServer, validate: Validate) -> None:
    url = f"{keyed.url}/v1/chat/completions"
    attempts = [{}, {"Authorization": f"Bearer {WRONG_KEY}"}, {"Authorization": API_KEY}]
    for headers in attempts:
        response = requests.post(url, json=body("fake"), headers=headers, timeout=5)
        assert response.status_code == 401
        validate("ErrorResponse", response.json())
        assert response.json()["error"]["code"] == "invalid_api_key"
        assert API_KEY not in response.text and WRONG_KEY not in response.text
    models = requests.get(f"{keyed.url}/v1/models", timeout=5)
    assert models.status_code == 401
    good = requests.post(
        url, json=body("fake"), headers={"Authorization": f"Bearer {API_KEY}"}, timeout=5
    )
    assert good.status_code == 200
    assert requests.get(f"{keyed.url}/stats", timeout=5).status_code == 200
    log = keyed.log.read_text()
    assert API_KEY not in log and WRONG_KEY not in log


def test_stats_count_pooled_and_fresh_connections(fake: FakeServer) -> None:
    with requests.Session() as observer:
        observer.post(f"{fake.url}/stats/reset", timeout=5)
        with requests.Session() as pooled:
            for _ in range(50):
                assert pooled.post(
                    f"{fake.url}/v1/chat/completions", json=body("fake"), timeout=5
                ).ok
        assert stats(observer, fake)["connections_opened"] == 1
        observer.post(f"{fake.url}/stats/reset", timeout=5)
        for _ in range(50):
            assert fake.chat("fake").ok
        counted = stats(observer, fake)
    assert counted["connections_opened"] == 50
    assert counted["requests"] == 50
    assert counted["connections_active"] >= 1


def test_stats_reset_zeroes_requests(fake: FakeServer) -> None:
    fake.chat("fake")
    with requests.Session() as observer:
        reset = observer.post(f"{fake.url}/stats/reset", timeout=5).json()
        assert (reset["requests"], reset["connections_opened"]) == (0, 0)
        fake.chat("fake")
        fake.chat("fake:status=500")
        assert stats(observer, fake)["requests"] == 2
