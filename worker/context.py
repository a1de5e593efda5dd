"""What a worker process holds: Redis, the store, the upstream session, its running jobs."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from celery import Celery

from chatq import celery_app, fair, redis_conn
from chatq.config import Settings
from chatq.logs import Redactor
from chatq.rates import Rates
from chatq.replicas import replication
from chatq.store import Store
from worker.endpoints import Endpoints
from worker.flusher import Flusher
from worker.pacing import Pacer
from worker.running import Registry
from worker.upstream import make_session
from worker.upstream_conn import UpstreamSession


@dataclass
class WorkerContext:
    """Per-process state, made after any fork."""

    settings: Settings
    celery: Celery
    store: Store
    session: UpstreamSession
    registry: Registry
    redact: Redactor
    endpoints: Endpoints
    flusher: Flusher
    pacer: Pacer
    pid: int


_lock = threading.Lock()
_current: WorkerContext | None = None


def _build(settings: Settings, celery: Celery) -> WorkerContext:
    max_connections = settings.worker_concurrency + settings.webhook_concurrency + 10
    client = redis_conn.connect_state(settings, max_connections=max_connections)
    store = Store(
        client,
        settings.job_ttl_s,
        settings.max_followers,
        replication(settings),
        max_running=settings.tenant_max_running,
        max_running_overrides=settings.tenant_max_running_overrides,
        rates=Rates(client),
        park_s=fair.park_s(settings, amqp=celery_app.is_amqp(celery)),
    )
    return WorkerContext(
        settings=settings,
        celery=celery,
        store=store,
        session=make_session(settings),
        registry=Registry(),
        redact=Redactor(settings.secret_values()),
        endpoints=Endpoints(
            settings.upstream_urls, client, settings.cooldown_s, settings.cooldown_after_failures
        ),
        flusher=Flusher(store, settings.flush_interval_s),
        pacer=Pacer(settings, client),
        pid=os.getpid(),
    )


def context(settings: Settings, celery: Celery) -> WorkerContext:
    """This process's context, created on first use (so after a fork, never before)."""
    global _current
    with _lock:
        if _current is None or _current.pid != os.getpid():
            _current = _build(settings, celery)
        return _current
