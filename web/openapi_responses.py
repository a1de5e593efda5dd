"""The OpenAPI paths of the Responses API (text subset) and of stored chat completions,
merged into the document of web/openapi.py (their schemas: web/openapi_response_schemas.py)."""

from __future__ import annotations

from web.openapi_schemas import Schema, ref

_ERRORS = {
    400: "A parameter is missing, invalid, or outside the text subset (`unsupported_parameter`: "
    "tools, reasoning, images, files, ...); `param` names it. "
    "`previous_response_not_found`; `invalid_wait`; `invalid_cursor`: a Last-Event-ID "
    "that is no sequence number.",
    401: "`invalid_api_key`: no key or an unknown key.",
    404: "`response_not_found`: unknown, expired, deleted, `store: false` or another key's.",
    413: "`request_too_large`: body over CHATQ_MAX_BODY_BYTES.",
    422: "`context_length_exceeded` (the prompt, previous responses included, is over the "
    "model's limit); `idempotency_key_reused`.",
    429: "`rate_limit_exceeded`: the key's request rate is over its limit.",
    503: "`queue_full`, `backend_unavailable`.",
}
_STREAM = (
    "Server-Sent Events: `event:` the type, `id:` the sequence number, `data:` one "
    "ResponseStreamEvent."
)


def _errors(*statuses: int) -> dict[str, Schema]:
    out: dict[str, Schema] = {}
    for status in statuses:
        response: Schema = {
            "description": _ERRORS[status],
            "content": {"application/json": {"schema": ref("Error")}},
        }
        if status in (429, 503):
            response["headers"] = {"Retry-After": {"$ref": "#/components/headers/Retry-After"}}
        out[str(status)] = response
    return out


def _ok(description: str, schema: Schema | None, *headers: str, stream: bool = False) -> Schema:
    content: Schema = {"application/json": {"schema": schema}} if schema else {}
    if stream:
        content["text/event-stream"] = {"schema": {"type": "string", "description": _STREAM}}
    response: Schema = {"description": description, "content": content}
    if headers:
        response["headers"] = {h: {"$ref": f"#/components/headers/{h}"} for h in headers}
    return response


def _query(name: str, schema: Schema, description: str) -> Schema:
    return {"name": name, "in": "query", "schema": schema, "description": description}


def _header(name: str) -> Schema:
    return {"$ref": f"#/components/parameters/{name}"}


_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^(resp|job)_[A-Za-z0-9_-]+$"},
    "description": "The response's id (`resp_…`), or its job's (`job_…`).",
}
_WAIT = _query(
    "wait",
    {"type": "number", "minimum": 0, "default": 0},
    "Seconds to hold until the response ends (capped at CHATQ_MAX_WAIT).",
)


def _create() -> Schema:
    return {
        "operationId": "createResponse",
        "summary": "Create a response (a chat job)",
        "description": "`background: true` answers at once (`queued`); `stream: true` answers "
        "Server-Sent Events; otherwise the request is held until the response "
        "ends (a bounded hold with `Prefer: wait=N`). Always `200` with the "
        "Response, whatever its status: a failed one carries `error`.",
        "parameters": [
            _header("Prefer"),
            _header("Priority"),
            _header("IdempotencyKey"),
            _header("CacheControl"),
            _header("ContextOverflow"),
        ],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ref("ResponseRequest")}},
        },
        "responses": {
            "200": _ok(
                "The Response, or its events.",
                ref("Response"),
                "Chatq-Job-Id",
                "Preference-Applied",
                stream=True,
            ),
            **_errors(400, 401, 413, 422, 429, 503),
        },
    }


def _retrieve() -> Schema:
    return {
        "operationId": "getResponse",
        "summary": "A response, long-polled or streamed",
        "description": "With `stream=true`, its events from the first (or after "
        "`starting_after`, or an SSE `Last-Event-ID`) until it ends, for as "
        "long as it is kept: the same numbers on every replay.",
        "parameters": [
            _ID,
            _WAIT,
            _header("Prefer"),
            _query(
                "stream",
                {"type": "boolean", "default": False},
                "Answer the response's events as Server-Sent Events.",
            ),
            _query(
                "starting_after",
                {"type": "integer"},
                "With `stream=true`: only the events numbered above this (ignored without it).",
            ),
            _header("LastEventId"),
        ],
        "responses": {
            "200": _ok(
                "The Response (any status), or its events.",
                ref("Response"),
                "Preference-Applied",
                stream=True,
            ),
            **_errors(400, 401, 404, 429, 503),
        },
    }


def _paths() -> dict[str, Schema]:
    cancel = {
        "operationId": "cancelResponse",
        "summary": "Cancel a queued or running response",
        "parameters": [_ID],
        "responses": {
            "200": _ok("The Response as it now is (an ended one unchanged).", ref("Response")),
            **_errors(401, 404, 429, 503),
        },
    }
    delete = {
        "operationId": "deleteResponse",
        "summary": "Delete a response for good",
        "description": "A queued or running response is cancelled first; then its "
        "record, text and events are removed.",
        "parameters": [_ID],
        "responses": {
            "200": _ok("Deleted.", ref("ResponseDeleted")),
            **_errors(401, 404, 429, 503),
        },
    }
    stored = {
        "operationId": "getChatCompletion",
        "summary": "A job's chat completion, again",
        "description": "By the `Chatq-Job-Id` a POST /v1/chat/completions answered (or the "
        "`chatcmpl-` id of its stream): held like that POST until the job "
        "ends; a failed job answers its OpenAI error; a response is `404`.",
        "parameters": [
            {
                "name": "id",
                "in": "path",
                "required": True,
                "schema": {"type": "string", "pattern": "^(job_|chatcmpl-)[A-Za-z0-9_-]+$"},
            },
            _header("Prefer"),
        ],
        "responses": {
            "200": _ok(
                "Exactly the upstream's `chat.completion`.", ref("ChatCompletion"), "Chatq-Job-Id"
            ),
            "202": _ok(
                "Only with `Prefer: wait=N` (and N passed) or `respond-async`: the job.",
                ref("Job"),
                "Location",
                "Preference-Applied",
            ),
            **_errors(401, 404, 429, 503),
        },
    }
    return {
        "/v1/responses": {"post": _create()},
        "/v1/responses/{id}": {"get": _retrieve(), "delete": delete},
        "/v1/responses/{id}/cancel": {"post": cancel},
        "/v1/chat/completions/{id}": {"get": stored},
    }


def response_paths() -> dict[str, Schema]:
    """The paths of the Responses API and of stored chat completions."""
    return _paths()
