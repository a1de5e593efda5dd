"""The gate of every /v1 request: who is calling, and may they now."""

from __future__ import annotations

from flask import g

from web.context import Services
from web.http.auth import authenticate


def authorize(svc: Services) -> str:
    """The caller's key name; 401 for a bad key, 429 when over its rate limit."""
    owner = authenticate(svc.keys)
    g.chatq_key = owner
    svc.admission.check_rate(owner)
    return owner
