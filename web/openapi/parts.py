"""The parts the OpenAPI document's paths are built from: the parameters and headers (declared in
web/http/parameters.py and web/http/headers.py), what each error status means, and builders of
responses and operations."""

from __future__ import annotations

from dataclasses import dataclass

from chatq.config import Settings
from web.http import (
    HEADERS,
    LOCATION,
    PARAMETERS,
    PREFERENCE_APPLIED,
    RETRY_AFTER,
    TRACE_ID_HEADER,
    TRACEPARENT,
    TRACESTATE,
    WAIT,
    Header,
    Param,
)
from web.openapi.schemas import Schema, ref

# The operations that submit a job, by path and method: the keys' limits charge them.
SUBMITS = (("/v1/jobs", "post"), ("/v1/chat/completions", "post"), ("/v1/responses", "post"))

BAD_JSON = (
    "`invalid_json`, `invalid_request`, `missing_field`: the body is not a JSON object "
    "in UTF-8, or a field or option is missing, of the wrong type, out of its range or over "
    "this server's cap. `number_out_of_range`, `invalid_unicode`: a number beyond a "
    "64-bit float, or a string holding a lone UTF-16 surrogate (`param` names it)."
)
BAD_WAIT = f"`{WAIT.code}`: `{WAIT.name}` is not {WAIT.taken()}."
FULL = (
    "`queue_full`: queue depth over CHATQ_MAX_QUEUE_DEPTH; `backend_unavailable`: "
    "Redis cannot be reached."
)
FAILED_CONTEXT = "The job failed with `context_length_exceeded`."

ERRORS: dict[int, str] = {
    400: f"{BAD_JSON} {BAD_WAIT}",
    401: "`invalid_api_key`: no key or an unknown key.",
    404: "`job_not_found`: unknown, expired or foreign job id.",
    409: "`job_cancelled`: the job was cancelled.",
    413: "`request_too_large`: body over CHATQ_MAX_BODY_BYTES (default 1 MiB).",
    414: "`request_line_too_long`: the request line (method, path and query) is over 4,094 "
    "bytes, gunicorn's limit.",
    422: "`context_length_exceeded`: prompt tokens over the model's limit (the message says "
    "how many were counted and what the limit is).",
    429: "`rate_limit_exceeded`: the key's request rate is over its limit.",
    431: "`request_header_fields_too_large`: a header over 8,190 bytes, or over 100 headers "
    "(gunicorn's limits).",
    502: "The upstream failed (`upstream_error`), answered what is not a chat-completion "
    "stream (`upstream_invalid_response`), or the worker failed (`internal_error`).",
    503: "`backend_unavailable`: Redis cannot be reached or cannot serve now (out of memory, "
    "a read-only replica, loading).",
    504: "The upstream timed out (`upstream_timeout`).",
}

REUSED_OR_CONTEXT = ERRORS[422] + " `idempotency_key_reused`: same Idempotency-Key, different body."


def parameters(settings: Settings) -> dict[str, Schema]:
    """Every header and query parameter (web/http/parameters.py), by its component's name."""
    return {param.key: param.component(settings) for param in PARAMETERS}


def headers() -> dict[str, Schema]:
    """Every header the document lists (web/http/headers.py), by its name."""
    return {header.name: header.component() for header in HEADERS}


def path_id(name: str, pattern: str = "", description: str = "") -> Schema:
    """A path parameter; `pattern` is its value's regex, if it has one."""
    schema: Schema = {"type": "string", "pattern": pattern} if pattern else {"type": "string"}
    param: Schema = {"name": name, "in": "path", "required": True, "schema": schema}
    return {**param, "description": description} if description else param


def header_ref(header: Header) -> Schema:
    """A reference to the component of `header`."""
    return {"$ref": f"#/components/headers/{header.name}"}


def _param_ref(param: Param) -> Schema:
    return {"$ref": f"#/components/parameters/{param.key}"}


def response_object(
    description: str, content: Schema | str | None = None, *headers: Header
) -> Schema:
    """A response; `content` maps media types to schemas, or names a JSON component."""
    answer: Schema = {"description": description}
    if isinstance(content, str):
        content = json_ref(content)
    if content:
        answer["content"] = {media: {"schema": schema} for media, schema in content.items()}
    if headers:
        answer["headers"] = {h.name: header_ref(h) for h in headers}
    return answer


def json_ref(name: str) -> Schema:
    return {"application/json": ref(name)}


def job_response(status: int, description: str = "") -> Schema:
    """200 with a terminal job, or 202 with a pending one and its Location."""
    if status == 200:
        return response_object(description or "The job, terminal.", "Job", PREFERENCE_APPLIED)
    return response_object(
        description or "The job, not yet terminal: its current status and partial `output_text`.",
        "Job",
        LOCATION,
        PREFERENCE_APPLIED,
    )


def json_body(name: str, required: bool = True) -> Schema:
    """A JSON request body of the component schema `name`."""
    return {"required": required, "content": {"application/json": {"schema": ref(name)}}}


Error = int | tuple[int, str]


@dataclass(frozen=True)
class Op:
    """One operation of a capability's table: its 2xx answers, and its errors, each with the
    capability's text for its status unless given here (every /v1/ operation answers 401,
    414, 429, 431 and 503 too). `body` names the JSON request body's schema, or is the whole
    body."""

    method: str
    path: str
    op_id: str
    summary: str
    answers: dict[int, Schema]
    errors: tuple[Error, ...] = ()
    params: tuple[Param | Schema, ...] = ()
    body: Schema | str | None = None
    description: str = ""
    error_headers: tuple[Header, ...] = ()


# Bearer auth on every /v1/* operation; none elsewhere, but for /metrics: open, its series
# that name a key only with the metrics token.
_OPEN_SECURITY: dict[str, list[Schema]] = {"/metrics": [{}, {"metricsToken": []}]}


def _errors(op: Op, texts: dict[int, str]) -> dict[str, Schema]:
    statuses = dict(item if isinstance(item, tuple) else (item, "") for item in op.errors)
    if op.path.startswith("/v1/"):
        statuses = {401: "", 414: "", 429: "", 431: "", 503: "", **statuses}
    responses: dict[str, Schema] = {}
    for status, text in sorted(statuses.items()):
        headers = (RETRY_AFTER,) if status in (429, 503) else ()
        responses[str(status)] = response_object(
            text or texts[status], "Error", *headers, *op.error_headers
        )
    return responses


# Every /v1/* request may carry W3C trace context, and its answer names the trace.
_TRACE_PARAMS = (TRACEPARENT, TRACESTATE)


def _traced(answer: Schema) -> Schema:
    """`answer` with the Chatq-Trace-Id header beside its own."""
    headers = {**answer.get("headers", {}), TRACE_ID_HEADER.name: header_ref(TRACE_ID_HEADER)}
    return {**answer, "headers": headers}


def _operation(op: Op, texts: dict[int, str]) -> Schema:
    built: Schema = {"operationId": op.op_id, "summary": op.summary}
    if op.description:
        built["description"] = op.description
    v1 = op.path.startswith("/v1/")
    params = (*op.params, *_TRACE_PARAMS) if v1 else op.params
    if params:
        built["parameters"] = [_param_ref(p) if isinstance(p, Param) else p for p in params]
    if isinstance(op.body, str):
        built["requestBody"] = json_body(op.body)
    elif op.body:
        built["requestBody"] = op.body
    answers = {
        str(status): _traced(answer) if v1 else answer for status, answer in op.answers.items()
    }
    built["responses"] = {**answers, **_errors(op, texts)}
    built["security"] = [{"bearerAuth": []}] if v1 else _OPEN_SECURITY.get(op.path, [])
    return built


def paths(ops: list[Op], texts: dict[int, str] | None = None) -> dict[str, Schema]:
    """The paths of a capability's table; `texts`: its errors' texts by status (default:
    ERRORS)."""
    built: dict[str, Schema] = {}
    for op in ops:
        built.setdefault(op.path, {})[op.method] = _operation(op, {**ERRORS, **(texts or {})})
    return built
