"""Malformed requests get the API's error, in process: create_app(...).test_client(), no server.

The app is built from a Settings object whose Redis URL points at a port where nothing listens:
validation and error shapes must not need Redis (a request that touched it would answer
503 backend_unavailable and fail its row). Only the unknown-job row uses the session's Redis.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from chatq.config.settings import Settings
from scripts.localredis import free_port
from tests.inproc import in_process
from web.http import params

KEY = "sk-inprocess-3c6f0a9e"
AUTH = {"Authorization": f"Bearer {KEY}"}
MAX_BODY_BYTES = 4096
JOB = "job_" + "a" * 32
OK_MESSAGES = [{"role": "user", "content": "x"}]


def _settings(redis_url: str) -> Settings:
    return Settings(
        redis_url=redis_url,
        api_keys=(("alice", KEY),),
        default_model="fake",
        max_body_bytes=MAX_BODY_BYTES,
    )


@pytest.fixture(scope="module")
def client() -> Iterator[FlaskClient]:
    """A client of an app whose Redis cannot be reached."""
    with in_process(_settings(f"redis://127.0.0.1:{free_port()}/0")) as app:
        yield app.test_client()


def _error(r: TestResponse, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.get_data(as_text=True)
    assert r.headers["Content-Type"].startswith("application/json")
    body = r.get_json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert "Traceback" not in r.get_data(as_text=True)
    return dict(body["error"])


def _body(**fields: Any) -> dict[str, Any]:
    return {"messages": OK_MESSAGES, **fields}


BAD_BODIES: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("not json", b"not json"),
    ("cut", b'{"messages": ['),
    ("bad utf-8", b'\xff\xfe{"messages": []}'),
    ("array", b"[1, 2]"),
    ("number", b"3"),
    ("string", b'"hi"'),
    ("NaN", b'{"messages": NaN}'),
    ("Infinity", b'{"t": Infinity}'),
    ("deep", b"[" * (MAX_BODY_BYTES - 1)),
]


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/chat/completions"])
@pytest.mark.parametrize("data", [d for _, d in BAD_BODIES], ids=[i for i, _ in BAD_BODIES])
def test_a_body_that_is_not_a_json_object_is_400_invalid_json(
    client: FlaskClient, path: str, data: bytes
) -> None:
    for ctype in ("application/json", "application/x-www-form-urlencoded"):
        r = client.post(path, data=data, headers={**AUTH, "Content-Type": ctype})
        assert _error(r, 400, "invalid_json")["param"] is None


def test_json_nested_too_deeply_is_refused_as_such(client: FlaskClient) -> None:
    depth = 1500  # valid JSON, well within the body limit
    data = b'{"messages": ' + b"[" * depth + b"]" * depth + b"}"
    assert len(data) < MAX_BODY_BYTES
    r = client.post("/v1/jobs", data=data, headers=AUTH)
    assert "nests arrays and objects too deeply" in _error(r, 400, "invalid_json")["message"]


@pytest.mark.parametrize(
    "path",
    [
        "/v1/jobs//events",
        "/v1/jobs//result",
        "/v1/jobs//cancel",
        "/v1/responses//cancel",
        "/v1/batches//cancel",
        "/v1/files//content",
        "//v1/jobs",
    ],
)
def test_an_empty_id_is_a_json_404_never_a_redirect(client: FlaskClient, path: str) -> None:
    for method in ("GET", "POST"):
        r = client.open(path, method=method, headers=AUTH)
        assert r.status_code in (404, 405), (method, r.status_code, r.get_data(as_text=True))
        assert r.headers["Content-Type"].startswith("application/json")
        assert "Location" not in r.headers


BAD_FIELDS: list[tuple[dict[str, Any], str, str]] = [
    ({}, "missing_field", "messages"),
    ({"messages": None}, "invalid_request", "messages"),
    ({"messages": []}, "invalid_request", "messages"),
    ({"messages": "hi"}, "invalid_request", "messages"),
    # More than any model takes (a 32-bit count): refused, never sent upstream.
    (_body(max_tokens=10**30), "invalid_request", "max_tokens"),
    (_body(max_completion_tokens=2**31), "invalid_request", "max_completion_tokens"),
    ({"messages": {"role": "user"}}, "invalid_request", "messages"),
    ({"messages": ["hi"]}, "invalid_request", "messages[0]"),
    ({"messages": [*OK_MESSAGES, 7]}, "invalid_request", "messages[1]"),
    ({"messages": [{"content": "hi"}]}, "missing_field", "messages[0].role"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "invalid_request", "messages[0].role"),
    ({"messages": [{"role": 1, "content": "hi"}]}, "invalid_request", "messages[0].role"),
    ({"messages": [{"role": "user"}]}, "missing_field", "messages[0].content"),
    ({"messages": [{"role": "user", "content": 5}]}, "invalid_request", "messages[0].content"),
    (
        {"messages": [{"role": "user", "content": ["text"]}]},
        "invalid_request",
        "messages[0].content",
    ),
    (
        {"messages": [{"role": "assistant", "tool_calls": "x"}]},
        "invalid_request",
        "messages[0].tool_calls",
    ),
    (
        {"messages": [{"role": "assistant", "tool_calls": [1]}]},
        "invalid_request",
        "messages[0].tool_calls",
    ),
    (_body(model=3), "invalid_request", "model"),
    (_body(model=""), "invalid_request", "model"),
    (_body(temperature="hot"), "invalid_request", "temperature"),
    (_body(temperature=True), "invalid_request", "temperature"),
    (_body(top_p=[1]), "invalid_request", "top_p"),
    (_body(max_tokens=1.5), "invalid_request", "max_tokens"),
    (_body(max_tokens=True), "invalid_request", "max_tokens"),
    (_body(n="2"), "invalid_request", "n"),
    (_body(seed=1.5), "invalid_request", "seed"),
    (_body(stop=5), "invalid_request", "stop"),
    (_body(stop=["a", 1]), "invalid_request", "stop"),
    (_body(tools={"type": "function"}), "invalid_request", "tools"),
    (_body(tools=["x"]), "invalid_request", "tools"),
    (_body(response_format="json"), "invalid_request", "response_format"),
    (_body(user=1), "invalid_request", "user"),
    (_body(metadata=[]), "invalid_request", "metadata"),
]


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/chat/completions"])
@pytest.mark.parametrize("body,code,param", BAD_FIELDS)
def test_a_missing_or_mistyped_field_is_400_naming_it(
    client: FlaskClient, path: str, body: dict[str, Any], code: str, param: str
) -> None:
    assert _error(client.post(path, json=body, headers=AUTH), 400, code)["param"] == param


@pytest.mark.parametrize(
    "body,param",
    [
        (_body(stream=True), "stream"),
        (_body(stream="yes"), "stream"),
        (_body(stream_options=[]), "stream_options"),
    ],
)
def test_stream_fields_on_the_jobs_endpoint(
    client: FlaskClient, body: dict[str, Any], param: str
) -> None:
    r = client.post("/v1/jobs", json=body, headers=AUTH)
    assert _error(r, 400, "invalid_request")["param"] == param


def test_stream_must_be_a_boolean_on_the_openai_front_door(client: FlaskClient) -> None:
    r = client.post("/v1/chat/completions", json=_body(stream="yes"), headers=AUTH)
    assert _error(r, 400, "invalid_request")["param"] == "stream"


@pytest.mark.parametrize(
    "wait", ["-1", "abc", "nan", "inf", "-inf", "1e999", "", "1_0", "0x10", "1,5", " ", "1e"]
)
@pytest.mark.parametrize(
    "method,path",
    [
        ("post", "/v1/jobs"),
        ("get", f"/v1/jobs/{JOB}"),
        ("get", f"/v1/jobs/{JOB}/result"),
        ("get", f"/v1/jobs/{JOB}/events"),
    ],
)
def test_a_bad_wait_is_400_invalid_wait(
    client: FlaskClient, wait: str, method: str, path: str
) -> None:
    r = getattr(client, method)(path, query_string={"wait": wait}, json=_body(), headers=AUTH)
    assert _error(r, 400, "invalid_wait")["param"] == "wait"


@pytest.mark.parametrize("priority", ["urgent", "", "INTERACTIVE", "batch "])
def test_a_bad_priority_is_400(client: FlaskClient, priority: str) -> None:
    r = client.post("/v1/jobs", query_string={"priority": priority}, json=_body(), headers=AUTH)
    assert _error(r, 400, "invalid_request")["param"] == "priority"


@pytest.mark.parametrize("key", ["", "k" * 256])
def test_a_bad_idempotency_key_is_400(client: FlaskClient, key: str) -> None:
    r = client.post("/v1/jobs", json=_body(), headers={**AUTH, "Idempotency-Key": key})
    assert _error(r, 400, "invalid_request")["param"] == "Idempotency-Key"


def test_a_bad_context_overflow_policy_is_400(client: FlaskClient) -> None:
    headers = {**AUTH, "Chatq-Context-Overflow": "drop_everything"}
    r = client.post("/v1/jobs", json=_body(), headers=headers)
    assert _error(r, 400, "invalid_request")["param"] == "Chatq-Context-Overflow"


def test_a_cursor_this_api_never_gave_is_400(client: FlaskClient) -> None:
    for accept in ("application/json", "text/event-stream"):
        r = client.get(
            f"/v1/jobs/{JOB}/events",
            query_string={"cursor": "zz"},
            headers={**AUTH, "Accept": accept},
        )
        assert _error(r, 400, "invalid_cursor")["param"] == "cursor"


@pytest.mark.parametrize(
    "auth", [None, "Bearer nope", f"Basic {KEY}", "Bearer ", KEY, f"Bearer {KEY}x"]
)
@pytest.mark.parametrize(
    "method,path",
    [
        ("post", "/v1/jobs"),
        ("get", f"/v1/jobs/{JOB}"),
        ("post", f"/v1/jobs/{JOB}/cancel"),
        ("post", "/v1/chat/completions"),
        ("get", "/v1/models"),
        ("get", "/v1/queue"),
    ],
)
def test_no_key_or_an_unknown_key_is_401(
    client: FlaskClient, auth: str | None, method: str, path: str
) -> None:
    headers = {"Authorization": auth} if auth is not None else {}
    r = getattr(client, method)(path, data=b"not even json", headers=headers)
    assert _error(r, 401, "invalid_api_key")["param"] is None


@pytest.mark.parametrize(
    "job_id",
    ["x", "job_", "job_short", "job_" + "a" * 500, "job_" + "a" * 31 + "!", "JOB_" + "a" * 32],
)
@pytest.mark.parametrize("suffix", ["", "/result", "/events"])
def test_a_malformed_job_id_is_404_without_asking_redis(
    client: FlaskClient, job_id: str, suffix: str
) -> None:
    r = client.get(f"/v1/jobs/{job_id}{suffix}", headers=AUTH)
    assert _error(r, 404, "job_not_found")["param"] == "id"
    r = client.post(f"/v1/jobs/{job_id}/cancel", headers=AUTH)
    _error(r, 404, "job_not_found")


def test_an_unknown_job_is_404(redis_url: str) -> None:
    with in_process(_settings(redis_url)) as app:
        client = app.test_client()
        for suffix in ("", "/result", "/events"):
            r = client.get(f"/v1/jobs/{JOB}{suffix}", headers=AUTH)
            assert _error(r, 404, "job_not_found")["param"] == "id"
        _error(client.post(f"/v1/jobs/{JOB}/cancel", headers=AUTH), 404, "job_not_found")


def test_an_unknown_path_is_404(client: FlaskClient) -> None:
    for path in ("/v1/nothing-here", "/v2/jobs", "/v1/jobs/a/b/c"):
        _error(client.get(path, headers=AUTH), 404, "not_found")


@pytest.mark.parametrize(
    "method,path,allowed",
    [
        ("delete", "/v1/jobs", "POST"),
        ("get", "/v1/jobs", "POST"),
        ("put", f"/v1/jobs/{JOB}", "GET"),
        ("get", f"/v1/jobs/{JOB}/cancel", "POST"),
        ("get", "/v1/chat/completions", "POST"),
        ("post", "/v1/models", "GET"),
    ],
)
def test_a_wrong_method_is_405_with_allow(
    client: FlaskClient, method: str, path: str, allowed: str
) -> None:
    r = getattr(client, method)(path, headers=AUTH)
    _error(r, 405, "method_not_allowed")
    assert allowed in r.headers["Allow"]


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/chat/completions"])
def test_a_body_over_the_limit_is_413(client: FlaskClient, path: str) -> None:
    big = _body(messages=[{"role": "user", "content": "x" * MAX_BODY_BYTES}])
    r = client.post(path, json=big, headers=AUTH)
    assert str(MAX_BODY_BYTES) in _error(r, 413, "request_too_large")["message"]
    just_under = b"[" + b" " * (MAX_BODY_BYTES - 2) + b"]"
    _error(client.post(path, data=just_under, headers=AUTH), 400, "invalid_json")


def test_a_wait_that_runs_out_ends_within_15_16_of_it_to_all_of_it() -> None:
    samples = [params.jittered(16.0) for _ in range(2000)]
    assert all(15.0 <= s <= 16.0 for s in samples)
    # Spread over the whole band, so that clients who started together come back apart.
    assert min(samples) < 15.1 and max(samples) > 15.9
    assert params.jittered(0.0) == 0.0


def test_a_whole_number_written_with_a_fraction_counts_as_an_integer() -> None:
    """JSON Schema (and so the OpenAPI document) counts 3.0 an integer: so does the server."""
    from chatq.chat.validate import chat_request

    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "n": 2.0,
        "seed": -929.0,
        "max_tokens": 16.0,
        "logit_bias": {"50256": -100.0},
    }
    request = chat_request(body, Settings())
    assert (request["n"], request["seed"], request["max_tokens"]) == (2, -929, 16)
    assert request["logit_bias"] == {"50256": -100} and request["messages"] == body["messages"]
    assert all(type(request[f]) is int for f in ("n", "seed", "max_tokens"))


def test_the_app_keeps_flasks_answer_for_each_view_or_hook_it_calls(client: FlaskClient) -> None:
    """The app asks once per function whether it is `async def`; the answer is Flask's."""
    app = client.application

    def plain() -> str:
        return "plain"

    async def coroutine() -> str:
        return "coroutine"

    for _ in range(2):
        assert app.ensure_sync(plain) is plain
        # Flask runs an `async def` view only with its async extra, which chatq does not install.
        with pytest.raises(RuntimeError, match="async"):
            app.ensure_sync(coroutine)
