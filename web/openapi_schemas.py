"""The component schemas of the OpenAPI document: the JSON objects of the API."""

from __future__ import annotations

import math
from typing import Any

from chatq.config import Settings
from chatq.validate import CAPPED, LOGIT_BIAS_RANGE, MAX_STOP_SEQUENCES, RANGES

Schema = dict[str, Any]

JOB_STATUSES = ["queued", "in_progress", "completed", "failed", "cancelled"]
TERMINAL_STATUSES = ["completed", "failed", "cancelled"]
PRIORITIES = ["interactive", "batch"]
ROLES = ["system", "developer", "user", "assistant", "tool", "function"]


def ref(name: str) -> Schema:
    """A reference to the component schema `name`."""
    return {"$ref": f"#/components/schemas/{name}"}


def _object(required: list[str], closed: bool = True, **properties: Schema) -> Schema:
    """An object schema; `closed` forbids properties other than those listed."""
    schema: Schema = {"type": "object", "required": required, "properties": properties}
    if closed:
        schema["additionalProperties"] = False
    return schema


def _const(value: str) -> Schema:
    return {"type": "string", "const": value}


def _nullable(type_: str, description: str) -> Schema:
    return {"type": [type_, "null"], "description": description}


def _error_schemas() -> dict[str, Schema]:
    """OpenAI's error body, and the error of a failed job."""
    detail = _object(
        ["message", "type", "param", "code"],
        message={"type": "string", "description": "A sentence for people."},
        type={"type": "string", "examples": ["invalid_request_error", "server_error"]},
        param=_nullable("string", "The request field or header at fault, if one is."),
        code=_nullable("string", "A stable machine-readable code; see each response."),
    )
    job_error = _object(
        ["type", "code", "message"],
        type={"type": "string"},
        code={
            "type": "string",
            "examples": ["upstream_error", "upstream_timeout", "upstream_invalid_response"],
        },
        message={"type": "string"},
    )
    job_error["description"] = "Why a job failed; never a traceback, never a secret."
    return {"Error": _object(["error"], error=detail), "JobError": job_error}


def _message_schema() -> Schema:
    """One message of a chat-completion request."""
    message = _object(
        ["role"],
        closed=False,
        role={"type": "string", "enum": ROLES},
        content={
            "type": ["string", "array", "null"],
            "items": {"type": "object"},
            "description": "Text, or a list of content parts; required unless `tool_calls`.",
        },
        tool_calls={"type": ["array", "null"], "items": {"type": "object"}},
    )
    message["anyOf"] = [
        {"required": ["content"]},
        {
            "required": ["tool_calls"],
            "properties": {"tool_calls": {"type": "array", "minItems": 1}},
        },
    ]
    return message


def _bounded(name: str, type_: str, settings: Settings) -> Schema:
    """A number field with the bounds web/validate checks: OpenAI's, then this server's cap."""
    low, high = RANGES[name]
    schema: Schema = {"type": type_, "minimum": low}
    setting = CAPPED.get(name, "")
    cap = getattr(settings, setting) if setting else 0
    if cap > 0:
        high = min(high, cap)
        schema["description"] = f"At most {cap} here (CHATQ_{setting.upper()})."
    if not math.isinf(high):
        schema["maximum"] = high
    return schema


def _sampling_fields(settings: Settings) -> dict[str, Schema]:
    """The typed, bounded fields of the request, as web/validate checks them."""
    numbers = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
    integers = ("n", "top_logprobs", "seed", "max_tokens", "max_completion_tokens")
    low, high = LOGIT_BIAS_RANGE
    return {
        **{name: _bounded(name, "number", settings) for name in numbers},
        **{name: _bounded(name, "integer", settings) for name in integers},
        "logprobs": {"type": "boolean"},
        "logit_bias": {
            "type": "object",
            "additionalProperties": {"type": "integer", "minimum": low, "maximum": high},
        },
        "stop": {
            "type": ["string", "array"],
            "items": {"type": "string"},
            "minItems": 1,
            "maxItems": MAX_STOP_SEQUENCES,
        },
    }


def _request_schemas(settings: Settings) -> dict[str, Schema]:
    """The chat-completion request, as OpenAI defines it; unknown fields pass through."""
    request = _object(
        ["messages"],
        closed=False,
        model={"type": "string", "minLength": 1, "description": "Default: CHATQ_DEFAULT_MODEL."},
        messages={"type": "array", "minItems": 1, "items": ref("ChatMessage")},
        stream={"type": "boolean", "default": False},
        # Every field the server checks (web/validate.FIELD_TYPES) is typed here too.
        **_sampling_fields(settings),
        response_format={"type": "object"},
        stream_options={"type": "object"},
        metadata={"type": "object"},
        user={"type": "string"},
        tools={"type": "array", "items": {"type": "object"}},
    )
    request["description"] = (
        "OpenAI's request, with the bounds of OpenAI's schema; fields "
        "not listed go to the upstream unchanged."
    )
    job_request = {
        "allOf": [ref("ChatCompletionRequest")],
        "properties": {"stream": {"const": False, "description": "`true` is a 400 here."}},
    }
    return {
        "ChatMessage": _message_schema(),
        "ChatCompletionRequest": request,
        "JobRequest": job_request,
    }


def _upstream_schemas() -> dict[str, Schema]:
    """Objects the upstream makes, passed through unchanged: only their outline is fixed."""
    completion = _object(
        ["object", "choices"],
        closed=False,
        id={"type": "string"},
        object=_const("chat.completion"),
        model={"type": "string"},
        choices={"type": "array", "items": {"type": "object"}},
        usage={"type": "object"},
    )
    chunk = _object(
        ["object", "choices"],
        closed=False,
        object=_const("chat.completion.chunk"),
        choices={"type": "array", "items": {"type": "object"}},
    )
    model = _object(["id", "object"], closed=False, id={"type": "string"}, object=_const("model"))
    models = _object(
        ["object", "data"],
        closed=False,
        object=_const("list"),
        data={"type": "array", "items": ref("Model")},
    )
    return {
        "ChatCompletion": completion,
        "ChatCompletionChunk": chunk,
        "Model": model,
        "ModelList": models,
    }


def _job_schema() -> Schema:
    """The job object, exactly the fields a job read answers."""
    job = _object(
        [],
        id={"type": "string", "pattern": "^job_[A-Za-z0-9_-]+$"},
        object=_const("chat.completion.job"),
        status={"type": "string", "enum": JOB_STATUSES},
        model={"type": "string"},
        priority={"type": "string", "enum": PRIORITIES},
        created_at={"type": "number", "description": "Unix time, seconds."},
        started_at=_nullable("number", "Unix time the current attempt started."),
        completed_at=_nullable("number", "Unix time the job ended."),
        cached={"type": "boolean", "description": "Answered from the result cache."},
        attempts={"type": "integer", "minimum": 0},
        output_text={"type": "string", "description": "Text so far; partial while running."},
        result={
            "oneOf": [ref("ChatCompletion"), {"type": "null"}],
            "description": "The upstream's `chat.completion`, once completed.",
        },
        error={"oneOf": [ref("JobError"), {"type": "null"}], "description": "Once failed."},
        trace_id=_nullable(
            "string",
            "The W3C trace id the job runs in: the client's `traceparent`'s, else its own.",
        ),
    )
    job["required"] = list(job["properties"])
    return job


def _event_schemas() -> dict[str, Schema]:
    """The events of a job and a page of them."""
    string = {"type": "string"}
    events = {
        "StatusEvent": _object(
            ["type", "status"],
            type=_const("status"),
            status={"type": "string", "enum": JOB_STATUSES},
        ),
        "DeltaEvent": _object(["type", "delta"], type=_const("delta"), delta=string),
        "ResetEvent": _object(["type"], type=_const("reset")),
        "EndEvent": _object(
            ["type", "status"],
            type=_const("end"),
            status={"type": "string", "enum": TERMINAL_STATUSES},
            finish_reason={"type": ["string", "null"]},
        ),
    }
    mapping = {name.removesuffix("Event").lower(): ref(name)["$ref"] for name in events}
    event = {
        "oneOf": [ref(name) for name in events],
        "discriminator": {"propertyName": "type", "mapping": mapping},
    }
    page = _object(
        ["object", "job_id", "status", "events", "cursor", "done"],
        object=_const("chat.completion.job.events"),
        job_id=string,
        status={"type": "string", "enum": JOB_STATUSES},
        events={"type": "array", "items": ref("Event")},
        cursor={"type": "string", "description": "Opaque: pass it back as `cursor`."},
        done={"type": "boolean", "description": "The job is terminal; no event follows."},
    )
    return {**events, "Event": event, "EventsPage": page}


def _queue_schema() -> Schema:
    """The load figures of GET /v1/queue."""
    number, count = {"type": "number", "minimum": 0}, {"type": "integer", "minimum": 0}
    age = {
        "type": ["number", "null"],
        "minimum": 0,
        "description": "Seconds; null when the broker cannot tell (RabbitMQ).",
    }
    queue = _object(["depth", "oldest_age_s"], depth=count, oldest_age_s=age)
    lines = _object(
        ["total", "waiting_in_file", "fed", "done"],
        total=count,
        waiting_in_file=count,
        fed={**count, "description": "Queued or running."},
        done=count,
    )
    return _object(
        [
            "queues",
            "in_progress",
            "workers",
            "arrival_rate_per_s",
            "mean_job_seconds",
            "recommended_concurrency",
            "batches",
            "webhooks",
        ],
        queues=_object(["interactive", "batch"], interactive=queue, batch=queue),
        in_progress=count,
        workers=_object(["count", "slots", "busy"], count=count, slots=count, busy=count),
        arrival_rate_per_s=number,
        mean_job_seconds=number,
        recommended_concurrency={
            **count,
            "description": "ceil(arrival_rate_per_s * mean_job_seconds * 1.2)",
        },
        batches=_object(["active", "lines"], active=count, lines=lines),
        webhooks=_object(
            ["in_flight", "due", "scheduled"],
            in_flight={**count, "description": "Webhook delivery attempts running."},
            due={**count, "description": "Deliveries due, waiting for a delivery slot."},
            scheduled={**count, "description": "Deliveries waiting for a later attempt."},
        ),
    )


def schemas(settings: Settings | None = None) -> dict[str, Schema]:
    """All component schemas, by name; the caps are `settings`' (default: the defaults)."""
    health = _object(["status"], closed=False, status={"type": "string"}, redis={"type": "boolean"})
    readiness = _object(
        ["status", "redis", "redis_noeviction", "redis_persistent"],
        closed=False,
        status={"type": "string"},
        redis={"type": "boolean"},
        redis_noeviction=_nullable(
            "boolean",
            "Redis's maxmemory-policy is noeviction, so a "
            "full Redis refuses writes instead of deleting jobs; null "
            "when Redis would not say.",
        ),
        redis_persistent=_nullable(
            "boolean",
            "Redis has AOF or RDB persistence on, so a "
            "restart keeps the jobs; null when Redis would not say.",
        ),
    )
    return {
        **_error_schemas(),
        **_request_schemas(settings or Settings()),
        **_upstream_schemas(),
        "Job": _job_schema(),
        **_event_schemas(),
        "Queue": _queue_schema(),
        "Health": health,
        "Readiness": readiness,
    }
