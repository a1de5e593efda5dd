"""Webhooks: events, endpoints, deliveries and the addresses they may reach."""

from chatq.webhooks.addresses import literal_refused
from chatq.webhooks.deliveries import (
    DELIVERED,
    FAILED,
    MAX_LOG_PAGE,
    PENDING,
    Attempt,
    Deliveries,
    Started,
    delivery_hold_s,
    new_delivery_id,
    public_view,
)
from chatq.webhooks.events import EVENT_TYPES, Event, event_for, headers, retry_delay_s
from chatq.webhooks.net import causes, guarded_session, refused
from chatq.webhooks.objects import (
    ATTEMPT_OUTCOMES,
    EventType,
    RotateSecretRequest,
    WebhookDeliveryList,
    WebhookEndpointDeleted,
    WebhookEndpointList,
    WebhookEndpointRequest,
    WebhookEndpointWithSecret,
)
from chatq.webhooks.owners import TOPIC, KnownOwners
from chatq.webhooks.store import API, MAX_ENDPOINTS_PER_KEY, Endpoint, Endpoints

__all__ = [
    "API",
    "ATTEMPT_OUTCOMES",
    "DELIVERED",
    "EVENT_TYPES",
    "FAILED",
    "MAX_ENDPOINTS_PER_KEY",
    "MAX_LOG_PAGE",
    "PENDING",
    "TOPIC",
    "Attempt",
    "Deliveries",
    "Endpoint",
    "Endpoints",
    "Event",
    "EventType",
    "KnownOwners",
    "RotateSecretRequest",
    "Started",
    "WebhookDeliveryList",
    "WebhookEndpointDeleted",
    "WebhookEndpointList",
    "WebhookEndpointRequest",
    "WebhookEndpointWithSecret",
    "causes",
    "delivery_hold_s",
    "event_for",
    "guarded_session",
    "headers",
    "literal_refused",
    "new_delivery_id",
    "public_view",
    "refused",
    "retry_delay_s",
]
