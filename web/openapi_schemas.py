"""The component schemas of the OpenAPI document: the JSON objects of API.md."""

from __future__ import annotations

from typing import Any, get_args

import msgspec

from chatq import batch_objects, jobs, response_objects, webhook_objects, webhooks
from chatq.chat_objects import ChatCompletionChunk, ChatCompletionRequest, ModelList, Role
from chatq.config import Settings
from chatq.errors import Error
from chatq.job_events import EventsPage, JobEvent
from chatq.validate import CAPPED

Schema = dict[str, Any]
REF = "#/components/schemas/{name}"


def ref(name: str) -> Schema:
    """A reference to the component schema `name`."""
    return {"$ref": REF.format(name=name)}


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


# Literal enums msgspec writes sorted, put back in the order they are declared in.
_ORDERED = [
    jobs.STATUSES,
    jobs.PRIORITIES,
    get_args(Role),
    batch_objects.STATUSES,
    response_objects.STATUSES,
    webhook_objects.ATTEMPT_OUTCOMES,
    webhooks.EVENT_TYPES,
]


def _ordered(values: list[Any]) -> list[Any]:
    for order in _ORDERED:
        if set(values) == set(order):
            return list(order)
    return values


def _tidy(node: Any) -> Any:
    """msgspec's schema, as this document writes it: no titles, one-line descriptions,
    `["number", "null"]` for a union of bare types, string enums typed (one value: const)."""
    if isinstance(node, list):
        return [_tidy(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _tidy(value) for key, value in node.items() if key != "title"}
    if isinstance(node.get("description"), str):
        node["description"] = " ".join(node["description"].split())
    members = node.get("anyOf", [])
    if members and all(list(m) == ["type"] and isinstance(m["type"], str) for m in members):
        node["type"] = [m["type"] for m in node.pop("anyOf")]
    values = node.get("enum")
    if values and all(isinstance(v, str) for v in values):
        node["type"] = "string"
        if len(values) == 1:
            node["const"] = node.pop("enum")[0]
        else:
            node["enum"] = _ordered(values)
    return node


def components(*types: Any) -> dict[str, Schema]:
    """The component schemas of `types` (structs, or unions of them), each struct named by
    its class; a union is named by what `types` maps it to (a `(name, union)` pair)."""
    named = [t for t in types if isinstance(t, tuple)]
    plain = [t for t in types if not isinstance(t, tuple)]
    roots, found = msgspec.json.schema_components(
        [*plain, *(union for _, union in named)], ref_template=REF
    )
    found.update((name, root) for (name, _), root in zip(named, roots[len(plain) :], strict=True))
    return {name: _tidy(schema) for name, schema in found.items()}


def _capped(schema: Schema, settings: Settings) -> Schema:
    """The request's schema with this server's caps (web/validate checks them too)."""
    for name, setting in CAPPED.items():
        cap = getattr(settings, setting)
        field = schema["properties"][name]
        if cap > 0:
            field["maximum"] = min(field.get("maximum", cap), cap)
            field["description"] = f"At most {cap} here (CHATQ_{setting.upper()})."
    return schema


def _chat_schemas(settings: Settings) -> dict[str, Schema]:
    """The chat request and every object of a job."""
    found = components(
        ChatCompletionRequest,
        ChatCompletionChunk,
        ModelList,
        jobs.Job,
        EventsPage,
        ("Event", JobEvent),
        Error,
    )
    _capped(found["ChatCompletionRequest"], settings)
    found["JobRequest"] = {
        "allOf": [ref("ChatCompletionRequest")],
        "properties": {"stream": {"const": False, "description": "`true` is a 400 here."}},
    }
    return found


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
        **_chat_schemas(settings or Settings()),
        "Queue": _queue_schema(),
        "Health": health,
        "Readiness": readiness,
    }
