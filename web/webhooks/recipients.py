"""Which endpoints hear of a job: decided when it is submitted, written on its record."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app, has_request_context

from chatq.errors import ApiError
from chatq.webhooks import TOPIC, Deliveries, Endpoints, KnownOwners
from web import http
from web.context import Services
from web.http import WEBHOOK

NONE = "none"


@dataclass
class WebhookServices:
    """The endpoints and deliveries of this web process."""

    endpoints: Endpoints
    deliveries: Deliveries


def webhook_services(svc: Services) -> WebhookServices:
    """This app's webhook services, made on first use."""
    found = current_app.extensions.get("chatq_webhooks")
    if found is None:
        s = svc.settings
        owners = KnownOwners()
        svc.listener.watch(TOPIC, owners.changed, owners.reset)
        found = WebhookServices(
            Endpoints(svc.redis, s.webhooks, owners),
            Deliveries(svc.redis, s.webhook_log_ttl_s),
        )
        current_app.extensions["chatq_webhooks"] = found
    return found


def record_fields(svc: Services, owner: str) -> dict[str, str]:
    """The fields that route a new job's end to webhooks: `announce`, and `webhook` when the
    request names one endpoint (`Chatq-Webhook: <id>`); `Chatq-Webhook: none` for none."""
    named = (http.text(WEBHOOK) or "").strip() if has_request_context() else ""
    hooks = webhook_services(svc)
    if not named:
        return {"announce": "1"} if hooks.endpoints.has_any(owner) else {}
    if named.lower() == NONE:
        # Written down: a job announced for another reason (the keys' limits) must not
        # reach the key's endpoints either; no endpoint has this id.
        return {"webhook": NONE}
    if hooks.endpoints.owned(owner, named) is None:
        raise ApiError(
            400,
            WEBHOOK.code,
            f"{WEBHOOK.name} names no webhook endpoint of this key.",
            param=WEBHOOK.name,
        )
    return {"announce": "1", "webhook": named}
