"""The per-process services a request uses, kept in `app.extensions["chatq"]`."""

from __future__ import annotations

from dataclasses import dataclass

import redis
from celery import Celery
from flask import current_app

from chatq.broker import Broker
from chatq.cache import LocalCache
from chatq.config import Settings
from chatq.notify import Listener
from chatq.store import Store
from web.admission import Admission
from web.auth import KeyRing
from web.holds import HeldCounts


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
