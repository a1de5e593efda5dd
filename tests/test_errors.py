"""Every malformed request gets OpenAI's error shape with the right status, never a 500."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import requests

from tests.conftest import Stack

ERROR_KEYS = {"message", "type", "param", "code"}


def _error(r: requests.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == ERROR_KEYS
    assert body["error"]["code"] == code
    assert "Traceback" not in r.text
    return dict(body["error"])


def _post(
    stack: Stack,
    data: bytes | str,
    headers: dict[str, str] | None = None,
    path: str = "/v1/jobs",
    **params: Any,
) -> requests.Response:
    return stack.session().post(
        f"{stack.url}{path}", data=data, headers=headers, params=params, timeout=10
    )


@pytest.mark.parametrize("auth", [None, "Bearer nope", "Basic abc", "Bearer "])
def test_missing_or_unknown_key_is_401(stack: Stack, auth: str | None) -> None:
    headers = {"Authorization": auth} if auth else {}
    r = requests.post(f"{stack.url}/v1/jobs", data="{}", headers=headers, timeout=10)
    _error(r, 401, "invalid_api_key")
    r = requests.get(f"{stack.url}/v1/jobs/job_{'x' * 32}", headers=headers, timeout=10)
    _error(r, 401, "invalid_api_key")


@pytest.mark.parametrize(
    "data",
    [b"", b"not json", b"{", b"\xff\xfe{}", b"[1, 2]", b"3", b'{"messages": NaN}', b"[" * 100000],
)
def test_body_that_is_not_a_json_object_is_400(stack: Stack, data: bytes) -> None:
    _error(_post(stack, data), 400, "invalid_json")


def test_json_is_read_whatever_the_content_type(stack: Stack) -> None:
    body = '{"model": "fake", "messages": [{"role": "user", "content": "form typed"}]}'
    for ctype in ("application/x-www-form-urlencoded", "text/plain", None):
        headers = {"Content-Type": ctype} if ctype else {}
        r = _post(stack, body, headers, wait=10)
        assert r.status_code == 200 and r.json()["output_text"] == "form typed"


@pytest.mark.parametrize(
    "body,code,param",
    [
        ({}, "missing_field", "messages"),
        ({"messages": []}, "invalid_request", "messages"),
        ({"messages": "hi"}, "invalid_request", "messages"),
        ({"messages": ["hi"]}, "invalid_request", "messages[0]"),
        ({"messages": [{"content": "hi"}]}, "missing_field", "messages[0].role"),
        (
            {"messages": [{"role": "wizard", "content": "hi"}]},
            "invalid_request",
            "messages[0].role",
        ),
        ({"messages": [{"role": {}, "content": "hi"}]}, "invalid_request", "messages[0].role"),
        (
            {"messages": [{"role": "assistant", "tool_calls": "x"}]},
            "invalid_request",
            "messages[0].tool_calls",
        ),
        ({"messages": [{"role": "user"}]}, "missing_field", "messages[0].content"),
        ({"messages": [{"role": "user", "content": 5}]}, "invalid_request", "messages[0].content"),
        ({"messages": [{"role": "user", "content": "x"}], "model": 3}, "invalid_request", "model"),
        (
            {"messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
            "invalid_request",
            "temperature",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}], "max_tokens": True},
            "invalid_request",
            "max_tokens",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}], "stream": True},
            "invalid_request",
            "stream",
        ),
    ],
)
def test_invalid_fields_are_400_naming_the_field(
    stack: Stack, body: dict[str, Any], code: str, param: str
) -> None:
    r = stack.session().post(f"{stack.url}/v1/jobs", json=body, timeout=10)
    assert _error(r, 400, code)["param"] == param


@pytest.mark.parametrize("wait", ["-1", "abc", "nan", "inf", "1e999", "", "1_0", "0x10"])
def test_bad_wait_is_400(stack: Stack, wait: str) -> None:
    body = '{"messages": [{"role": "user", "content": "x"}]}'
    _error(_post(stack, body, wait=wait), 400, "invalid_wait")
    _error(stack.get("job_" + "a" * 32, wait=wait), 400, "invalid_wait")


def test_bad_priority_is_400(stack: Stack) -> None:
    body = '{"messages": [{"role": "user", "content": "x"}]}'
    _error(_post(stack, body, priority="urgent"), 400, "invalid_request")


def test_body_over_the_limit_is_413(stack: Stack) -> None:
    big = '{"messages": [{"role": "user", "content": "' + "x" * (1024 * 1024) + '"}]}'
    _error(_post(stack, big), 413, "request_too_large")


def test_wrong_method_is_405_and_unknown_path_404(stack: Stack) -> None:
    r = stack.session().delete(f"{stack.url}/v1/jobs", timeout=10)
    _error(r, 405, "method_not_allowed")
    r = stack.session().get(f"{stack.url}/v1/nothing-here", timeout=10)
    _error(r, 404, "not_found")


def test_malformed_job_ids_are_simply_not_found(stack: Stack) -> None:
    for job_id in ("x", "job_", "job_%00", "job_" + "a" * 500, "..%2F..%2Fetc"):
        r = stack.get(job_id)
        assert r.status_code == 404
        assert r.json()["error"]["code"] in ("job_not_found", "not_found")


def test_health_and_readiness_need_no_key(stack: Stack) -> None:
    assert requests.get(f"{stack.url}/healthz", timeout=5).status_code == 200
    ready = requests.get(f"{stack.url}/readyz", timeout=5)
    assert ready.status_code == 200 and ready.json()["redis"] is True


def _raw_http10(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_http10_client_long_polls_and_gets_an_unchunked_answer(stack: Stack) -> None:
    from tests.procs import ALICE_KEY

    body = b'{"model": "fake:ttft=0.5", "messages": [{"role": "user", "content": "old client"}]}'
    submit = (
        b"POST /v1/jobs HTTP/1.0\r\nAuthorization: Bearer "
        + ALICE_KEY.encode()
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    answer = _raw_http10(stack.url, submit)
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.") and b" 202 " in head.split(b"\r\n")[0]
    import json

    job_id = json.loads(payload)["id"]
    poll = (
        f"GET /v1/jobs/{job_id}?wait=20 HTTP/1.0\r\nAuthorization: Bearer {ALICE_KEY}\r\n\r\n"
    ).encode()
    answer = _raw_http10(stack.url, poll)
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0]
    assert b"chunked" not in head.lower() and b"content-length" in head.lower()
    assert json.loads(payload)["output_text"] == "old client"


def test_wait_in_exponent_notation_is_a_number(stack: Stack) -> None:
    job = stack.submit("exp", wait="1e1")
    assert job.status_code == 200 and job.headers["Preference-Applied"] == "wait=10"
