"""The webhook objects of the OpenAPI document, from chatq/webhook_objects.py
(web/openapi_webhooks.py has their operations)."""

from __future__ import annotations

from chatq.webhook_objects import (
    RotateSecretRequest,
    WebhookDeliveryList,
    WebhookEndpointDeleted,
    WebhookEndpointList,
    WebhookEndpointRequest,
    WebhookEndpointWithSecret,
)
from web.openapi_schemas import Schema, components


def schemas() -> dict[str, Schema]:
    """The webhook component schemas."""
    return components(
        WebhookEndpointRequest,
        RotateSecretRequest,
        WebhookEndpointWithSecret,
        WebhookEndpointList,
        WebhookEndpointDeleted,
        WebhookDeliveryList,
    )
