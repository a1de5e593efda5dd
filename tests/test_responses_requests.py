"""POST /v1/responses and the other Responses endpoints, in-process on a Redis of their own
with no worker (accepted responses stay queued): the translation to a chat job, and every
request outside the text subset a 400 naming the parameter, with nothing queued."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from chatq import keys
from chatq.config import settings as config
from scripts.localredis import LocalRedis
from tests import openai_schemas
from tests.inproc import in_process
from tests.procs import ALICE_KEY, BOB_KEY

ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}
BOB = {"Authorization": f"Bearer {BOB_KEY}"}
MAX_OUTPUT_TOKENS = 1000


@pytest.fixture(scope="module")
def redis_server() -> Iterator[LocalRedis]:
    server = LocalRedis().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def app(redis_server: LocalRedis) -> Iterator[Flask]:
    """The real app on a Redis of its own (no worker: accepted responses stay queued)."""
    settings = config.load(
        {
            "CHATQ_REDIS_URL": redis_server.url,
            "CHATQ_API_KEYS": f"alice:{ALICE_KEY},bob:{BOB_KEY}",
            "CHATQ_DEFAULT_MODEL": "fake",
            "CHATQ_MAX_OUTPUT_TOKENS": str(MAX_OUTPUT_TOKENS),
        }
    )
    with in_process(settings) as app:
        yield app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def _job_count(app: Flask) -> int:
    return sum(1 for _ in app.extensions["chatq"].redis.scan_iter(keys.jobs_pattern()))


def _record(app: Flask, response_id: str) -> dict[str, str]:
    redis = app.extensions["chatq"].redis
    return dict(redis.hgetall(keys.job("job_" + response_id.removeprefix("resp_"))))


def _create(client: FlaskClient, **body: Any) -> dict[str, Any]:
    r = client.post(
        "/v1/responses",
        json={"model": "fake", "input": "hi", "background": True, **body},
        headers=ALICE,
    )
    assert r.status_code == 200, r.get_data(as_text=True)
    return dict(r.get_json())


# field -> a value outside the text subset (or invalid), and the parameter the 400 names.
REFUSED: list[tuple[dict[str, Any], str, str]] = [
    (
        {"tools": [{"type": "function", "name": "f", "parameters": {}}]},
        "tools",
        "unsupported_parameter",
    ),
    ({"tool_choice": "required"}, "tool_choice", "unsupported_parameter"),
    ({"reasoning": {"effort": "high"}}, "reasoning", "unsupported_parameter"),
    ({"include": ["reasoning.encrypted_content"]}, "include", "unsupported_parameter"),
    ({"conversation": "conv_1"}, "conversation", "unsupported_parameter"),
    ({"prompt": {"id": "pmpt_1"}}, "prompt", "unsupported_parameter"),
    ({"top_logprobs": 3}, "top_logprobs", "unsupported_parameter"),
    ({"stream_options": {"include_obfuscation": True}}, "stream_options", "unsupported_parameter"),
    ({"no_such_parameter": 1}, "no_such_parameter", "unsupported_parameter"),
    (
        {"input": [{"type": "reasoning", "id": "rs_1", "summary": []}]},
        "input[0]",
        "unsupported_parameter",
    ),
    (
        {"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
        "input[0]",
        "unsupported_parameter",
    ),
    (
        {
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "see"},
                        {"type": "input_image", "image_url": "https://example.com/a.png"},
                    ],
                }
            ]
        },
        "input[0].content[1]",
        "unsupported_parameter",
    ),
    (
        {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]},
        "input[0].content[0]",
        "unsupported_parameter",
    ),
    ({"text": {"verbosity": "low"}}, "text.verbosity", "unsupported_parameter"),
    ({"input": None}, "input", "missing_field"),
    ({"input": []}, "input", "invalid_request"),
    ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role", "invalid_request"),
    ({"input": [{"role": "user"}]}, "input[0].content", "missing_field"),
    # Found by schemathesis: a type or role that is an object was a 500.
    (
        {"input": [{"role": "user", "content": [{"type": {}, "text": ""}]}]},
        "input[0].content[0]",
        "unsupported_parameter",
    ),
    ({"input": [{"role": {}, "content": "x"}]}, "input[0].role", "invalid_request"),
    ({"instructions": ["x"]}, "instructions", "invalid_request"),
    ({"temperature": 2.5}, "temperature", "invalid_request"),
    ({"top_p": -0.1}, "top_p", "invalid_request"),
    ({"max_output_tokens": 15}, "max_output_tokens", "invalid_request"),
    ({"max_output_tokens": MAX_OUTPUT_TOKENS + 1}, "max_output_tokens", "invalid_request"),
    ({"max_output_tokens": True}, "max_output_tokens", "invalid_request"),
    ({"max_output_tokens": 10**30}, "max_output_tokens", "invalid_request"),
    ({"metadata": {"k": 1}}, "metadata", "invalid_request"),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata", "invalid_request"),
    ({"store": False}, "store", "invalid_request"),  # with background: true
    ({"stream": "yes"}, "stream", "invalid_request"),
    ({"truncation": "sometimes"}, "truncation", "invalid_request"),
    ({"model": ""}, "model", "invalid_request"),
    ({"previous_response_id": 7}, "previous_response_id", "invalid_request"),
    (
        {"previous_response_id": "resp_" + "A" * 32},
        "previous_response_id",
        "previous_response_not_found",
    ),
]


@pytest.mark.parametrize(("fields", "param", "code"), REFUSED)
def test_a_request_outside_the_text_subset_is_a_400_naming_it_and_queues_nothing(
    app: Flask, client: FlaskClient, fields: dict[str, Any], param: str, code: str
) -> None:
    jobs_before = _job_count(app)
    body = {"model": "fake", "input": "hi", "background": True, **fields}
    r = client.post("/v1/responses", json=body, headers=ALICE)
    assert r.status_code == 400, (r.status_code, r.get_data(as_text=True))
    openai_schemas.check("ErrorResponse", r.get_json())
    error = r.get_json()["error"]
    assert (error["param"], error["code"], error["type"]) == (
        param,
        code,
        "invalid_request_error",
    ), error
    assert _job_count(app) == jobs_before


def test_settings_that_change_nothing_for_text_are_accepted(client: FlaskClient) -> None:
    created = _create(
        client,
        tools=[],
        tool_choice="auto",
        parallel_tool_calls=False,
        include=[],
        reasoning=None,
        stream_options={"include_obfuscation": False},
        text={"format": {"type": "text"}},
        conversation=None,
    )
    assert created["status"] == "queued"


def test_a_background_response_is_a_queued_job_whose_request_is_the_translation(
    app: Flask, client: FlaskClient
) -> None:
    created = _create(
        client,
        instructions="Answer briefly.",
        temperature=0.5,
        top_p=0.9,
        max_output_tokens=64,
        metadata={"ticket": "42"},
        user="u-1",
        input=[
            {"role": "developer", "content": "Use French."},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "One"},
                    {"type": "input_text", "text": "two"},
                ],
            },
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Un deux", "annotations": []}],
            },
            {"role": "user", "content": "Three?"},
        ],
        text={
            "format": {
                "type": "json_schema",
                "name": "n",
                "schema": {"type": "object"},
                "strict": True,
            }
        },
    )
    openai_schemas.check("Response", created)
    assert created["id"].startswith("resp_") and created["status"] == "queued"
    assert created["output"] == [] and created["background"] is True
    assert (created["instructions"], created["temperature"], created["top_p"]) == (
        "Answer briefly.",
        0.5,
        0.9,
    )
    assert (created["max_output_tokens"], created["metadata"]) == (64, {"ticket": "42"})
    record = _record(app, created["id"])
    assert record["api"] == "responses" and record["status"] == "queued"
    assert json.loads(record["request"]) == {
        "model": "fake",
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "developer", "content": "Use French."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "One"}, {"type": "text", "text": "two"}],
            },
            {"role": "assistant", "content": "Un deux"},
            {"role": "user", "content": "Three?"},
        ],
        "temperature": 0.5,
        "top_p": 0.9,
        "user": "u-1",
        "max_tokens": 64,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "n", "schema": {"type": "object"}, "strict": True},
        },
    }


def test_either_id_finds_the_same_record(client: FlaskClient) -> None:
    created = _create(client)
    token = created["id"].removeprefix("resp_")
    job = client.get(f"/v1/jobs/job_{token}", headers=ALICE)
    assert job.status_code == 202 and job.get_json()["status"] == "queued"
    for rid in (created["id"], f"job_{token}"):
        r = client.get(f"/v1/responses/{rid}", headers=ALICE)
        assert r.status_code == 200 and r.get_json() == created


def test_another_keys_response_is_not_found_anywhere(client: FlaskClient) -> None:
    rid = _create(client)["id"]
    r = client.get(f"/v1/responses/{rid}", headers=BOB)
    assert (r.status_code, r.get_json()["error"]["code"]) == (404, "response_not_found")
    assert client.get(f"/v1/responses/{rid}?stream=true", headers=BOB).status_code == 404
    assert client.post(f"/v1/responses/{rid}/cancel", headers=BOB).status_code == 404
    assert client.delete(f"/v1/responses/{rid}", headers=BOB).status_code == 404
    r = client.post("/v1/responses", json={"input": "x", "previous_response_id": rid}, headers=BOB)
    assert (r.status_code, r.get_json()["error"]["code"]) == (400, "previous_response_not_found")
    assert client.get(f"/v1/responses/{rid}", headers=ALICE).get_json()["status"] == "queued"


def test_a_plain_job_is_no_response_and_a_response_no_stored_completion(
    client: FlaskClient,
) -> None:
    job = client.post(
        "/v1/jobs", json={"messages": [{"role": "user", "content": "x"}]}, headers=ALICE
    ).get_json()
    assert client.get(f"/v1/responses/{job['id']}", headers=ALICE).status_code == 404
    rid = _create(client)["id"]
    job_id = "job_" + rid.removeprefix("resp_")
    r = client.get(f"/v1/chat/completions/{job_id}", headers=ALICE)
    assert (r.status_code, r.get_json()["error"]["code"]) == (404, "job_not_found")


def test_a_pending_response_cannot_be_continued(client: FlaskClient) -> None:
    rid = _create(client)["id"]
    r = client.post(
        "/v1/responses", json={"input": "x", "previous_response_id": rid}, headers=ALICE
    )
    assert r.status_code == 400
    assert r.get_json()["error"]["param"] == "previous_response_id"
    assert "queued" in r.get_json()["error"]["message"]


def test_cancel_answers_the_cancelled_response(client: FlaskClient) -> None:
    rid = _create(client)["id"]
    r = client.post(f"/v1/responses/{rid}/cancel", headers=ALICE)
    assert r.status_code == 200
    openai_schemas.check("Response", r.get_json())
    assert r.get_json()["status"] == "cancelled"
    again = client.post(f"/v1/responses/{rid}/cancel", headers=ALICE)
    assert again.get_json()["status"] == "cancelled"


def test_delete_cancels_a_queued_response_and_removes_every_key(
    app: Flask, client: FlaskClient
) -> None:
    rid = _create(client, metadata={"x": "y"})["id"]
    job_id = "job_" + rid.removeprefix("resp_")
    redis = app.extensions["chatq"].redis
    assert redis.zscore(keys.leases_of(job_id), job_id) is not None
    r = client.delete(f"/v1/responses/{rid}", headers=ALICE)
    assert (r.status_code, r.get_json()) == (
        200,
        {"id": rid, "object": "response.deleted", "deleted": True},
    )
    assert not redis.exists(keys.job(job_id), keys.text(job_id), keys.events(job_id))
    assert redis.zscore(keys.leases_of(job_id), job_id) is None
    assert client.get(f"/v1/responses/{rid}", headers=ALICE).status_code == 404
    assert client.get(f"/v1/jobs/{job_id}", headers=ALICE).status_code == 404
    assert client.delete(f"/v1/responses/{rid}", headers=ALICE).status_code == 404


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("stream=true&starting_after=three", "starting_after"),
        ("stream=maybe", "stream"),
        ("stream=true&include=reasoning.encrypted_content", "include"),
        ("include_obfuscation=true&stream=true", "include_obfuscation"),
        ("wait=soon", "wait"),
    ],
)
def test_a_bad_retrieve_option_is_a_400_naming_it(
    client: FlaskClient, query: str, param: str
) -> None:
    rid = _create(client)["id"]
    r = client.get(f"/v1/responses/{rid}?{query}", headers=ALICE)
    assert r.status_code == 400, r.get_data(as_text=True)
    assert r.get_json()["error"]["param"] == param


def test_a_last_event_id_that_is_no_sequence_number_is_an_invalid_cursor(
    client: FlaskClient,
) -> None:
    rid = _create(client)["id"]
    r = client.get(f"/v1/responses/{rid}?stream=true", headers={**ALICE, "Last-Event-ID": ","})
    assert r.status_code == 400
    assert (r.get_json()["error"]["param"], r.get_json()["error"]["code"]) == (
        "Last-Event-ID",
        "invalid_cursor",
    )


def test_an_idempotency_key_names_one_response_and_not_a_job_of_the_same_chat(
    client: FlaskClient,
) -> None:
    headers = {**ALICE, "Idempotency-Key": "responses-idem-1"}
    body = {"model": "fake", "input": "same", "background": True}
    first = client.post("/v1/responses", json=body, headers=headers).get_json()
    second = client.post("/v1/responses", json=body, headers=headers).get_json()
    assert first["id"] == second["id"]
    chat = {"model": "fake", "messages": [{"role": "user", "content": "same"}]}
    r = client.post("/v1/jobs", json=chat, headers=headers)
    assert (r.status_code, r.get_json()["error"]["code"]) == (422, "idempotency_key_reused")


def test_priority_is_the_jobs_own(app: Flask, client: FlaskClient) -> None:
    r = client.post(
        "/v1/responses?priority=batch",
        headers=ALICE,
        json={"model": "fake", "input": "later", "background": True},
    )
    assert _record(app, r.get_json()["id"])["priority"] == "batch"


def test_truncation_auto_drops_the_oldest_turns_and_disabled_refuses(
    redis_server: LocalRedis,
) -> None:
    settings = config.load(
        {
            "CHATQ_REDIS_URL": redis_server.url,
            "CHATQ_API_KEYS": f"alice:{ALICE_KEY}",
            "CHATQ_MAX_CONTEXT_TOKENS": "120",
        }
    )
    with in_process(settings) as small_app:
        small = small_app.test_client()
        turns = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 12}
            for i in range(9)
        ]
        body = {
            "model": "fake",
            "input": turns,
            "instructions": "Keep me.",
            "background": True,
            "max_output_tokens": 16,
        }
        refused = small.post(
            "/v1/responses", json={**body, "truncation": "disabled"}, headers=ALICE
        )
        assert (refused.status_code, refused.get_json()["error"]["code"]) == (
            422,
            "context_length_exceeded",
        )
        fitted = small.post("/v1/responses", json={**body, "truncation": "auto"}, headers=ALICE)
        assert fitted.status_code == 200, fitted.get_data(as_text=True)
        assert fitted.get_json()["truncation"] == "auto"
        sent = json.loads(_record(small.application, fitted.get_json()["id"])["request"])
        assert sent["messages"][0] == {"role": "system", "content": "Keep me."}
        assert sent["messages"][-1] == turns[-1] and len(sent["messages"]) < len(turns) + 1
