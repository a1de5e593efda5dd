"""The OpenAPI 3.1 document of the API, as API.md (the HTTP contract) states it."""

from __future__ import annotations

import copy
from typing import Any

from chatq.config import Settings
from web import openapi_webhooks
from web.openapi_responses import response_paths, response_schemas
from web.openapi_schemas import PRIORITIES, Schema, ref, schemas

_DESCRIPTION = """\
A job queue in front of OpenAI-compatible chat-completion APIs.

`/v1/*` needs `Authorization: Bearer <key>`; a job belongs to the key that created it and
any other key gets `404` for it. Every 4xx/5xx body is OpenAI's error object; a method a
path does not allow is `405` `method_not_allowed`; `OPTIONS` on a path (or `*`) is `204` with
`Allow`. Request bodies are parsed as JSON in UTF-8 whatever the Content-Type says.

Long polling: `?wait=N` or `Prefer: wait=N` (RFC 7240; the query wins) holds a request until
what it waits for happens or `N` seconds pass (capped at CHATQ_MAX_WAIT, default 55; a wait
that runs out ends somewhere in [15/16 N, N]). The wait applied is echoed in
`Preference-Applied`."""

_PARAMETERS: dict[str, Schema] = {
    "JobId": {
        "name": "id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": "^job_[A-Za-z0-9_-]+$"},
        "description": "The job's id; another key's job is `404` like an unknown one.",
    },
    "Prefer": {
        "name": "Prefer",
        "in": "header",
        "schema": {"type": "string"},
        "description": "RFC 7240. `wait=N`: as `?wait=N`, which wins if both are "
        "given. `respond-async`: see /v1/chat/completions.",
        "examples": {"wait": {"value": "wait=30"}},
    },
    "Priority": {
        "name": "priority",
        "in": "query",
        "schema": {"type": "string", "enum": PRIORITIES, "default": "interactive"},
        "description": "Two queues; workers drain `interactive` first.",
    },
    "IdempotencyKey": {
        "name": "Idempotency-Key",
        "in": "header",
        "schema": {"type": "string", "minLength": 1, "maxLength": 255},
        "description": "The same key from the same owner within CHATQ_JOB_TTL "
        "returns the same job instead of a new one.",
    },
    "CacheControl": {
        "name": "Cache-Control",
        "in": "header",
        "schema": {"type": "string"},
        "description": "`no-cache` skips the result cache on the way in; "
        "`no-store` keeps this result out of it; `max-age=N` makes "
        "a non-deterministic request cacheable for N s (at most "
        "CHATQ_CACHE_TTL; no caching at all when that is 0).",
    },
    "ContextOverflow": {
        "name": "Chatq-Context-Overflow",
        "in": "header",
        "schema": {"type": "string", "enum": ["reject", "truncate_oldest"]},
        "description": "A prompt over the model's context limit: `422`, or drop "
        "the oldest turns after the system message until it "
        "fits. Default from configuration.",
    },
    "Cursor": {
        "name": "cursor",
        "in": "query",
        "schema": {"type": "string"},
        "description": "Opaque; pass back what a page gave. Absent: the first event.",
    },
    "LastEventId": {
        "name": "Last-Event-ID",
        "in": "header",
        "schema": {"type": "string"},
        "description": "Server-Sent Events: resume after this cursor.",
    },
    "Accept": {
        "name": "Accept",
        "in": "header",
        "schema": {"type": "string", "enum": ["application/json", "text/event-stream"]},
        "description": "`text/event-stream` serves the events as Server-Sent Events.",
    },
}

_HEADERS: dict[str, Schema] = {
    "Location": {
        "description": "`/v1/jobs/{id}`: where to poll the job.",
        "schema": {"type": "string"},
    },
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "integer", "minimum": 0},
    },
    "Preference-Applied": {
        "description": "What was honoured of `Prefer`: `wait=N` (the wait "
        "applied), `respond-async`, or both.",
        "schema": {"type": "string"},
    },
    "Chatq-Job-Id": {
        "description": "The id of the job behind this answer.",
        "schema": {"type": "string"},
    },
    "x-should-retry": {
        "description": "`false` on an error of a job that exists: chatq has "
        "retried the upstream itself, and a resend would start "
        "a second job (the OpenAI SDKs obey it); and on a 429 "
        "that a retry cannot pass (a key's budget spent).",
        "schema": {"type": "string", "enum": ["false"]},
    },
}

_BAD_BODY = (
    "`invalid_json`, `invalid_request`, `missing_field`, `invalid_wait`: the body is "
    "not a JSON object in UTF-8, a field or option is missing or invalid (or out of "
    "its range or over this server's cap), or `wait` is not a finite number >= 0."
)
_BAD_JSON = (
    "`invalid_json`, `invalid_request`, `missing_field`: the body is not a JSON object "
    "in UTF-8, or a field is missing, of the wrong type, out of its range or over "
    "this server's cap."
)
_BAD_WAIT = "`invalid_wait`: `wait` is not a finite number >= 0."
_FULL = (
    "`queue_full`: queue depth over CHATQ_MAX_QUEUE_DEPTH; `backend_unavailable`: "
    "Redis cannot be reached."
)
_FAILED_CONTEXT = "The job failed with `context_length_exceeded`."

_ERRORS: dict[int, str] = {
    400: _BAD_BODY,
    401: "`invalid_api_key`: no key or an unknown key.",
    404: "`job_not_found`: unknown, expired or foreign job id.",
    409: "`job_cancelled`: the job was cancelled.",
    413: "`request_too_large`: body over CHATQ_MAX_BODY_BYTES (default 1 MiB).",
    422: "`context_length_exceeded`: prompt tokens over the model's limit (the message says "
    "how many were counted and what the limit is).",
    429: "`rate_limit_exceeded`: the key's request rate is over its limit.",
    502: "The upstream failed (`upstream_error`), answered what is not a chat-completion "
    "stream (`upstream_invalid_response`), or the worker failed (`internal_error`).",
    503: "`backend_unavailable`: Redis cannot be reached or cannot serve now (out of memory, "
    "a read-only replica, loading).",
    504: "The upstream timed out (`upstream_timeout`).",
}

_REUSED_OR_CONTEXT = (
    _ERRORS[422] + " `idempotency_key_reused`: same Idempotency-Key, different body."
)


def _param(name: str) -> Schema:
    return {"$ref": f"#/components/parameters/{name}"}


def _wait(default_s: float) -> Schema:
    """The `wait` query parameter, with this endpoint's default."""
    schema: Schema = {"type": "number", "minimum": 0, "default": default_s}
    return {
        "name": "wait",
        "in": "query",
        "schema": schema,
        "description": "Seconds to hold the request, fractions allowed, capped at "
        "CHATQ_MAX_WAIT (default 55).",
    }


def _content(schemas_by_media: Schema) -> Schema:
    """Media type objects from `{media type: schema}`."""
    return {media: {"schema": schema} for media, schema in schemas_by_media.items()}


def _response(description: str, content: Schema | None = None, *headers: str) -> Schema:
    """A response; `content` maps media types to schemas."""
    response: Schema = {"description": description}
    if content:
        response["content"] = _content(content)
    if headers:
        response["headers"] = {h: {"$ref": f"#/components/headers/{h}"} for h in headers}
    return response


def _json(name: str) -> Schema:
    return {"application/json": ref(name)}


def _job_response(status: int, description: str = "") -> Schema:
    """200 with a terminal job, or 202 with a pending one and its Location."""
    if status == 200:
        return _response(description or "The job, terminal.", _json("Job"), "Preference-Applied")
    return _response(
        description or "The job, not yet terminal: its current status and partial `output_text`.",
        _json("Job"),
        "Location",
        "Preference-Applied",
    )


def _error_responses(*statuses: int | tuple[int, str]) -> dict[str, Schema]:
    """OpenAI error responses; a `(status, description)` pair overrides the description."""
    responses: dict[str, Schema] = {}
    for item in statuses:
        status, description = item if isinstance(item, tuple) else (item, _ERRORS[item])
        headers = ("Retry-After",) if status in (429, 503) else ()
        responses[str(status)] = _response(description, _json("Error"), *headers)
    return responses


def _op(
    op_id: str,
    summary: str,
    responses: dict[str, Schema],
    *params: Schema,
    body: str | None = None,
    description: str | None = None,
) -> Schema:
    """One operation."""
    op: Schema = {"operationId": op_id, "summary": summary}
    if description:
        op["description"] = description
    if params:
        op["parameters"] = list(params)
    if body:
        op["requestBody"] = {"required": True, "content": _content(_json(body))}
    op["responses"] = responses
    return op


def _job_paths() -> dict[str, Schema]:
    """POST /v1/jobs, GET /v1/jobs/{id}, POST /v1/jobs/{id}/cancel."""
    create = _op(
        "createJob",
        "Enqueue a chat job",
        {
            "200": _job_response(200, "The job ended within `wait`, or was a cache hit."),
            "202": _job_response(202, "The job, queued or running."),
            **_error_responses(400, 401, 413, (422, _REUSED_OR_CONTEXT), 429, (503, _FULL)),
        },
        _wait(0),
        _param("Prefer"),
        _param("Priority"),
        _param("IdempotencyKey"),
        _param("CacheControl"),
        _param("ContextOverflow"),
        body="JobRequest",
        description="`stream` is not allowed here: the events endpoint is the streaming view.",
    )
    get = _op(
        "getJob",
        "A job's status, long-polled",
        {
            "200": _job_response(200),
            "202": _job_response(202),
            **_error_responses((400, _BAD_WAIT), 401, 404, 429, 503),
        },
        _param("JobId"),
        _wait(0),
        _param("Prefer"),
    )
    cancel = _op(
        "cancelJob",
        "Cancel a queued or running job",
        {
            "200": _response(
                "The job as it now is; a terminal job is left unchanged.", _json("Job")
            ),
            **_error_responses(401, 404, 429, 503),
        },
        _param("JobId"),
    )
    return {
        "/v1/jobs": {"post": create},
        "/v1/jobs/{id}": {"get": get},
        "/v1/jobs/{id}/cancel": {"post": cancel},
    }


def _reading_paths() -> dict[str, Schema]:
    """GET /v1/jobs/{id}/result and GET /v1/jobs/{id}/events."""
    result = _op(
        "getJobResult",
        "The bare upstream answer",
        {
            "200": _response("Exactly the upstream's `chat.completion`.", _json("ChatCompletion")),
            "202": _job_response(202),
            **_error_responses(
                (400, _BAD_WAIT + " Or the job failed with `invalid_request`."),
                401,
                404,
                409,
                (422, _FAILED_CONTEXT),
                429,
                502,
                503,
                504,
            ),
        },
        _param("JobId"),
        _wait(25),
        _param("Prefer"),
    )
    sse = {
        "type": "string",
        "description": "Server-Sent Events until the job ends: each has "
        "`id:` (its cursor) and `data:` one Event object.",
    }
    events = _op(
        "getJobEvents",
        "Incremental output, long-polled or as Server-Sent Events",
        {
            "200": _response(
                "The events after `cursor` (empty if `wait` ran out).",
                {"application/json": ref("EventsPage"), "text/event-stream": sse},
                "Preference-Applied",
            ),
            **_error_responses(
                (400, _BAD_WAIT + " `invalid_cursor`: not a cursor this API gave out."),
                401,
                404,
                429,
                503,
            ),
        },
        _param("JobId"),
        _param("Cursor"),
        _wait(0),
        _param("Prefer"),
        _param("Accept"),
        _param("LastEventId"),
        description="Concatenating the `delta`s after the last `reset` gives the final "
        "`output_text`.",
    )
    return {"/v1/jobs/{id}/result": {"get": result}, "/v1/jobs/{id}/events": {"get": events}}


def _openai_paths() -> dict[str, Schema]:
    """POST /v1/chat/completions, the OpenAI front door."""
    chunks = {
        "type": "string",
        "description": "`data:` lines of `chat.completion.chunk` "
        "objects, ending in `data: [DONE]`.",
    }
    completions = _op(
        "createChatCompletion",
        "OpenAI-compatible chat completions, through the queue",
        {
            "200": _response(
                "`stream: false`: exactly the upstream's `chat.completion`; "
                "`stream: true`: Server-Sent Events of chunks.",
                {**_json("ChatCompletion"), "text/event-stream": chunks},
                "Chatq-Job-Id",
            ),
            "202": _response(
                "Only when asked with `Prefer: wait=N` (and N passed) or "
                "`Prefer: respond-async`: the job.",
                _json("Job"),
                "Location",
                "Preference-Applied",
            ),
            **_error_responses(
                (400, _BAD_JSON),
                401,
                (404, "`upstream_error`: the upstream does not know the model."),
                409,
                413,
                (422, _REUSED_OR_CONTEXT),
                429,
                502,
                (
                    503,
                    _FULL + " `server_shutting_down`: this web is stopping and "
                    "the job did not end within CHATQ_GRACEFUL_TIMEOUT; it goes on "
                    "(its answer: `/v1/jobs/{id}/result`).",
                ),
                (
                    504,
                    _ERRORS[504] + " `job_timeout`: the job did not end within CHATQ_JOB_TIMEOUT.",
                ),
            ),
        },
        _param("Prefer"),
        _param("IdempotencyKey"),
        body="ChatCompletionRequest",
        description="Decided by `stream` in the body, not by Accept. Runs as an `interactive` "
        "job; held until it ends (up to CHATQ_JOB_TIMEOUT).",
    )
    for status, response in completions["responses"].items():
        if int(status) >= 400:  # a job's own failure names the job and forbids a resend
            response.setdefault("headers", {}).update(
                {
                    h: {"$ref": f"#/components/headers/{h}"}
                    for h in ("Chatq-Job-Id", "x-should-retry")
                }
            )
    return {"/v1/chat/completions": {"post": completions}}


def _listing_paths() -> dict[str, Schema]:
    """GET /v1/models and GET /v1/queue."""
    models = _op(
        "listModels",
        "The upstream's models",
        {
            "200": _response(
                "OpenAI's `list` of `model` objects, passed through.", _json("ModelList")
            ),
            **_error_responses(
                401, 429, (502, "The upstream's model list could not be read."), 503
            ),
        },
    )
    queue = _op(
        "getQueue",
        "Load, for people and autoscalers",
        {
            "200": _response(
                "Queue depths, workers and the recommended concurrency.", _json("Queue")
            ),
            **_error_responses(401, 429, 503),
        },
    )
    return {"/v1/models": {"get": models}, "/v1/queue": {"get": queue}}


def _ops_paths() -> dict[str, Schema]:
    """The open endpoints: health, readiness, metrics, this document, the demo page."""
    text = {"type": "string"}
    return {
        "/healthz": {
            "get": _op(
                "healthz", "Liveness", {"200": _response("The process runs.", _json("Health"))}
            )
        },
        "/readyz": {
            "get": _op(
                "readyz",
                "Readiness",
                {
                    "200": _response(
                        "Redis answers; whether it keeps jobs through a full memory and a restart.",
                        _json("Readiness"),
                    ),
                    **_error_responses(
                        (
                            503,
                            "`backend_unavailable`: Redis does not answer; "
                            "`redis_unsafe`: CHATQ_REDIS_REQUIRE_SAFE=1 and Redis may "
                            "lose jobs.",
                        )
                    ),
                },
            )
        },
        "/metrics": {
            "get": _op(
                "metrics",
                "Prometheus metrics",
                {
                    "200": _response(
                        "Prometheus text format, names prefixed `chatq_`.",
                        {"text/plain; version=0.0.4": text},
                    )
                },
            )
        },
        "/openapi.json": {
            "get": _op(
                "openapi",
                "This document",
                {
                    "200": _response(
                        "The OpenAPI 3.1 document.", {"application/json": {"type": "object"}}
                    )
                },
            )
        },
        "/": {
            "get": _op(
                "demo",
                "Chat demo page",
                {
                    "200": _response(
                        "One HTML page; asks for a key, uses the events long-poll.",
                        {"text/html": text},
                    )
                },
            )
        },
    }


def _secured(paths: dict[str, Schema]) -> dict[str, Schema]:
    """Bearer auth on every /v1/* operation; none elsewhere."""
    for path, item in paths.items():
        for op in item.values():
            op["security"] = [{"bearerAuth": []}] if path.startswith("/v1/") else []
    return paths


def document(settings: Settings | None = None) -> dict[str, Any]:
    """The document served at /openapi.json, with the caps of `settings` (default: defaults)."""
    from web import openapi_batches, openapi_limits  # they build on this module's helpers

    return {
        "openapi": "3.1.0",
        "info": {"title": "chatq", "version": "0.1.0", "description": _DESCRIPTION},
        "servers": [{"url": "/"}],
        "paths": _secured(
            openapi_limits.add_headers(
                openapi_webhooks.add_header(
                    {
                        **_job_paths(),
                        **_reading_paths(),
                        **_openai_paths(),
                        **response_paths(),
                        **_listing_paths(),
                        **_ops_paths(),
                        **openapi_webhooks.paths(),
                        **openapi_batches.paths(),
                        **openapi_limits.paths(),
                    }
                )
            )
        ),
        "webhooks": openapi_webhooks.events(),
        "components": {
            "schemas": {
                **schemas(settings),
                **response_schemas(settings),
                **openapi_webhooks.schemas(),
                **openapi_batches.schemas(),
                **openapi_limits.schemas(),
            },
            "parameters": copy.deepcopy(_PARAMETERS),
            "headers": {**copy.deepcopy(_HEADERS), **openapi_limits.headers()},
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A key from CHATQ_API_KEYS.",
                }
            },
        },
    }
