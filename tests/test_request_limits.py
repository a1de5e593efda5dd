"""Request limits: values outside OpenAI's published ranges and values over this server's caps
(CHATQ_MAX_N, CHATQ_MAX_OUTPUT_TOKENS) are a 400 naming the field before anything is queued,
on both ways in; /openapi.json states the same bounds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient

from chatq import keys
from chatq.admission import fairness
from chatq.config import settings as config
from chatq.metrics import queue_stats
from scripts.localredis import LocalRedis
from tests import chatq_schemas
from tests.conftest import Stack
from tests.inproc import in_process
from tests.procs import ALICE_KEY

MAX_N, MAX_OUTPUT_TOKENS = 4, 100
PATHS = ["/v1/jobs", "/v1/chat/completions"]
# Respond at once with the job on the front door instead of holding until it ends.
HEADERS = {"Authorization": f"Bearer {ALICE_KEY}", "Prefer": "respond-async"}

# field -> values OpenAI's schema (or this server's cap) refuses.
OUT_OF_RANGE: dict[str, list[Any]] = {
    "temperature": [9, -0.1, 2.0001],
    "top_p": [1.5, -1],
    "presence_penalty": [2.5, -3],
    "frequency_penalty": [-2.5, 7],
    "n": [0, -1, 129, MAX_N + 1],
    "top_logprobs": [21, -1],
    "seed": [2**63, -(2**63) - 1, 1.5, "7"],
    "max_tokens": [0, -5, MAX_OUTPUT_TOKENS + 1],
    "max_completion_tokens": [0, MAX_OUTPUT_TOKENS + 1],
    "logit_bias": [{"50256": 101}, {"1": -101}, {"1": 1.5}, {"1": "x"}, {"1": True}, "x"],
    "logprobs": ["yes", 1],
    "stop": [[], ["a", "b", "c", "d", "e"]],
}
# The edges, which are allowed.
IN_RANGE: dict[str, list[Any]] = {
    "temperature": [0, 2],
    "top_p": [0, 1],
    "presence_penalty": [-2, 2],
    "frequency_penalty": [-2.0, 2.0],
    "n": [1, MAX_N],
    "top_logprobs": [0, 20],
    "seed": [-(2**63), 2**63 - 1],
    "max_tokens": [1, MAX_OUTPUT_TOKENS],
    "max_completion_tokens": [MAX_OUTPUT_TOKENS],
    "logprobs": [True],
    "logit_bias": [{"1": -100, "2": 100}],
    "stop": [["a", "b", "c", "d"], "x"],
}


def _cases(table: dict[str, list[Any]]) -> list[tuple[str, Any]]:
    return [(name, value) for name, values in table.items() for value in values]


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": "fake", "messages": [{"role": "user", "content": "limits"}], **fields}


@pytest.fixture(scope="module")
def redis_server() -> Iterator[LocalRedis]:
    server = LocalRedis().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def app(redis_server: LocalRedis) -> Iterator[Flask]:
    """The real app on a Redis of its own (no worker: accepted jobs stay queued)."""
    settings = config.load(
        {
            "CHATQ_REDIS_URL": redis_server.url,
            "CHATQ_API_KEYS": f"alice:{ALICE_KEY}",
            "CHATQ_DEFAULT_MODEL": "fake",
            "CHATQ_MAX_N": str(MAX_N),
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


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("field,value", _cases(OUT_OF_RANGE))
def test_a_value_out_of_range_or_over_the_cap_is_a_400_naming_it_and_queues_nothing(
    app: Flask, client: FlaskClient, path: str, field: str, value: Any
) -> None:
    jobs_before = _job_count(app)
    r = client.post(path, json=_body(**{field: value}), headers=HEADERS)
    assert r.status_code == 400, (r.status_code, r.get_data(as_text=True))
    error = r.get_json()["error"]
    assert (error["code"], error["param"], error["type"]) == (
        "invalid_request",
        field,
        "invalid_request_error",
    )
    assert _job_count(app) == jobs_before


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("field,value", _cases(IN_RANGE))
def test_the_edges_of_each_range_are_accepted(
    client: FlaskClient, path: str, field: str, value: Any
) -> None:
    r = client.post(path, json=_body(**{field: value}), headers=HEADERS)
    assert r.status_code == 202, (r.status_code, r.get_data(as_text=True))


def test_an_over_cap_error_names_the_cap(client: FlaskClient) -> None:
    r = client.post("/v1/jobs", json=_body(n=MAX_N + 1), headers=HEADERS)
    assert str(MAX_N) in r.get_json()["error"]["message"]


def _stored_request(app: Flask, job_id: str) -> dict[str, Any]:
    raw = app.extensions["chatq"].redis.hget(keys.job(job_id), "request")
    request: dict[str, Any] = json.loads(raw)
    return request


@pytest.mark.parametrize("path", PATHS)
def test_a_request_naming_no_output_limit_is_sent_with_the_cap(
    app: Flask, client: FlaskClient, path: str
) -> None:
    def sent(**fields: Any) -> dict[str, Any]:
        r = client.post(path, json=_body(**fields), headers=HEADERS)
        assert r.status_code == 202
        return _stored_request(app, r.get_json()["id"])

    assert sent()["max_tokens"] == MAX_OUTPUT_TOKENS
    assert sent(max_tokens=None)["max_tokens"] == MAX_OUTPUT_TOKENS
    assert sent(max_tokens=7)["max_tokens"] == 7
    own = sent(max_completion_tokens=9)
    assert own["max_completion_tokens"] == 9 and "max_tokens" not in own


def test_without_caps_only_openais_ranges_apply(redis_server: LocalRedis) -> None:
    settings = config.load(
        {
            "CHATQ_REDIS_URL": redis_server.url,
            "CHATQ_API_KEYS": f"alice:{ALICE_KEY}",
            "CHATQ_MAX_N": "0",
            "CHATQ_MAX_OUTPUT_TOKENS": "0",
        }
    )
    with in_process(settings) as app:
        uncapped = app.test_client()
        r = uncapped.post("/v1/jobs", json=_body(n=128, max_tokens=10**9), headers=HEADERS)
        assert r.status_code == 202, r.get_data(as_text=True)
        assert r.get_json()["id"]
        assert uncapped.post("/v1/jobs", json=_body(n=129), headers=HEADERS).status_code == 400


# --- the document states the same bounds ------------------------------------------------------


def test_the_served_document_and_the_server_agree_on_every_bound(client: FlaskClient) -> None:
    doc = client.get("/openapi.json").get_json()
    assert (
        doc["components"]["schemas"]["ChatCompletionRequest"]["properties"]["n"]["maximum"] == MAX_N
    )
    validator = chatq_schemas.validator("ChatCompletionRequest", doc)
    for field, value in _cases(OUT_OF_RANGE):
        assert not validator.is_valid(_body(**{field: value})), (field, value)
    for field, value in _cases(IN_RANGE):
        assert validator.is_valid(_body(**{field: value})), (field, value)


# --- on a real stack --------------------------------------------------------------------------


def test_a_rejected_request_queues_nothing_on_a_real_stack(stack: Stack) -> None:
    def state() -> tuple[int, dict[str, int]]:
        jobs = sum(1 for _ in stack.redis.scan_iter(keys.jobs_pattern(), count=1000))
        return jobs, queue_stats.depths(stack.redis, fairness.plan(config.load(stack.env)))

    before = state()
    for path in PATHS:
        for field, value in [
            ("temperature", 9),
            ("n", 129),
            ("max_tokens", 0),
            ("logit_bias", {"1": 500}),
        ]:
            r = requests.post(
                f"{stack.url}{path}", json=_body(**{field: value}), headers=HEADERS, timeout=10
            )
            assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text
    assert state() == before
