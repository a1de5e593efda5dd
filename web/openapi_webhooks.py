"""The webhook part of the OpenAPI document: /v1/webhooks, the events chatq POSTs to
endpoints (OpenAPI 3.1's `webhooks`), and the `Chatq-Webhook` header on submits; their
objects are in web/openapi_webhook_schemas.py."""

from __future__ import annotations

import copy
from typing import Any

from chatq.webhooks_log import MAX_LOG_PAGE
from web.openapi_schemas import ref

Schema = dict[str, Any]

_ERRORS = {
    "400": "`invalid_json`, `invalid_request`, `missing_field`: a field is missing or invalid "
    "(named by `param`; a `url` host is an IP address or an IDNA name, labels of at most 63 "
    "characters, at most 253 in all); `webhook_url_refused`: `url` is an address that is "
    "not globally routable, or a form of one (unless CHATQ_WEBHOOK_ALLOW_PRIVATE=1).",
    "401": "`invalid_api_key`: no key or an unknown key.",
    "404": "`webhook_not_found`: no endpoint of this key has that id; `delivery_not_found`.",
    "409": "`webhook_from_config`: the endpoint comes from CHATQ_WEBHOOKS; "
    "`webhook_disabled`: enable it first; `too_many_webhooks`: the key has its 20 "
    "endpoints already.",
    "429": "`rate_limit_exceeded`: the key's request rate is over its limit (a replay "
    "also counts against the key's requests per minute, CHATQ_KEY_RPM).",
    "503": "`backend_unavailable`: Redis cannot be reached or cannot serve now.",
}
HEADER_PARAMETER: Schema = {
    "name": "Chatq-Webhook",
    "in": "header",
    "schema": {"type": "string"},
    "description": "The id of one of this key's webhook endpoints: only it hears of this job's "
    "end; `none`: no endpoint does. Without it every endpoint of the key does. "
    "An id that is not this key's is `400 webhook_not_found`.",
}


def _json(name: str, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": ref(name)}}}


def _errors(*statuses: str) -> dict[str, Schema]:
    responses = {}
    for status in ("401", *statuses, "429", "503"):
        response = _json("Error", _ERRORS[status])
        if status in ("429", "503"):
            response["headers"] = {"Retry-After": {"$ref": "#/components/headers/Retry-After"}}
        responses[status] = response
    return responses


def _op(
    op_id: str,
    summary: str,
    ok: Schema,
    *errors: str,
    body: str | None = None,
    params: tuple[str, ...] = (),
    query: list[Schema] | None = None,
) -> Schema:
    op: Schema = {"operationId": op_id, "summary": summary}
    names = [
        {"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params
    ]
    if names or query:
        op["parameters"] = names + (query or [])
    if body:
        op["requestBody"] = {
            "required": body != "RotateSecretRequest",
            "content": {"application/json": {"schema": ref(body)}},
        }
    op["responses"] = {"200": ok, **_errors(*errors)}
    return op


def paths() -> dict[str, Schema]:
    """The /v1/webhooks paths."""
    one = ("webhook_id",)
    page = [
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LOG_PAGE, "default": 20},
        },
        {
            "name": "after",
            "in": "query",
            "schema": {"type": "string"},
            "description": "A delivery id: the page after it.",
        },
    ]
    endpoint = _json("WebhookEndpoint", "The endpoint, without its secret.")
    return {
        "/v1/webhooks": {
            "post": _op(
                "createWebhookEndpoint",
                "A new endpoint of this key",
                _json(
                    "WebhookEndpointWithSecret",
                    "The endpoint, with its signing secret (shown here and on rotation only).",
                ),
                "400",
                "409",
                body="WebhookEndpointRequest",
            ),
            "get": _op(
                "listWebhookEndpoints",
                "This key's endpoints",
                _json("WebhookEndpointList", "Configured ones first."),
            ),
        },
        "/v1/webhooks/{webhook_id}": {
            "get": _op("getWebhookEndpoint", "One endpoint", endpoint, "404", params=one),
            "delete": _op(
                "deleteWebhookEndpoint",
                "Delete an endpoint and its log",
                _json("WebhookEndpointDeleted", "Deleted."),
                "404",
                "409",
                params=one,
            ),
        },
        "/v1/webhooks/{webhook_id}/rotate_secret": {
            "post": _op(
                "rotateWebhookSecret",
                "A new signing secret",
                _json("WebhookEndpointWithSecret", "The endpoint with its new secret."),
                "400",
                "404",
                "409",
                body="RotateSecretRequest",
                params=one,
            )
        },
        "/v1/webhooks/{webhook_id}/enable": {
            "post": _op(
                "enableWebhookEndpoint",
                "Deliver to a disabled endpoint again",
                endpoint,
                "404",
                params=one,
            )
        },
        "/v1/webhooks/{webhook_id}/deliveries": {
            "get": _op(
                "listWebhookDeliveries",
                "The endpoint's delivery log, newest first",
                _json("WebhookDeliveryList", "Deliveries and their attempts."),
                "400",
                "404",
                params=one,
                query=page,
            )
        },
        "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/replay": {
            "post": _op(
                "replayWebhookDelivery",
                "Send a delivery's event again (same `webhook-id`)",
                _json("WebhookDelivery", "The new delivery."),
                "404",
                "409",
                params=("webhook_id", "delivery_id"),
            )
        },
    }


def events() -> dict[str, Schema]:
    """OpenAPI 3.1 `webhooks`: the POST an endpoint receives when a job or response ends."""
    return {
        "jobOrResponseEnded": {
            "post": {
                "operationId": "webhookEvent",
                "summary": "A job or response ended",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": ref("WebhookEvent")}},
                },
                "responses": {
                    "200": {
                        "description": "Any 2xx is a delivery; 410 disables the "
                        "endpoint; anything else (3xx included) is retried on the "
                        "schedule, not before `Retry-After`."
                    }
                },
            }
        }
    }


def add_header(all_paths: dict[str, Schema]) -> dict[str, Schema]:
    """`Chatq-Webhook` on every operation that submits a job."""
    for path, method in (
        ("/v1/jobs", "post"),
        ("/v1/chat/completions", "post"),
        ("/v1/responses", "post"),
    ):
        op = all_paths.get(path, {}).get(method)
        if op is not None:
            op.setdefault("parameters", []).append(copy.deepcopy(HEADER_PARAMETER))
    return all_paths
