"""The webhook part of the OpenAPI document: /v1/webhooks, its objects, the events chatq
POSTs to endpoints (OpenAPI 3.1's `webhooks`), and the `Chatq-Webhook` header on submits."""

from __future__ import annotations

import copy
from typing import Any

from chatq.webhooks import EVENT_TYPES
from chatq.webhooks_log import MAX_LOG_PAGE

Schema = dict[str, Any]

_ERRORS = {
    "400": "`invalid_json`, `invalid_request`, `missing_field`: a field is missing or invalid "
    "(named by `param`); `webhook_url_refused`: `url` is a loopback, private or "
    "link-local address (unless CHATQ_WEBHOOK_ALLOW_PRIVATE=1).",
    "401": "`invalid_api_key`: no key or an unknown key.",
    "404": "`webhook_not_found`: no endpoint of this key has that id; `delivery_not_found`.",
    "409": "`webhook_from_config`: the endpoint comes from CHATQ_WEBHOOKS; "
    "`webhook_disabled`: enable it first; `too_many_webhooks`: the key has its 20 "
    "endpoints already.",
    "429": "`rate_limit_exceeded`: the key's request rate is over its limit.",
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


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


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
            "content": {"application/json": {"schema": _ref(body)}},
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


def _object(required: list[str], **properties: Schema) -> Schema:
    return {
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": False,
    }


_STR: Schema = {"type": "string"}
_INT: Schema = {"type": "integer"}
_TYPES: Schema = {"type": "array", "items": {"type": "string", "enum": list(EVENT_TYPES)}}


def _endpoint_schema(with_secret: bool) -> Schema:
    fields: dict[str, Schema] = {
        "id": _STR,
        "object": {"const": "webhook_endpoint"},
        "url": _STR,
        "name": _STR,
        "event_types": _TYPES,
        "source": {"enum": ["api", "config"]},
        "status": {"enum": ["enabled", "disabled"]},
        "disabled_reason": {"type": ["string", "null"]},
        "signing_secret_hint": {"type": ["string", "null"]},
        "created_at": _INT,
        "updated_at": _INT,
    }
    if with_secret:
        fields["signing_secret"] = {"type": "string", "pattern": "^whsec_"}
    return _object(list(fields), **fields)


def _delivery_schema() -> Schema:
    attempt = _object(
        ["attempted_at", "outcome", "status_code", "duration_s"],
        attempted_at={"type": "number"},
        duration_s={"type": "number"},
        status_code={"type": ["integer", "null"]},
        outcome={
            "enum": [
                "delivered",
                "http_error",
                "redirect",
                "gone",
                "timeout",
                "connection_error",
                "refused",
                "endpoint_deleted",
                "endpoint_disabled",
            ]
        },
    )
    fields: dict[str, Schema] = {
        "id": _STR,
        "object": {"const": "webhook.delivery"},
        "endpoint_id": _STR,
        "event": _ref("WebhookEvent"),
        "status": {"enum": ["pending", "delivered", "failed"]},
        "attempts": {"type": "array", "items": attempt},
        "next_attempt_at": {"type": ["number", "null"]},
        "created_at": {"type": "number"},
        "replay_of": {"type": ["string", "null"]},
    }
    return _object(list(fields), **fields)


def _list(item: str) -> Schema:
    return _object(
        ["object", "data", "has_more"],
        object={"const": "list"},
        data={"type": "array", "items": _ref(item)},
        has_more={"type": "boolean"},
    )


def schemas() -> dict[str, Schema]:
    """The webhook component schemas."""
    event = _object(
        ["id", "object", "type", "created_at", "data"],
        id=_STR,
        object={"const": "event"},
        type={"enum": list(EVENT_TYPES)},
        created_at=_INT,
        data=_object(["id"], id=_STR),
    )
    event["description"] = (
        "What a webhook POSTs: thin, fetch the job or response by "
        "`data.id`. Signed per Standard Webhooks: `webhook-id` (= `id`), "
        "`webhook-timestamp`, `webhook-signature` (`v1,<base64 HMAC-SHA256 "
        "of id.timestamp.body>`, one per active secret)."
    )
    # An http(s) URL with a host and no credentials or #fragment (what the server accepts).
    url = {
        "type": "string",
        "maxLength": 2048,
        "pattern": r"^https?://[A-Za-z0-9.-]+(:[1-9][0-9]{0,3})?(/[^#\s]*)?$",
    }
    request = _object(["url"], url=url, name=_STR, event_types={**_TYPES, "minItems": 1})
    return {
        "WebhookEvent": event,
        "WebhookEndpointRequest": request,
        "RotateSecretRequest": _object(
            [], keep_old_secret_active_for_24_hours={"type": "boolean", "default": False}
        ),
        "WebhookEndpoint": _endpoint_schema(False),
        "WebhookEndpointWithSecret": _endpoint_schema(True),
        "WebhookEndpointList": _list("WebhookEndpoint"),
        "WebhookEndpointDeleted": _object(
            ["id", "object", "deleted"],
            id=_STR,
            object={"const": "webhook_endpoint.deleted"},
            deleted={"const": True},
        ),
        "WebhookDelivery": _delivery_schema(),
        "WebhookDeliveryList": _list("WebhookDelivery"),
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
                    "content": {"application/json": {"schema": _ref("WebhookEvent")}},
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
