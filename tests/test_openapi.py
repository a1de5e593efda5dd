"""The OpenAPI document: a valid 3.1 document of every endpoint of the API, and what is served."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from jsonschema import Draft202012Validator
from openapi_spec_validator import OpenAPIV31SpecValidator, validate
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.conftest import Stack
from web.http import HEADERS
from web.openapi.document import document

# The endpoints of the HTTP contract (docs/api.md), by path, with their methods.
CONTRACT_PATHS = {
    "/v1/jobs": {"post"},
    "/v1/jobs/{id}": {"get"},
    "/v1/jobs/{id}/result": {"get"},
    "/v1/jobs/{id}/events": {"get"},
    "/v1/jobs/{id}/cancel": {"post"},
    "/v1/chat/completions": {"post"},
    "/v1/chat/completions/{id}": {"get"},
    "/v1/responses": {"post"},
    "/v1/responses/{id}": {"get", "delete"},
    "/v1/responses/{id}/cancel": {"post"},
    "/v1/models": {"get"},
    "/v1/queue": {"get"},
    "/healthz": {"get"},
    "/readyz": {"get"},
    "/metrics": {"get"},
    "/openapi.json": {"get"},
    "/": {"get"},
    "/v1/webhooks": {"post", "get"},
    "/v1/webhooks/{webhook_id}": {"get", "delete"},
    "/v1/webhooks/{webhook_id}/rotate_secret": {"post"},
    "/v1/webhooks/{webhook_id}/enable": {"post"},
    "/v1/webhooks/{webhook_id}/deliveries": {"get"},
    "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/replay": {"post"},
    "/v1/files": {"post", "get"},
    "/v1/files/{file_id}": {"get", "delete"},
    "/v1/files/{file_id}/content": {"get"},
    "/v1/batches": {"post", "get"},
    "/v1/batches/{batch_id}": {"get"},
    "/v1/batches/{batch_id}/cancel": {"post"},
    "/v1/usage": {"get"},
}
OPEN_PATHS = {"/healthz", "/readyz", "/metrics", "/openapi.json", "/"}

# The job object's fields (docs/api.md, "Jobs").
JOB_FIELDS = {
    "id",
    "object",
    "status",
    "model",
    "priority",
    "created_at",
    "started_at",
    "completed_at",
    "cached",
    "attempts",
    "output_text",
    "result",
    "error",
    "trace_id",
}

DOC_URI = "urn:chatq:openapi"


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, op) for path, item in doc["paths"].items() for method, op in item.items()
    ]


def _validator(doc: dict[str, Any], name: str) -> Draft202012Validator:
    """A JSON Schema validator for the component `name`, its `$ref`s resolved in `doc`."""
    resource = Resource.from_contents(doc, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(DOC_URI, resource)
    schema = {"$ref": f"{DOC_URI}#/components/schemas/{name}"}
    return Draft202012Validator(schema, registry=registry)


def test_document_is_a_valid_openapi_3_1_document() -> None:
    doc = document()
    assert doc["openapi"] == "3.1.0"
    validate(doc, cls=OpenAPIV31SpecValidator)


def test_every_endpoint_of_the_contract_is_described_with_its_methods() -> None:
    paths = document()["paths"]
    assert {path: set(item) for path, item in paths.items()} == CONTRACT_PATHS


def test_v1_endpoints_need_a_bearer_key_and_the_open_ones_none() -> None:
    doc = document()
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "A key from CHATQ_API_KEYS.",
    }
    for path, method, op in _operations(doc):
        security = op.get("security", doc.get("security"))
        if path == "/metrics":  # open; the series that name a key need the metrics token
            assert security == [{}, {"metricsToken": []}], (path, method)
            assert op["responses"]["401"]
        elif path in OPEN_PATHS:
            assert security == [], (path, method)
            assert "401" not in op["responses"], (path, method)
        else:
            assert path.startswith("/v1/")
            assert security == [{"bearerAuth": []}], (path, method)
            assert "401" in op["responses"], (path, method)


def test_job_schema_has_exactly_the_fields_of_the_contract() -> None:
    job = document()["components"]["schemas"]["Job"]
    assert set(job["properties"]) == JOB_FIELDS
    assert set(job["required"]) == JOB_FIELDS
    assert job["additionalProperties"] is False
    assert job["properties"]["status"]["enum"] == [
        "queued",
        "in_progress",
        "completed",
        "failed",
        "cancelled",
    ]
    assert job["properties"]["started_at"]["type"] == ["number", "null"]


def test_every_error_response_is_openai_shaped_with_retry_after_where_due() -> None:
    doc = document()
    for path, method, op in _operations(doc):
        for status, response in op["responses"].items():
            if int(status) < 400:
                continue
            schema = response["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/Error"}, (path, method, status)
            if status in ("429", "503"):
                assert "Retry-After" in response["headers"], (path, method, status)


def _header_refs(node: Any) -> set[str]:
    if isinstance(node, list):
        return {name for item in node for name in _header_refs(item)}
    if not isinstance(node, dict):
        return set()
    found = {name for value in node.values() for name in _header_refs(value)}
    target = node.get("$ref", "")
    prefix = "#/components/headers/"
    return found | {target[len(prefix) :]} if target.startswith(prefix) else found


def test_the_header_components_are_the_table_s_rows_and_each_is_used() -> None:
    doc = document()
    assert list(doc["components"]["headers"]) == [header.name for header in HEADERS]
    assert _header_refs(doc["paths"]) == {header.name for header in HEADERS}


def test_job_endpoints_answer_a_pending_job_with_its_location() -> None:
    paths = document()["paths"]
    for path, method in [
        ("/v1/jobs", "post"),
        ("/v1/jobs/{id}", "get"),
        ("/v1/jobs/{id}/result", "get"),
        ("/v1/chat/completions", "post"),
    ]:
        accepted = paths[path][method]["responses"]["202"]
        assert accepted["content"]["application/json"]["schema"]["$ref"].endswith("/Job")
        assert "Location" in accepted["headers"], path


def test_request_body_schema_accepts_openai_requests_and_rejects_bad_ones() -> None:
    doc = document()
    check = _validator(doc, "ChatCompletionRequest")
    good = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
    assert check.is_valid(good)
    assert check.is_valid(
        {"messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "t"}]}]}
    )
    assert not check.is_valid({"model": "m"})
    assert not check.is_valid({"messages": []})
    assert not check.is_valid({"messages": [{"role": "robot", "content": "hi"}]})
    jobs_body = _validator(doc, "JobRequest")
    assert jobs_body.is_valid(good) and not jobs_body.is_valid({**good, "stream": True})


def test_served_document_equals_the_module_document(stack: Stack) -> None:
    r = requests.get(f"{stack.url}/openapi.json", timeout=10)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json() == document()


def test_served_jobs_match_the_job_schema(stack: Stack) -> None:
    doc = document()
    check_job = _validator(doc, "Job")
    accepted = stack.submit("schema check", model="fake:ttft=0.3")
    assert accepted.status_code == 202
    check_job.validate(accepted.json())
    done = stack.get(accepted.json()["id"], wait=20)
    assert done.status_code == 200 and done.json()["status"] == "completed"
    check_job.validate(done.json())
    result = stack.get(accepted.json()["id"], suffix="/result")
    assert result.status_code == 200
    _validator(doc, "ChatCompletion").validate(result.json())


@pytest.mark.parametrize(
    ("status", "send"),
    [
        (401, lambda s: requests.get(f"{s.url}/v1/jobs/job_x", timeout=10)),
        (404, lambda s: s.get("job_" + "A" * 32)),
        (400, lambda s: s.submit("x", wait="soon")),
    ],
)
def test_served_errors_match_the_error_schema(stack: Stack, status: int, send: Any) -> None:
    r = send(stack)
    assert r.status_code == status
    _validator(document(), "Error").validate(r.json())


def test_served_front_door_models_and_events_match_their_schemas(stack: Stack) -> None:
    doc, s = document(), stack.session()
    body = {"model": "fake", "messages": [{"role": "user", "content": "front door"}]}
    r = s.post(f"{stack.url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200 and r.headers["Chatq-Job-Id"].startswith("job_")
    _validator(doc, "ChatCompletion").validate(r.json())
    r = s.get(f"{stack.url}/v1/models", timeout=10)
    assert r.status_code == 200
    _validator(doc, "ModelList").validate(r.json())
    job_id = stack.submit("events", wait=20).json()["id"]
    page = stack.get(job_id, suffix="/events", wait=5)
    assert page.status_code == 200 and page.json()["done"] is True
    _validator(doc, "EventsPage").validate(page.json())


def test_every_field_the_server_type_checks_is_typed_in_the_document() -> None:
    from chatq.chat.objects import ChatCompletionRequest
    from web.openapi.document import document

    properties = document()["components"]["schemas"]["ChatCompletionRequest"]["properties"]
    assert sorted(set(ChatCompletionRequest.__struct_fields__) - set(properties)) == []


def test_served_responses_and_their_events_match_their_schemas(stack: Stack) -> None:
    doc, s = document(), stack.session()
    request = {"model": "fake", "input": "document check", "background": True}
    assert _validator(doc, "ResponseRequest").is_valid(request)
    assert not _validator(doc, "ResponseRequest").is_valid({**request, "tools": [{}]})
    created = s.post(f"{stack.url}/v1/responses", json=request, timeout=30)
    _validator(doc, "Response").validate(created.json())
    url = f"{stack.url}/v1/responses/{created.json()['id']}"
    done = s.get(url, params={"wait": 20}, timeout=30).json()
    assert done["status"] == "completed"
    _validator(doc, "Response").validate(done)
    lines = s.get(url, params={"stream": "true"}, timeout=30).text.splitlines()
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert events and events[-1]["type"] == "response.completed"
    for event in events:
        _validator(doc, "ResponseStreamEvent").validate(event)
    _validator(doc, "ResponseDeleted").validate(s.delete(url, timeout=30).json())
