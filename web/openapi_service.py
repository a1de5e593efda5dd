"""The OpenAPI paths of the listings and of operations: /v1/models, /v1/queue, /healthz,
/readyz, /metrics, /openapi.json and the demo page."""

from __future__ import annotations

from web.openapi_parts import (
    error_responses,
    json_ref,
    operation,
    response_object,
)
from web.openapi_schemas import Schema, ref


def listing_paths() -> dict[str, Schema]:
    """GET /v1/models and GET /v1/queue."""
    models = operation(
        "listModels",
        "The upstream's models",
        {
            "200": response_object(
                "OpenAI's `list` of `model` objects, passed through.", json_ref("ModelList")
            ),
            **error_responses(401, 429, (502, "The upstream's model list could not be read."), 503),
        },
    )
    queue = operation(
        "getQueue",
        "Load, for people and autoscalers",
        {
            "200": response_object(
                "To a key of CHATQ_ADMIN_KEYS, queue depths, workers, rates and the "
                "recommended concurrency (`Queue`); to any other key, its own depths, "
                "rates and batches, and totals that name no key (`QueueShare`).",
                {"application/json": {"oneOf": [ref("Queue"), ref("QueueShare")]}},
            ),
            **error_responses(401, 429, 503),
        },
    )
    return {"/v1/models": {"get": models}, "/v1/queue": {"get": queue}}


def ops_paths() -> dict[str, Schema]:
    """The open endpoints: health, readiness, metrics, this document, the demo page."""
    text = {"type": "string"}
    return {
        "/healthz": {
            "get": operation(
                "healthz",
                "Liveness",
                {"200": response_object("The process runs.", json_ref("Health"))},
            )
        },
        "/readyz": {
            "get": operation(
                "readyz",
                "Readiness",
                {
                    "200": response_object(
                        "Redis answers; whether it keeps jobs through a full memory and a restart.",
                        json_ref("Readiness"),
                    ),
                    **error_responses(
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
            "get": operation(
                "metrics",
                "Prometheus metrics",
                {
                    "200": response_object(
                        "Prometheus text format, names prefixed `chatq_`. The series that "
                        "name a key (label `key`) only with `Authorization: Bearer "
                        "<CHATQ_METRICS_TOKEN>`; without an `Authorization` header, all "
                        "the others.",
                        {"text/plain; version=0.0.4": text},
                    ),
                    **error_responses(
                        (401, "`invalid_metrics_token`: credentials other than the token.")
                    ),
                },
            )
        },
        "/openapi.json": {
            "get": operation(
                "openapi",
                "This document",
                {
                    "200": response_object(
                        "The OpenAPI 3.1 document.", {"application/json": {"type": "object"}}
                    )
                },
            )
        },
        "/": {
            "get": operation(
                "demo",
                "Chat demo page",
                {
                    "200": response_object(
                        "One HTML page; asks for a key, uses the events long-poll.",
                        {"text/html": text},
                    )
                },
            )
        },
    }
