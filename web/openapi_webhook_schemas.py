"""The webhook objects of the OpenAPI document: endpoints, deliveries and the event an
endpoint receives (web/openapi_webhooks.py has their operations)."""

from __future__ import annotations

from chatq.webhooks import EVENT_TYPES
from chatq.webhooks_log import ATTEMPT_OUTCOMES
from web.openapi_schemas import Schema, ref


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
        ["attempted_at", "outcome", "status_code", "duration_s", "reason"],
        attempted_at={"type": "number"},
        duration_s={"type": ["number", "null"], "description": "null while in progress."},
        status_code={"type": ["integer", "null"]},
        outcome={
            "enum": list(ATTEMPT_OUTCOMES),
            "description": "`in_progress`: the attempt is running now; `lost`: its worker "
            "stopped before it ended.",
        },
        reason={"type": ["string", "null"], "description": "Why the attempt failed."},
    )
    fields: dict[str, Schema] = {
        "id": _STR,
        "object": {"const": "webhook.delivery"},
        "endpoint_id": _STR,
        "event": ref("WebhookEvent"),
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
        data={"type": "array", "items": ref(item)},
        has_more={"type": "boolean"},
    )


_LABEL = r"[A-Za-z][A-Za-z0-9]{0,48}"
_URL_PATTERN = rf"^https?://({_LABEL}\.){{0,4}}{_LABEL}(:[1-9][0-9]{{0,3}})?(/[!$-~]*)?$"


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
    # An http(s) URL with a host and no credentials or #fragment. The pattern is a part of
    # what the server accepts (a name of up to five labels of letters and digits, each
    # starting with a letter: nothing IDNA or the 253-character limit refuses; a path of
    # printable ASCII: no control or format character); the description says the whole rule.
    url = {
        "type": "string",
        "maxLength": 2048,
        "pattern": _URL_PATTERN,
        "description": "An http(s) URL with a host and no credentials, #fragment, whitespace "
        "or control or format character. The host "
        "is an IP address (an IPv6 one in brackets) or a domain name as IDNA 2008 encodes it: "
        "labels of at most 63 characters, at most 253 in all. Unless "
        "CHATQ_WEBHOOK_ALLOW_PRIVATE=1, an address that is not globally routable (or an IPv6 "
        "form of one) is refused, and names are checked when connecting.",
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
