"""The OpenAPI 3.1 document of the API: the full reference of the HTTP contract that
docs/api.md summarises."""

from __future__ import annotations

import json
from typing import Any

from chatq.config import Settings
from chatq.jobs import JOB_ID_PATTERN
from web.http import (
    ACCEPT,
    CACHE_CONTROL,
    CONTEXT_OVERFLOW,
    CURSOR,
    IDEMPOTENCY_KEY,
    JOB_ID_HEADER,
    LAST_EVENT_ID,
    LOCATION,
    PREFER,
    PREFERENCE_APPLIED,
    PRIORITY,
    RESULT_WAIT,
    SHOULD_RETRY,
    WAIT,
    WEBHOOK,
)
from web.openapi import batches, quotas, service, webhooks
from web.openapi.parts import (
    BAD_JSON,
    BAD_WAIT,
    ERRORS,
    FAILED_CONTEXT,
    FULL,
    REUSED_OR_CONTEXT,
    Op,
    headers,
    job_response,
    json_ref,
    parameters,
    path_id,
    paths,
    response_object,
)
from web.openapi.responses import response_paths
from web.openapi.schemas import Schema, ref, schemas

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


def _text(description: str) -> Schema:
    return {"type": "string", "description": description}


def _bearer(description: str) -> Schema:
    return {"type": "http", "scheme": "bearer", "description": description}


_SSE = "Server-Sent Events until the job ends: each has `id:` (its cursor) and `data:` one "
_SSE += "Event object; the last `delta` and the last `status` event have no `id:` (they share "
_SSE += "the `end` event's cursor, right after them)."
_CHUNKS = "`data:` lines of `chat.completion.chunk` objects, ending in `data: [DONE]`."
_ONE = "/v1/jobs/{id}"
_JOB_ID = path_id(
    "id", JOB_ID_PATTERN, "The job's id; another key's job is `404` like an unknown one."
)
_SHUTTING_DOWN = (
    " `server_shutting_down`: this web is stopping and the job did not end within "
    "CHATQ_GRACEFUL_TIMEOUT; it goes on (its answer: `/v1/jobs/{id}/result`)."
)
OPERATIONS = [
    Op(
        "post",
        "/v1/jobs",
        "createJob",
        "Enqueue a chat job",
        {
            200: job_response(200, "The job ended within `wait`, or was a cache hit."),
            202: job_response(202, "The job, queued or running."),
        },
        (400, 413, (422, REUSED_OR_CONTEXT), (503, FULL)),
        (WAIT, PREFER, PRIORITY, IDEMPOTENCY_KEY, CACHE_CONTROL, CONTEXT_OVERFLOW, WEBHOOK),
        body="JobRequest",
        description="`stream` is not allowed here: the events endpoint is the streaming view.",
    ),
    Op(
        "get",
        _ONE,
        "getJob",
        "A job's status, long-polled",
        {200: job_response(200), 202: job_response(202)},
        ((400, BAD_WAIT), 404),
        (_JOB_ID, WAIT, PREFER),
    ),
    Op(
        "post",
        _ONE + "/cancel",
        "cancelJob",
        "Cancel a queued or running job",
        {200: response_object("The job as it now is; a terminal job is left unchanged.", "Job")},
        (404,),
        (_JOB_ID,),
    ),
    Op(
        "get",
        _ONE + "/result",
        "getJobResult",
        "The bare upstream answer",
        {
            200: response_object("Exactly the upstream's `chat.completion`.", "ChatCompletion"),
            202: job_response(202),
        },
        (
            (400, BAD_WAIT + " Or the job failed with `invalid_request`."),
            404,
            409,
            (422, FAILED_CONTEXT),
            502,
            504,
        ),
        (_JOB_ID, RESULT_WAIT, PREFER),
    ),
    Op(
        "get",
        _ONE + "/events",
        "getJobEvents",
        "Incremental output, long-polled or as Server-Sent Events",
        {
            200: response_object(
                "The events after `cursor` (empty if `wait` ran out).",
                {"application/json": ref("EventsPage"), "text/event-stream": _text(_SSE)},
                PREFERENCE_APPLIED,
            )
        },
        ((400, BAD_WAIT + " `invalid_cursor`: not a cursor this API gave out."), 404),
        (_JOB_ID, CURSOR, WAIT, PREFER, ACCEPT, LAST_EVENT_ID),
        description="Concatenating the `delta`s after the last `reset` gives the final "
        "`output_text`.",
    ),
    Op(
        "post",
        "/v1/chat/completions",
        "createChatCompletion",
        "OpenAI-compatible chat completions, through the queue",
        {
            200: response_object(
                "`stream: false`: exactly the upstream's `chat.completion`; `stream: true`: "
                "Server-Sent Events of chunks.",
                {**json_ref("ChatCompletion"), "text/event-stream": _text(_CHUNKS)},
                JOB_ID_HEADER,
            ),
            202: response_object(
                "Only when asked with `Prefer: wait=N` (and N passed) or `Prefer: "
                "respond-async`: the job.",
                "Job",
                LOCATION,
                PREFERENCE_APPLIED,
            ),
        },
        (
            (400, BAD_JSON),
            (404, "`upstream_error`: the upstream does not know the model."),
            409,
            413,
            (422, REUSED_OR_CONTEXT),
            502,
            (503, FULL + _SHUTTING_DOWN),
            (504, ERRORS[504] + " `job_timeout`: the job did not end within CHATQ_JOB_TIMEOUT."),
        ),
        (PREFER, IDEMPOTENCY_KEY, WEBHOOK),
        body="ChatCompletionRequest",
        error_headers=(JOB_ID_HEADER, SHOULD_RETRY),  # names the job, forbids a resend
        description="Decided by `stream` in the body, not by Accept. Runs as an `interactive` "
        "job; held until it ends (up to CHATQ_JOB_TIMEOUT).",
    ),
]


# By the id of the Settings (one per process, or per app in tests), which each entry keeps
# alive so that no other Settings can take its id.
_SERVED: dict[int, tuple[Settings, bytes]] = {}


def served(settings: Settings) -> bytes:
    """The document as /openapi.json serves it: built once per process, as bytes."""
    if id(settings) not in _SERVED:
        data = json.dumps(document(settings), separators=(",", ":")).encode()
        _SERVED[id(settings)] = (settings, data)
    return _SERVED[id(settings)][1]


def document(settings: Settings | None = None) -> dict[str, Any]:
    """The document served at /openapi.json, with the caps of `settings` (default: defaults)."""
    settings = settings or Settings()
    return {
        "openapi": "3.1.0",
        "info": {"title": "chatq", "version": "0.1.0", "description": _DESCRIPTION},
        "servers": [{"url": "/"}],
        "paths": quotas.add_headers(
            {
                **paths(OPERATIONS),
                **response_paths(),
                **service.paths(),
                **webhooks.paths(),
                **batches.paths(),
            }
        ),
        "webhooks": webhooks.events(),
        "components": {
            "schemas": schemas(settings),
            "parameters": parameters(settings),
            "headers": headers(),
            "securitySchemes": {
                "bearerAuth": _bearer("A key from CHATQ_API_KEYS."),
                "metricsToken": _bearer(
                    "CHATQ_METRICS_TOKEN: /metrics with the series that name a key."
                ),
            },
        },
    }
