"""The OpenAPI operations of the listings and of operations: /v1/models, /v1/queue,
/v1/usage, /healthz, /readyz, /metrics, /openapi.json and the demo page, one table."""

from __future__ import annotations

from web.openapi import parts
from web.openapi.parts import Op, response_object
from web.openapi.schemas import Schema, ref

_TEXT = {"type": "string"}
_QUEUE = (
    "To a key of CHATQ_ADMIN_KEYS, queue depths, workers, rates and the recommended "
    "concurrency (`Queue`); to any other key, its own depths, rates and batches, and totals "
    "that name no key (`QueueShare`)."
)
_METRICS = (
    "Prometheus text format, names prefixed `chatq_`. The series that name a key (label "
    "`key`) only with `Authorization: Bearer <CHATQ_METRICS_TOKEN>`; without an "
    "`Authorization` header, all the others."
)
_UNREADY = (
    "`backend_unavailable`: Redis does not answer; `redis_unsafe`: "
    "CHATQ_REDIS_REQUIRE_SAFE=1 and Redis may lose jobs."
)
OPERATIONS = [
    Op(
        "get",
        "/v1/models",
        "listModels",
        "The upstream's models",
        {200: response_object("OpenAI's `list` of `model` objects, passed through.", "ModelList")},
        ((502, "The upstream's model list could not be read."),),
    ),
    Op(
        "get",
        "/v1/queue",
        "getQueue",
        "Load, for people and autoscalers",
        {
            200: response_object(
                _QUEUE, {"application/json": {"oneOf": [ref("Queue"), ref("QueueShare")]}}
            )
        },
    ),
    Op(
        "get",
        "/v1/usage",
        "getUsage",
        "The calling key's limits and use",
        {
            200: response_object(
                "Its limits and what it used this minute, today and this month (UTC).", "Usage"
            )
        },
    ),
    Op(
        "get",
        "/healthz",
        "healthz",
        "Liveness",
        {200: response_object("The process runs.", "Health")},
    ),
    Op(
        "get",
        "/readyz",
        "readyz",
        "Readiness",
        {
            200: response_object(
                "Redis answers; whether it keeps jobs through a full memory and a restart.",
                "Readiness",
            )
        },
        ((503, _UNREADY),),
    ),
    Op(
        "get",
        "/metrics",
        "metrics",
        "Prometheus metrics",
        {200: response_object(_METRICS, {"text/plain; version=0.0.4": _TEXT})},
        ((401, "`invalid_metrics_token`: credentials other than the token."),),
    ),
    Op(
        "get",
        "/openapi.json",
        "openapi",
        "This document",
        {
            200: response_object(
                "The OpenAPI 3.1 document.", {"application/json": {"type": "object"}}
            )
        },
    ),
    Op(
        "get",
        "/",
        "demo",
        "Chat demo page",
        {
            200: response_object(
                "One HTML page; asks for a key, uses the events long-poll.", {"text/html": _TEXT}
            )
        },
    ),
]


def paths() -> dict[str, Schema]:
    """The listings' and the operations' paths."""
    return parts.paths(OPERATIONS)
