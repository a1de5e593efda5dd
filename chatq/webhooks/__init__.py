"""Webhooks: events, endpoints, deliveries and the addresses they may reach."""
