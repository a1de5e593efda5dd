"""The OpenAPI paths of the Responses API (text subset) and of stored chat completions,
merged into the document of web/openapi/document.py (their schemas: chatq/responses/objects.py)."""

from __future__ import annotations

from chatq.responses import ID_PATTERN
from web.chat import COMPLETION_ID_PATTERN
from web.http import (
    CACHE_CONTROL,
    CONTEXT_OVERFLOW,
    IDEMPOTENCY_KEY,
    JOB_ID_HEADER,
    LAST_EVENT_ID,
    LOCATION,
    PREFER,
    PREFERENCE_APPLIED,
    PRIORITY,
    RESPONSE_WAIT,
    STARTING_AFTER,
    STREAM,
    WEBHOOK,
    Header,
)
from web.openapi import parts
from web.openapi.parts import FULL, Op, path_id, response_object
from web.openapi.schemas import Schema, ref

_ERRORS = {
    400: "A parameter is missing, invalid, or outside the text subset (`unsupported_parameter`: "
    "tools, reasoning, images, files, ...); `param` names it. "
    "`previous_response_not_found`; `invalid_wait`; `invalid_cursor`: a Last-Event-ID "
    "that is no sequence number.",
    404: "`response_not_found`: unknown, expired, deleted, `store: false` or another key's.",
    422: "`context_length_exceeded` (the prompt, previous responses included, is over the "
    "model's limit); `idempotency_key_reused`.",
    503: FULL,
}
_STREAM = (
    "Server-Sent Events: `event:` the type, `id:` the sequence number, `data:` one "
    "ResponseStreamEvent."
)


_SSE = {"type": "string", "description": _STREAM}
_ID = path_id("id", ID_PATTERN, "The response's id (`resp_…`), or its job's (`job_…`).")
_STORED_ID = path_id("id", COMPLETION_ID_PATTERN)
_ONE = "/v1/responses/{id}"


def _ok(description: str, name: str, *headers: Header) -> Schema:
    """A Response (or its events) answered."""
    return response_object(
        description, {"application/json": ref(name), "text/event-stream": _SSE}, *headers
    )


OPERATIONS = [
    Op(
        "post",
        "/v1/responses",
        "createResponse",
        "Create a response (a chat job)",
        {200: _ok("The Response, or its events.", "Response", JOB_ID_HEADER, PREFERENCE_APPLIED)},
        (400, 413, 422),
        (PREFER, PRIORITY, IDEMPOTENCY_KEY, CACHE_CONTROL, CONTEXT_OVERFLOW, WEBHOOK),
        body="ResponseRequest",
        description="`background: true` answers at once (`queued`); `stream: true` answers "
        "Server-Sent Events; otherwise the request is held until the response ends (a bounded "
        "hold with `Prefer: wait=N`). Always `200` with the Response, whatever its status: a "
        "failed one carries `error`.",
    ),
    Op(
        "get",
        _ONE,
        "getResponse",
        "A response, long-polled or streamed",
        {200: _ok("The Response (any status), or its events.", "Response", PREFERENCE_APPLIED)},
        (400, 404),
        (_ID, RESPONSE_WAIT, PREFER, STREAM, STARTING_AFTER, LAST_EVENT_ID),
        description="With `stream=true`, its events from the first (or after `starting_after`, "
        "or an SSE `Last-Event-ID`) until it ends, for as long as it is kept: the same numbers "
        "on every replay.",
    ),
    Op(
        "post",
        _ONE + "/cancel",
        "cancelResponse",
        "Cancel a queued or running response",
        {200: response_object("The Response as it now is (an ended one unchanged).", "Response")},
        (404,),
        (_ID,),
    ),
    Op(
        "delete",
        _ONE,
        "deleteResponse",
        "Delete a response for good",
        {200: response_object("Deleted.", "ResponseDeleted")},
        (404,),
        (_ID,),
        description="A queued or running response is cancelled first; then its record, text "
        "and events are removed.",
    ),
    Op(
        "get",
        "/v1/chat/completions/{id}",
        "getChatCompletion",
        "A job's chat completion, again",
        {
            200: response_object(
                "Exactly the upstream's `chat.completion`.", "ChatCompletion", JOB_ID_HEADER
            ),
            202: response_object(
                "Only with `Prefer: wait=N` (and N passed) or `respond-async`: the job.",
                "Job",
                LOCATION,
                PREFERENCE_APPLIED,
            ),
        },
        (404,),
        (_STORED_ID, PREFER),
        description="By the `Chatq-Job-Id` a POST /v1/chat/completions answered (or the "
        "`chatcmpl-` id of its stream): held like that POST until the job ends; a failed job "
        "answers its OpenAI error; a response is `404`.",
    ),
]


def response_paths() -> dict[str, Schema]:
    """The paths of the Responses API and of stored chat completions."""
    return parts.paths(OPERATIONS, _ERRORS)
