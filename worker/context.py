"""What a worker process holds: Redis, the store, the upstream session, its running jobs."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from celery import Celery

from chatq.admission import fairness
from chatq.broker import celery_app
from chatq.config.settings import Settings
from chatq.jobs.rates import Rates
from chatq.jobs.store import Store
from chatq.runtime.logs import Redactor
from chatq.topology import connections as redis_conn
from chatq.topology.replicas import replication
from worker.jobs.flusher import Flusher
from worker.jobs.running import Registry
from worker.upstream.client import make_session
from worker.upstream.connections import UpstreamSession
from worker.upstream.endpoints import Endpoints
from worker.upstream.pacing import Pacer


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
        park_s=fairness.park_s(settings, amqp=celery_app.is_amqp(celery)),
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
