"""JSON that no job can carry is refused where it is parsed: a number beyond a 64-bit float
(`1e400`) and a lone UTF-16 surrogate (`"\\ud800"`), on every way in: the three submit
endpoints (the real app in process, on a Redis of its own) and a batch's lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from chatq import keys
from chatq.batches import lines
from chatq.batches.lines import Line, LineError, parse_line
from chatq.chat.json_input import parse
from chatq.config import settings as config
from chatq.config.settings import Settings
from scripts.localredis import LocalRedis
from tests.batchkit import CHAT, request_line
from tests.inproc import in_process
from tests.procs import ALICE_KEY

# Respond at once with the job instead of holding the request until it ends.
HEADERS = {
    "Authorization": f"Bearer {ALICE_KEY}",
    "Prefer": "respond-async",
    "Content-Type": "application/json",
}
# A bound in a JSON Schema (a tool's parameters, a response's format): passed to the upstream
# as sent, checked by no one.
HUGE = '{"type": "object", "properties": {"x": {"type": "number", "maximum": 1e400}}}'
CHAT_TOOLS = '"tools": [{"type": "function", "function": {"name": "f", "parameters": %s}}]'
RESPONSE_FORMAT = '"text": {"format": {"type": "json_schema", "name": "x", "schema": %s}}'
HUGE_PARAM = {
    "/v1/jobs": "tools[0].function.parameters.properties.x.maximum",
    "/v1/chat/completions": "tools[0].function.parameters.properties.x.maximum",
    "/v1/responses": "text.format.schema.properties.x.maximum",
}
LONE = '"lone \\ud800 surrogate"'
PAIRED = '"paired \\ud83d\\ude00 surrogates"'


def _body(path: str, text: str, huge: bool = False) -> str:
    """A body for `path` whose prompt is the JSON string `text` (with the huge bound)."""
    if path == "/v1/responses":
        extra = ", " + RESPONSE_FORMAT % HUGE if huge else ""
        return f'{{"model": "fake", "input": {text}{extra}}}'
    extra = ", " + CHAT_TOOLS % HUGE if huge else ""
    return f'{{"model": "fake", "messages": [{{"role": "user", "content": {text}}}]{extra}}}'


def _prompt_param(path: str) -> str:
    return "input" if path == "/v1/responses" else "messages[0].content"


@pytest.fixture(scope="module")
def app() -> Iterator[Flask]:
    """The real app on a Redis of its own (no worker: accepted jobs stay queued)."""
    server = LocalRedis().start()
    settings = config.load(
        {
            "CHATQ_REDIS_URL": server.url,
            "CHATQ_API_KEYS": f"alice:{ALICE_KEY}",
            "CHATQ_DEFAULT_MODEL": "fake",
        }
    )
    with in_process(settings) as app:
        yield app
    server.stop()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def _job_count(app: Flask) -> int:
    return sum(1 for _ in app.extensions["chatq"].redis.scan_iter(keys.jobs_pattern()))


def _refused(app: Flask, client: FlaskClient, path: str, body: str) -> dict[str, Any]:
    jobs_before = _job_count(app)
    r = client.post(path, data=body, headers=HEADERS)
    assert r.status_code == 400, (r.status_code, r.get_data(as_text=True))
    assert _job_count(app) == jobs_before
    error: dict[str, Any] = r.get_json()["error"]
    assert error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize("path", list(HUGE_PARAM))
def test_a_number_beyond_a_float_is_a_400_naming_it(
    app: Flask, client: FlaskClient, path: str
) -> None:
    error = _refused(app, client, path, _body(path, '"hi"', huge=True))
    assert (error["code"], error["param"]) == ("number_out_of_range", HUGE_PARAM[path])


@pytest.mark.parametrize("path", list(HUGE_PARAM))
def test_a_lone_surrogate_is_a_400_naming_it(app: Flask, client: FlaskClient, path: str) -> None:
    error = _refused(app, client, path, _body(path, LONE))
    assert (error["code"], error["param"]) == ("invalid_unicode", _prompt_param(path))


@pytest.mark.parametrize("path", list(HUGE_PARAM))
def test_escaped_surrogate_pairs_are_characters_and_pass(client: FlaskClient, path: str) -> None:
    r = client.post(path, data=_body(path, PAIRED), headers=HEADERS)
    assert r.status_code in (200, 202), r.get_data(as_text=True)


def test_a_lone_surrogate_in_a_key_names_the_object_holding_it(
    app: Flask, client: FlaskClient
) -> None:
    body = _body("/v1/jobs", '"hi"')[:-1] + ', "metadata": {"k\\udc00": "v"}}'
    error = _refused(app, client, "/v1/jobs", body)
    assert (error["code"], error["param"]) == ("invalid_unicode", "metadata")


# --- batch lines ------------------------------------------------------------------------------


def _line(body: str) -> bytes:
    return f'{{"custom_id": "c1", "method": "POST", "url": "{CHAT}", "body": {body}}}\n'.encode()


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        (_body(CHAT, '"hi"', huge=True), "number_out_of_range", "body." + HUGE_PARAM[CHAT]),
        (_body(CHAT, LONE), "invalid_unicode", "body.messages[0].content"),
        (_body(CHAT, "NaN"), "invalid_json_line", None),
    ],
)
def test_a_batch_line_with_such_a_value_is_an_error_line_naming_it(
    body: str, code: str, param: str | None
) -> None:
    parsed = parse_line(_line(body), 3, CHAT, Settings())
    assert isinstance(parsed, LineError), parsed
    assert (parsed.code, parsed.param, parsed.number) == (code, param, 3)
    written = json.loads(lines.invalid_line("batch_x", parsed))
    assert written["error"]["code"] == code
    assert written["error"]["message"].startswith("Line 3: ")


def test_a_batch_line_with_paired_surrogates_is_a_request() -> None:
    raw = json.dumps(request_line("c1", "paired \U0001f600 surrogates")).encode()
    assert b"\\ud83d\\ude00" in raw  # json.dumps escapes it as a pair
    assert isinstance(parse_line(raw, 1, CHAT, Settings()), Line)


def test_the_parse_keeps_what_json_allows() -> None:
    text = '{"a": [1, 2.5, -0.0, 1e308, 1e-400, "\\u00e9\\ud83d\\ude00", "\\\\ud800"]}'
    assert parse(text) == {"a": [1, 2.5, -0.0, 1e308, 0.0, "\u00e9\U0001f600", "\\ud800"]}
