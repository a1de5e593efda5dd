"""Admission control in the web: rate limits, budgets, held requests."""
