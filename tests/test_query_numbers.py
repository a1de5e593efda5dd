"""Numbers in a query (`limit`, `starting_after`, `wait`, `cursor`), a header (`Last-Event-ID`)
or a form field (`expires_after[seconds]`) are ASCII digits only: `int()` would take other
scripts' digits ("٣"), `_`, `+` and spaces, and raise on characters it calls digits ("²"),
which was a 500. Every one is a 400 in OpenAI's shape naming the parameter. In process, on a
Redis of its own, with no worker."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from chatq.config.settings import Settings
from scripts.localredis import LocalRedis
from tests.batchkit import CHAT, jsonl, request_line
from tests.inproc import in_process
from tests.procs import ALICE_KEY

AUTH = {"Authorization": f"Bearer {ALICE_KEY}"}
# Not ASCII digits (superscript two, Arabic-Indic and fullwidth three), or too many of them;
# the superscript and the 5,000 digits made int() raise (a 500).
NOT_NUMBERS = ["\u00b2", "\u0663", "\uff13", "1_0", "%2B3", "-3", "3.0", " 3", "3 ", "", "9" * 5000]

# What a parameter takes besides whole numbers: seconds (and spaces, as in a Prefer header);
# a sequence number before the first (-1), or after the last.
ALSO_TAKEN = {"wait": (" 3", "3 ", "3.0"), "starting_after": ("-3", "9" * 5000)}


@pytest.fixture(scope="module")
def client() -> Iterator[FlaskClient]:
    server = LocalRedis().start()
    settings = Settings(
        redis_url=server.url, api_keys=(("alice", ALICE_KEY),), default_model="fake"
    )
    with in_process(settings) as app:
        yield app.test_client()
    server.stop()


@pytest.fixture(scope="module")
def made(client: FlaskClient) -> dict[str, str]:
    """One of each thing the paths below name: a file, a batch, a webhook, a job, a response."""
    file_id = _upload(client).get_json()["id"]
    batch = {"input_file_id": file_id, "endpoint": CHAT, "completion_window": "24h"}
    hook = {"url": "https://hooks.example.com/chatq"}
    job = {"model": "fake", "messages": [{"role": "user", "content": "x"}]}
    response = {"model": "fake", "input": "hi", "background": True}
    return {
        "batch": _made(client.post("/v1/batches", json=batch, headers=AUTH)),
        "webhook": _made(client.post("/v1/webhooks", json=hook, headers=AUTH)),
        "job": _made(client.post("/v1/jobs?wait=0", json=job, headers=AUTH)),
        "response": _made(client.post("/v1/responses", json=response, headers=AUTH)),
    }


def _made(r: TestResponse) -> str:
    assert r.status_code in (200, 202), r.get_data(as_text=True)
    return str(r.get_json()["id"])


def _upload(client: FlaskClient, **fields: str) -> TestResponse:
    data = jsonl([request_line("a", "x")])
    form: dict[str, Any] = {"purpose": "batch", "file": (io.BytesIO(data), "in.jsonl"), **fields}
    return client.post("/v1/files", data=form, headers=AUTH, content_type="multipart/form-data")


def _refused(r: TestResponse, param: str, code: str = "invalid_request") -> None:
    try:
        # Not the body when it is not refused: it may be a stream that never ends.
        assert r.status_code == 400, f"{r.status_code} for {param}"
        error = r.get_json()["error"]
        assert (error["type"], error["param"], error["code"]) == (
            "invalid_request_error",
            param,
            code,
        ), error
    finally:
        r.close()


PATHS = {
    "files": ("/v1/files?limit={}", "limit", "invalid_request"),
    "batches": ("/v1/batches?limit={}", "limit", "invalid_request"),
    "deliveries": ("/v1/webhooks/{webhook}/deliveries?limit={}", "limit", "invalid_request"),
    "starting_after": (
        "/v1/responses/{response}?stream=true&starting_after={}",
        "starting_after",
        "invalid_request",
    ),
    "batch_wait": ("/v1/batches/{batch}?wait={}", "wait", "invalid_wait"),
    "job_wait": ("/v1/jobs/{job}?wait={}", "wait", "invalid_wait"),
}


CASES = [
    pytest.param(where, value, id=f"{where}-{value[:8]!r}")
    for where, (_, param, _) in PATHS.items()
    for value in NOT_NUMBERS
    if value not in ALSO_TAKEN.get(param, ())
]


@pytest.mark.parametrize(("where", "value"), CASES)
def test_a_query_number_that_is_not_ascii_digits_is_a_400_naming_it(
    client: FlaskClient, made: dict[str, str], where: str, value: str
) -> None:
    template, param, code = PATHS[where]
    path = template.replace("{}", "\x00").format(**made).replace("\x00", value)
    _refused(client.get(path, headers=AUTH), param, code)


@pytest.mark.parametrize("value", ["٣", "²", "1_0", " 3"])
def test_a_last_event_id_that_is_not_ascii_digits_is_an_invalid_cursor(
    client: FlaskClient, made: dict[str, str], value: str
) -> None:
    r = client.get(
        f"/v1/responses/{made['response']}?stream=true", headers={**AUTH, "Last-Event-ID": value}
    )
    _refused(r, "Last-Event-ID", "invalid_cursor")


def test_the_events_cursor_takes_ascii_digits_only(
    client: FlaskClient, made: dict[str, str]
) -> None:
    r = client.get(f"/v1/jobs/{made['job']}/events?cursor=٣-٣", headers=AUTH)
    _refused(r, "cursor", "invalid_cursor")


@pytest.mark.parametrize("value", ["٣٦٠٠", "3600²", "3_600", "+3600"])
def test_an_upload_s_expiry_seconds_are_ascii_digits(client: FlaskClient, value: str) -> None:
    r = _upload(client, **{"expires_after[anchor]": "created_at", "expires_after[seconds]": value})
    _refused(r, "expires_after.seconds")


@pytest.mark.parametrize("value", ["٣٦٠٠", 3600.5, True])
def test_a_batch_s_output_expiry_seconds_are_a_whole_number(
    client: FlaskClient, made: dict[str, str], value: Any
) -> None:
    file_id = _upload(client).get_json()["id"]
    body = {
        "input_file_id": file_id,
        "endpoint": CHAT,
        "completion_window": "24h",
        "output_expires_after": {"anchor": "created_at", "seconds": value},
    }
    r = client.post("/v1/batches", json=body, headers=AUTH)
    _refused(r, "output_expires_after.seconds")


def test_ascii_numbers_still_work(client: FlaskClient, made: dict[str, str]) -> None:
    assert client.get("/v1/files?limit=2", headers=AUTH).status_code == 200
    assert client.get("/v1/batches?limit=100", headers=AUTH).status_code == 200
    hook = made["webhook"]
    assert client.get(f"/v1/webhooks/{hook}/deliveries?limit=7", headers=AUTH).status_code == 200
    expiring = {"expires_after[anchor]": "created_at", "expires_after[seconds]": "3600"}
    assert _upload(client, **expiring).status_code == 200
