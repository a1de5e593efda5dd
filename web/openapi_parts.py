"""The parts the OpenAPI document's paths are built from: the shared parameters and headers,
what each error status means, and builders of responses and operations."""

from __future__ import annotations

from chatq.jobs import PRIORITIES
from web.openapi_schemas import Schema, ref

PARAMETERS: dict[str, Schema] = {
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
        "schema": {"type": "string", "enum": list(PRIORITIES), "default": "interactive"},
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

HEADERS: dict[str, Schema] = {
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

BAD_BODY = (
    "`invalid_json`, `invalid_request`, `missing_field`, `invalid_wait`: the body is "
    "not a JSON object in UTF-8, a field or option is missing or invalid (or out of "
    "its range or over this server's cap), or `wait` is not a finite number >= 0. "
    "`number_out_of_range`, `invalid_unicode`: a number beyond a 64-bit float, or a "
    "string holding a lone UTF-16 surrogate (`param` names it)."
)
BAD_JSON = (
    "`invalid_json`, `invalid_request`, `missing_field`: the body is not a JSON object "
    "in UTF-8, or a field is missing, of the wrong type, out of its range or over "
    "this server's cap. `number_out_of_range`, `invalid_unicode`: a number beyond a "
    "64-bit float, or a string holding a lone UTF-16 surrogate (`param` names it)."
)
BAD_WAIT = "`invalid_wait`: `wait` is not a finite number >= 0."
FULL = (
    "`queue_full`: queue depth over CHATQ_MAX_QUEUE_DEPTH; `backend_unavailable`: "
    "Redis cannot be reached."
)
FAILED_CONTEXT = "The job failed with `context_length_exceeded`."

ERRORS: dict[int, str] = {
    400: BAD_BODY,
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

REUSED_OR_CONTEXT = ERRORS[422] + " `idempotency_key_reused`: same Idempotency-Key, different body."


def param_ref(name: str) -> Schema:
    return {"$ref": f"#/components/parameters/{name}"}


def wait_param(default_s: float) -> Schema:
    """The `wait` query parameter, with this endpoint's default."""
    schema: Schema = {"type": "number", "minimum": 0, "default": default_s}
    return {
        "name": "wait",
        "in": "query",
        "schema": schema,
        "description": "Seconds to hold the request, fractions allowed, capped at "
        "CHATQ_MAX_WAIT (default 55).",
    }


def media(schemas_by_media: Schema) -> Schema:
    """Media type objects from `{media type: schema}`."""
    return {media: {"schema": schema} for media, schema in schemas_by_media.items()}


def response_object(description: str, content: Schema | None = None, *headers: str) -> Schema:
    """A response; `content` maps media types to schemas."""
    answer: Schema = {"description": description}
    if content:
        answer["content"] = media(content)
    if headers:
        answer["headers"] = {h: {"$ref": f"#/components/headers/{h}"} for h in headers}
    return answer


def json_ref(name: str) -> Schema:
    return {"application/json": ref(name)}


def job_response(status: int, description: str = "") -> Schema:
    """200 with a terminal job, or 202 with a pending one and its Location."""
    if status == 200:
        return response_object(
            description or "The job, terminal.", json_ref("Job"), "Preference-Applied"
        )
    return response_object(
        description or "The job, not yet terminal: its current status and partial `output_text`.",
        json_ref("Job"),
        "Location",
        "Preference-Applied",
    )


def error_responses(*statuses: int | tuple[int, str]) -> dict[str, Schema]:
    """OpenAI error responses; a `(status, description)` pair overrides the description."""
    responses: dict[str, Schema] = {}
    for item in statuses:
        status, description = item if isinstance(item, tuple) else (item, ERRORS[item])
        headers = ("Retry-After",) if status in (429, 503) else ()
        responses[str(status)] = response_object(description, json_ref("Error"), *headers)
    return responses


def operation(
    op_id: str,
    summary: str,
    responses: dict[str, Schema],
    *params: Schema,
    body: str | None = None,
    description: str | None = None,
) -> Schema:
    """One operation."""
    built: Schema = {"operationId": op_id, "summary": summary}
    if description:
        built["description"] = description
    if params:
        built["parameters"] = list(params)
    if body:
        built["requestBody"] = {"required": True, "content": media(json_ref(body))}
    built["responses"] = responses
    return built
