"""The per-process services a request uses, kept in `app.extensions["chatq"]`, and the gate
of every /v1 request, which checks the caller with them."""

from __future__ import annotations

from dataclasses import dataclass

import redis
from celery import Celery
from flask import current_app, g

from chatq.broker import Broker
from chatq.config import Settings
from chatq.jobs import Listener, LocalCache, Store
from web.admission import Admission, HeldCounts
from web.http import KeyRing, authenticate


@dataclass
class Services:
    """Everything a view needs besides the request itself."""

    settings: Settings
    redis: redis.Redis
    store: Store
    listener: Listener
    celery: Celery
    keys: KeyRing
    local_cache: LocalCache
    admission: Admission
    broker: Broker
    held: HeldCounts


def services() -> Services:
    """The services of the current app."""
    svc: Services = current_app.extensions["chatq"]
    return svc


def authorize(svc: Services) -> str:
    """The caller's key name; 401 for a bad key, 429 when over its rate limit."""
    owner = authenticate(svc.keys)
    g.chatq_key = owner
    svc.admission.check_rate(owner)
    return owner
