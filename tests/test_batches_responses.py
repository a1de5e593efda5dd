"""Batches on /v1/responses through real processes: the lines run as response jobs, their
output carries OpenAI's Response object (as GET /v1/responses/{id} shows it), their usage is
the batch's, and a line the Responses API refuses is an error line naming the same parameter."""

from __future__ import annotations

from typing import Any

import requests
from openai import OpenAI

from chatq import keys
from tests import openai_schemas
from tests.batchkit import (
    content,
    jsonl,
    parse_output,
    request_line,
    run_batch,
    session,
    wait_ended,
)
from tests.conftest import Stack
from tests.procs import ALICE_KEY

RESPONSES = "/v1/responses"
ENDED = ("completed", "failed", "cancelled", "expired")


def _line(custom_id: str, **body: Any) -> dict[str, Any]:
    """One input line of a /v1/responses batch."""
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": RESPONSES,
        "body": {"model": "fake", **body},
    }


def _by_custom_id(lines: list[Any]) -> dict[str, Any]:
    found = {line.custom_id: line for line in lines}
    assert len(found) == len(lines), lines
    return found


def test_a_responses_batch_runs_response_jobs_and_writes_response_objects(stack: Stack) -> None:
    client = OpenAI(base_url=stack.url + "/v1", api_key=ALICE_KEY, max_retries=0, timeout=60)
    lines = [
        _line("plain", input="say hello please"),
        _line(
            "styled",
            input=[{"role": "user", "content": [{"type": "input_text", "text": "two parts"}]}],
            instructions="Be brief.",
            metadata={"topic": "greeting"},
            temperature=0.5,
        ),
        _line("cut", model="fake:tokens=40", input="long answer", max_output_tokens=16),
        _line("refused", model="fake:status=400", input="the upstream says no"),
    ]
    uploaded = client.files.create(file=("responses.jsonl", jsonl(lines)), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint=RESPONSES, completion_window="24h"
    )
    assert batch.endpoint == RESPONSES
    while batch.status not in ENDED:
        batch = client.batches.retrieve(batch.id, extra_query={"wait": 20})
    assert batch.status == "completed", batch
    assert batch.request_counts is not None
    assert (
        batch.request_counts.total,
        batch.request_counts.completed,
        batch.request_counts.failed,
    ) == (4, 3, 1)
    assert batch.output_file_id and batch.error_file_id
    output = _by_custom_id(parse_output(client.files.content(batch.output_file_id).text))
    assert set(output) == {"plain", "styled", "cut"}
    bodies = {cid: _checked_response(stack, line) for cid, line in output.items()}

    assert bodies["plain"]["status"] == "completed"
    assert bodies["plain"]["output_text"] == "say hello please"
    styled = bodies["styled"]
    assert (styled["instructions"], styled["metadata"], styled["temperature"]) == (
        "Be brief.",
        {"topic": "greeting"},
        0.5,
    )
    assert styled["output_text"] == "two parts"
    cut = bodies["cut"]
    assert cut["status"] == "incomplete" and cut["max_output_tokens"] == 16
    assert cut["incomplete_details"] == {"reason": "max_output_tokens"}
    assert len(cut["output_text"].split()) == 16

    # The batch's usage is the sum of its lines' (the failed line used none).
    assert batch.usage is not None
    assert batch.usage.input_tokens == sum(b["usage"]["input_tokens"] for b in bodies.values())
    assert batch.usage.output_tokens == sum(b["usage"]["output_tokens"] for b in bodies.values())
    assert batch.usage.output_tokens == 3 + 2 + 16

    (refused,) = parse_output(client.files.content(batch.error_file_id).text)
    assert refused.custom_id == "refused" and refused.error is None
    assert refused.response is not None and refused.response.status_code == 400
    assert refused.response.body["error"]["code"] == "upstream_error"


def _checked_response(stack: Stack, line: Any) -> dict[str, Any]:
    """The Response object of an output line, checked against OpenAI's published schema, the
    job that ran it and what GET /v1/responses/{id} answers."""
    assert line.error is None and line.response is not None
    assert line.response.status_code == 200
    body = dict(line.response.body)
    openai_schemas.check("Response", body)
    job_id = line.response.request_id
    assert body["id"] == "resp_" + job_id.removeprefix("job_")
    assert stack.redis.hget(keys.job(job_id), "api") == "responses"
    assert stack.redis.hget(keys.job(job_id), "priority") == "batch"
    got = session().get(f"{stack.url}/v1/responses/{body['id']}", timeout=10)
    assert got.status_code == 200 and got.json() == body
    return body


# Bodies the Responses API refuses, each as POST /v1/responses does.
REFUSED = [
    {"input": "x", "tools": [{"type": "web_search"}]},
    {},
    {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x"}]}]},
    {"input": "x", "temperature": 3},
    {"input": "x", "max_output_tokens": 4},
    {"messages": [{"role": "user", "content": "a chat body"}]},
    {"input": "x", "text": {"format": {"type": "json_schema"}}},
]
# Bodies the Responses API takes but a batch line cannot honour: (body, param, code).
BATCH_ONLY = [
    ({"input": "x", "stream": True}, "body.stream", "invalid_request"),
    ({"input": "x", "truncation": "auto"}, "body.truncation", "unsupported_parameter"),
    (
        {"input": "x", "previous_response_id": "resp_" + "A" * 32},
        "body.previous_response_id",
        "unsupported_parameter",
    ),
]


def test_a_line_the_responses_api_refuses_is_an_error_line_naming_the_same_parameter(
    stack: Stack,
) -> None:
    s = session()
    direct = []
    for body in REFUSED:
        r = s.post(f"{stack.url}{RESPONSES}", json={"model": "fake", **body}, timeout=30)
        assert r.status_code == 400, (body, r.text)
        direct.append(r.json()["error"])
    lines: list[dict[str, Any] | str] = [_line(f"bad{i}", **b) for i, b in enumerate(REFUSED)]
    lines += [_line(f"batch{i}", **b) for i, (b, _, _) in enumerate(BATCH_ONLY)]
    lines += [request_line("chat", "a chat line"), _line("good", input="still runs")]
    batch = wait_ended(stack.url, run_batch(stack.url, lines, endpoint=RESPONSES)["id"])
    assert batch["status"] == "completed"
    n = len(lines)
    assert batch["request_counts"] == {"total": n, "completed": 1, "failed": n - 1}
    found = [(e["line"], e["code"], e["param"]) for e in batch["errors"]["data"]]
    expected = [(i + 1, e["code"], f"body.{e['param']}") for i, e in enumerate(direct)]
    expected += [
        (len(REFUSED) + i + 1, code, param) for i, (_, param, code) in enumerate(BATCH_ONLY)
    ]
    expected.append((n - 1, "url_mismatch", "url"))
    assert found == expected
    errors = _by_custom_id(content(stack.url, batch["error_file_id"]))
    for i, error in enumerate(direct):
        line_error = errors[f"bad{i}"].error
        assert line_error.message == f"Line {i + 1}: {error['message']}"
    (good,) = content(stack.url, batch["output_file_id"])
    assert good.custom_id == "good" and good.response.body["output_text"] == "still runs"


def test_the_openapi_document_and_the_create_check_name_both_endpoints(stack: Stack) -> None:
    document = requests.get(f"{stack.url}/openapi.json", timeout=10).json()
    endpoint = document["components"]["schemas"]["BatchCreateRequest"]["properties"]["endpoint"]
    assert endpoint["enum"] == ["/v1/chat/completions", RESPONSES]
    uploaded = (
        session()
        .post(
            f"{stack.url}/v1/files",
            data={"purpose": "batch"},
            files={"file": ("in.jsonl", jsonl([_line("a", input="x")]))},
            timeout=30,
        )
        .json()
    )
    body = {
        "input_file_id": uploaded["id"],
        "endpoint": "/v1/embeddings",
        "completion_window": "24h",
    }
    r = session().post(f"{stack.url}/v1/batches", json=body, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "endpoint"
    assert RESPONSES in r.json()["error"]["message"]
