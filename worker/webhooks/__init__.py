"""Delivering webhooks: the relay handler, the delivery pool, one attempt."""
