"""The webhook part of the OpenAPI document: /v1/webhooks, and the events chatq POSTs to
endpoints (OpenAPI 3.1's `webhooks`); their objects are in chatq/webhooks/objects.py."""

from __future__ import annotations

from web.http import DELIVERIES_AFTER, DELIVERIES_LIMIT
from web.openapi import parts
from web.openapi.parts import Op, json_body, path_id, response_object
from web.openapi.schemas import Schema

_ERRORS = {
    400: "`invalid_json`, `invalid_request`, `missing_field`: a field is missing or invalid "
    "(named by `param`; a `url` host is an IP address or an IDNA name, labels of at most 63 "
    "characters, at most 253 in all); `webhook_url_refused`: `url` is an address that is "
    "not globally routable, or a form of one (unless CHATQ_WEBHOOK_ALLOW_PRIVATE=1).",
    404: "`webhook_not_found`: no endpoint of this key has that id; `delivery_not_found`.",
    409: "`webhook_from_config`: the endpoint comes from CHATQ_WEBHOOKS; "
    "`webhook_disabled`: enable it first; `too_many_webhooks`: the key has its 20 "
    "endpoints already.",
    429: "`rate_limit_exceeded`: the key's request rate is over its limit (a replay "
    "also counts against the key's requests per minute, CHATQ_KEY_RPM).",
}


_ONE = path_id("webhook_id")
_ENDPOINT = response_object("The endpoint, without its secret.", "WebhookEndpoint")
_HOOKS, _HOOK = "/v1/webhooks", "/v1/webhooks/{webhook_id}"
OPERATIONS = [
    Op(
        "post",
        _HOOKS,
        "createWebhookEndpoint",
        "A new endpoint of this key",
        {
            200: response_object(
                "The endpoint, with its signing secret (shown here and on rotation only).",
                "WebhookEndpointWithSecret",
            )
        },
        (400, 409),
        body="WebhookEndpointRequest",
    ),
    Op(
        "get",
        _HOOKS,
        "listWebhookEndpoints",
        "This key's endpoints",
        {200: response_object("Configured ones first.", "WebhookEndpointList")},
    ),
    Op("get", _HOOK, "getWebhookEndpoint", "One endpoint", {200: _ENDPOINT}, (404,), (_ONE,)),
    Op(
        "delete",
        _HOOK,
        "deleteWebhookEndpoint",
        "Delete an endpoint and its log",
        {200: response_object("Deleted.", "WebhookEndpointDeleted")},
        (404, 409),
        (_ONE,),
    ),
    Op(
        "post",
        _HOOK + "/rotate_secret",
        "rotateWebhookSecret",
        "A new signing secret",
        {200: response_object("The endpoint with its new secret.", "WebhookEndpointWithSecret")},
        (400, 404, 409),
        (_ONE,),
        body=json_body("RotateSecretRequest", required=False),
    ),
    Op(
        "post",
        _HOOK + "/enable",
        "enableWebhookEndpoint",
        "Deliver to a disabled endpoint again",
        {200: _ENDPOINT},
        (404,),
        (_ONE,),
    ),
    Op(
        "get",
        _HOOK + "/deliveries",
        "listWebhookDeliveries",
        "The endpoint's delivery log, newest first",
        {200: response_object("Deliveries and their attempts.", "WebhookDeliveryList")},
        (400, 404),
        (_ONE, DELIVERIES_LIMIT, DELIVERIES_AFTER),
    ),
    Op(
        "post",
        _HOOK + "/deliveries/{delivery_id}/replay",
        "replayWebhookDelivery",
        "Send a delivery's event again (same `webhook-id`)",
        {200: response_object("The new delivery.", "WebhookDelivery")},
        (404, 409),
        (_ONE, path_id("delivery_id")),
    ),
]


def paths() -> dict[str, Schema]:
    """The /v1/webhooks paths."""
    return parts.paths(OPERATIONS, _ERRORS)


def events() -> dict[str, Schema]:
    """OpenAPI 3.1 `webhooks`: the POST an endpoint receives when a job or response ends."""
    answer = (
        "Any 2xx is a delivery; 410 disables the endpoint; anything else (3xx included) is "
        "retried on the schedule, not before `Retry-After`."
    )
    post: Schema = {"operationId": "webhookEvent", "summary": "A job or response ended"}
    post |= {
        "requestBody": json_body("WebhookEvent"),
        "responses": {"200": {"description": answer}},
    }
    return {"jobOrResponseEnded": {"post": post}}
