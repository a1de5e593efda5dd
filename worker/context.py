"""What a worker process holds: Redis, the store, the upstream session, its running jobs."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from celery import Celery

from chatq import admission, broker, topology
from chatq.config import Settings
from chatq.jobs import Rates, Store
from chatq.runtime import Redactor
from chatq.topology import replication
from worker.jobs import Flusher, Registry
from worker.upstream import Endpoints, Pacer, UpstreamSession, make_session


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
    client = topology.connect_state(settings, max_connections=max_connections)
    store = Store(
        client,
        settings.job_ttl_s,
        settings.max_followers,
        replication(settings),
        max_running=settings.tenant_max_running,
        max_running_overrides=settings.tenant_max_running_overrides,
        rates=Rates(client),
        park_s=admission.park_s(settings, amqp=broker.is_amqp(celery)),
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
