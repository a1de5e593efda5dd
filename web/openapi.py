"""The OpenAPI 3.1 document of the API, as API.md (the HTTP contract) states it."""

from __future__ import annotations

import copy
from typing import Any

from chatq.config import Settings
from web import (
    openapi_batch_schemas,
    openapi_batches,
    openapi_limits,
    openapi_service,
    openapi_webhook_schemas,
    openapi_webhooks,
)
from web.openapi_parts import (
    BAD_JSON,
    BAD_WAIT,
    ERRORS,
    FAILED_CONTEXT,
    FULL,
    HEADERS,
    PARAMETERS,
    REUSED_OR_CONTEXT,
    error_responses,
    job_response,
    json_ref,
    operation,
    param_ref,
    response_object,
    wait_param,
)
from web.openapi_response_schemas import response_schemas
from web.openapi_responses import response_paths
from web.openapi_schemas import Schema, ref, schemas

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


def _job_paths() -> dict[str, Schema]:
    """POST /v1/jobs, GET /v1/jobs/{id}, POST /v1/jobs/{id}/cancel."""
    create = operation(
        "createJob",
        "Enqueue a chat job",
        {
            "200": job_response(200, "The job ended within `wait`, or was a cache hit."),
            "202": job_response(202, "The job, queued or running."),
            **error_responses(400, 401, 413, (422, REUSED_OR_CONTEXT), 429, (503, FULL)),
        },
        wait_param(0),
        param_ref("Prefer"),
        param_ref("Priority"),
        param_ref("IdempotencyKey"),
        param_ref("CacheControl"),
        param_ref("ContextOverflow"),
        body="JobRequest",
        description="`stream` is not allowed here: the events endpoint is the streaming view.",
    )
    get = operation(
        "getJob",
        "A job's status, long-polled",
        {
            "200": job_response(200),
            "202": job_response(202),
            **error_responses((400, BAD_WAIT), 401, 404, 429, 503),
        },
        param_ref("JobId"),
        wait_param(0),
        param_ref("Prefer"),
    )
    cancel = operation(
        "cancelJob",
        "Cancel a queued or running job",
        {
            "200": response_object(
                "The job as it now is; a terminal job is left unchanged.", json_ref("Job")
            ),
            **error_responses(401, 404, 429, 503),
        },
        param_ref("JobId"),
    )
    return {
        "/v1/jobs": {"post": create},
        "/v1/jobs/{id}": {"get": get},
        "/v1/jobs/{id}/cancel": {"post": cancel},
    }


def _reading_paths() -> dict[str, Schema]:
    """GET /v1/jobs/{id}/result and GET /v1/jobs/{id}/events."""
    result = operation(
        "getJobResult",
        "The bare upstream answer",
        {
            "200": response_object(
                "Exactly the upstream's `chat.completion`.", json_ref("ChatCompletion")
            ),
            "202": job_response(202),
            **error_responses(
                (400, BAD_WAIT + " Or the job failed with `invalid_request`."),
                401,
                404,
                409,
                (422, FAILED_CONTEXT),
                429,
                502,
                503,
                504,
            ),
        },
        param_ref("JobId"),
        wait_param(25),
        param_ref("Prefer"),
    )
    sse = {
        "type": "string",
        "description": "Server-Sent Events until the job ends: each has "
        "`id:` (its cursor) and `data:` one Event object; the last `delta` and the last "
        "`status` event have no `id:` (they share the `end` event's cursor, right after "
        "them).",
    }
    events = operation(
        "getJobEvents",
        "Incremental output, long-polled or as Server-Sent Events",
        {
            "200": response_object(
                "The events after `cursor` (empty if `wait` ran out).",
                {"application/json": ref("EventsPage"), "text/event-stream": sse},
                "Preference-Applied",
            ),
            **error_responses(
                (400, BAD_WAIT + " `invalid_cursor`: not a cursor this API gave out."),
                401,
                404,
                429,
                503,
            ),
        },
        param_ref("JobId"),
        param_ref("Cursor"),
        wait_param(0),
        param_ref("Prefer"),
        param_ref("Accept"),
        param_ref("LastEventId"),
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
    completions = operation(
        "createChatCompletion",
        "OpenAI-compatible chat completions, through the queue",
        {
            "200": response_object(
                "`stream: false`: exactly the upstream's `chat.completion`; "
                "`stream: true`: Server-Sent Events of chunks.",
                {**json_ref("ChatCompletion"), "text/event-stream": chunks},
                "Chatq-Job-Id",
            ),
            "202": response_object(
                "Only when asked with `Prefer: wait=N` (and N passed) or "
                "`Prefer: respond-async`: the job.",
                json_ref("Job"),
                "Location",
                "Preference-Applied",
            ),
            **error_responses(
                (400, BAD_JSON),
                401,
                (404, "`upstream_error`: the upstream does not know the model."),
                409,
                413,
                (422, REUSED_OR_CONTEXT),
                429,
                502,
                (
                    503,
                    FULL + " `server_shutting_down`: this web is stopping and "
                    "the job did not end within CHATQ_GRACEFUL_TIMEOUT; it goes on "
                    "(its answer: `/v1/jobs/{id}/result`).",
                ),
                (
                    504,
                    ERRORS[504] + " `job_timeout`: the job did not end within CHATQ_JOB_TIMEOUT.",
                ),
            ),
        },
        param_ref("Prefer"),
        param_ref("IdempotencyKey"),
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


# /metrics: open, its series that name a key only with the metrics token.
_OPEN_SECURITY: dict[str, list[Schema]] = {"/metrics": [{}, {"metricsToken": []}]}


def _secured(paths: dict[str, Schema]) -> dict[str, Schema]:
    """Bearer auth on every /v1/* operation; none elsewhere (optional on /metrics)."""
    for path, item in paths.items():
        for op in item.values():
            op["security"] = (
                [{"bearerAuth": []}] if path.startswith("/v1/") else _OPEN_SECURITY.get(path, [])
            )
    return paths


def document(settings: Settings | None = None) -> dict[str, Any]:
    """The document served at /openapi.json, with the caps of `settings` (default: defaults)."""
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
                        **openapi_service.listing_paths(),
                        **openapi_service.ops_paths(),
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
                **openapi_webhook_schemas.schemas(),
                **openapi_batch_schemas.schemas(),
            },
            "parameters": copy.deepcopy(PARAMETERS),
            "headers": {**copy.deepcopy(HEADERS), **openapi_limits.headers()},
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A key from CHATQ_API_KEYS.",
                },
                "metricsToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "CHATQ_METRICS_TOKEN: /metrics with the series that name a key.",
                },
            },
        },
    }
