"""Delivering webhooks: the relay handler, the delivery pool, one attempt."""

from worker.webhooks.pool import DeliveryPool

__all__ = ["DeliveryPool"]
