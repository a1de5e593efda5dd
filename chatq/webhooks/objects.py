"""The webhook objects of the API, each declared once: the event an endpoint receives
(chatq/webhooks/events.py signs it), endpoints (chatq/webhooks/store.py), deliveries and their
attempts (chatq/webhooks/deliveries.py), and the requests that make and change endpoints. The
OpenAPI components are generated from these structs."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from msgspec import UNSET, Meta, Struct, UnsetType

from chatq.config import MAX_URL_CHARS

JobEventType = Literal["job.completed", "job.failed", "job.cancelled"]
ResponseEventType = Literal[
    "response.completed", "response.failed", "response.cancelled", "response.incomplete"
]
EventType = Literal[JobEventType, ResponseEventType]
JOB_EVENTS: tuple[str, ...] = get_args(JobEventType)
RESPONSE_EVENTS: tuple[str, ...] = get_args(ResponseEventType)
# What an attempt in the log came to (worker/webhooks/send.py makes most of them).
AttemptOutcome = Literal[
    "delivered",
    "http_error",
    "redirect",
    "gone",
    "timeout",
    "connection_error",
    "refused",
    "invalid_url",
    "internal_error",
    "endpoint_deleted",
    "endpoint_disabled",
    "in_progress",
    "lost",
]
ATTEMPT_OUTCOMES: tuple[str, ...] = get_args(AttemptOutcome)


class _Closed(Struct, forbid_unknown_fields=True):
    """A closed object: a field not declared is refused."""


class EventData(_Closed):
    id: str


class WebhookEvent(_Closed):
    """What a webhook POSTs: thin, fetch the job or response by `data.id`. Signed per
    Standard Webhooks: `webhook-id` (= `id`), `webhook-timestamp`, `webhook-signature`
    (`v1,<base64 HMAC-SHA256 of id.timestamp.body>`, one per active secret)."""

    id: str
    object: Literal["event"]
    type: EventType
    created_at: int
    data: EventData


class WebhookEndpoint(_Closed, kw_only=True):
    """An endpoint the calling key's events are POSTed to."""

    id: str
    object: Literal["webhook_endpoint"]
    url: str
    name: str
    event_types: list[EventType]
    source: Literal["api", "config"]
    status: Literal["enabled", "disabled"]
    disabled_reason: str | None
    signing_secret_hint: str | None
    created_at: int
    updated_at: int


class WebhookEndpointWithSecret(WebhookEndpoint, kw_only=True):
    """An endpoint as it is made or its secret rotated: the new secret, once."""

    signing_secret: Annotated[str, Meta(pattern="^whsec_")]


class WebhookEndpointList(_Closed):
    object: Literal["list"]
    data: list[WebhookEndpoint]
    has_more: bool


class WebhookEndpointDeleted(_Closed):
    id: str
    object: Literal["webhook_endpoint.deleted"]
    deleted: Annotated[bool, Meta(extra_json_schema={"const": True})]


class Attempt(_Closed):
    """One attempt to deliver an event."""

    attempted_at: float
    outcome: Annotated[
        AttemptOutcome,
        Meta(
            description="`in_progress`: the attempt is running now; `lost`: its worker "
            "stopped before it ended."
        ),
    ]
    status_code: int | None
    duration_s: Annotated[float | None, Meta(description="null while in progress.")]
    reason: Annotated[str | None, Meta(description="Why the attempt failed.")]


class WebhookDelivery(_Closed):
    """One event to one endpoint, and every attempt to deliver it."""

    id: str
    object: Literal["webhook.delivery"]
    endpoint_id: str
    event: WebhookEvent
    status: Literal["pending", "delivered", "failed"]
    attempts: list[Attempt]
    next_attempt_at: float | None
    created_at: float
    replay_of: str | None


class WebhookDeliveryList(_Closed):
    object: Literal["list"]
    data: list[WebhookDelivery]
    has_more: bool


# An http(s) URL with a host and no credentials or #fragment. The pattern, for the document
# only, is a part of what the server accepts (a name of up to five labels of letters and
# digits, each starting with a letter: nothing IDNA or the 253-character limit refuses; a
# path of printable ASCII: no control or format character); the description says the whole
# rule, which chatq/config/webhook_settings.py checks.
_LABEL = r"[A-Za-z][A-Za-z0-9]{0,48}"
URL_PATTERN = rf"^https?://({_LABEL}\.){{0,4}}{_LABEL}(:[1-9][0-9]{{0,3}})?(/[!$-~]*)?$"
Url = Annotated[
    str,
    Meta(
        max_length=MAX_URL_CHARS,
        extra_json_schema={"pattern": URL_PATTERN},
        description="An http(s) URL with a host and no credentials, #fragment, whitespace or "
        "control or format character. The host is an IP address (an IPv6 one in brackets) "
        "or a domain name as IDNA 2008 encodes it: labels of at most 63 characters, at most "
        "253 in all. Unless CHATQ_WEBHOOK_ALLOW_PRIVATE=1, an address that is not globally "
        "routable (or an IPv6 form of one) is refused, and names are checked when connecting.",
    ),
]


MAX_NAME_CHARS = 256


class WebhookEndpointRequest(_Closed, kw_only=True):
    """POST /v1/webhooks."""

    url: Url
    name: Annotated[str, Meta(max_length=MAX_NAME_CHARS)] | UnsetType = UNSET
    event_types: Annotated[list[EventType], Meta(min_length=1)] | UnsetType = UNSET


class RotateSecretRequest(_Closed):
    """POST /v1/webhooks/{webhook_id}/rotate_secret."""

    # null is taken as absent, as for every optional field of a request body.
    keep_old_secret_active_for_24_hours: Annotated[
        bool | None, Meta(extra_json_schema={"default": False})
    ] = False
