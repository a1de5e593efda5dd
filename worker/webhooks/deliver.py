"""Webhooks in the worker: the relay handler that turns an ended job into deliveries, and one
attempt of a delivery (the delivery pool, worker/webhooks/pool.py, runs them).

The schedule lives in Redis (chatq/webhooks/deliveries.py), never in Celery messages: with the Redis
broker a message with an ETA waits in one worker's memory and is lost with it (chatq turns
kombu's ack emulation off), so hours-long ETAs would not be durable; and a delivery run as a
task would take a job's slot.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from dataclasses import dataclass

import requests
from prometheus_client import Counter

from chatq import keys
from chatq.jobs import Ended
from chatq.topology import is_backend_error
from chatq.webhooks import (
    DELIVERED,
    FAILED,
    PENDING,
    Attempt,
    Deliveries,
    Endpoint,
    Endpoints,
    Event,
    Started,
    delivery_hold_s,
    event_for,
    retry_delay_s,
)
from worker import run
from worker.context import WorkerContext
from worker.webhooks import send as webhooks_send
from worker.webhooks.send import GONE, INTERNAL_ERROR, INVALID_URL, Deadline, Sent, send

log = logging.getLogger(__name__)
RECORD_FIELDS = ("id", "owner", "api", "webhook", "finish_reason", "completed_at", "created_at")
# Outcomes after which the delivery is not tried again.
FINAL = (GONE, INVALID_URL, "endpoint_deleted", "endpoint_disabled")

ATTEMPTS = Counter(
    "chatq_webhook_attempts_total", "Webhook delivery attempts, by outcome", ["outcome"]
)
DELIVERIES = Counter(
    "chatq_webhook_deliveries_total", "Webhook deliveries ended, by final status", ["status"]
)


@dataclass
class Hooks:
    """What a worker process holds for webhooks, made after any fork; `due` is set when this
    process made a delivery due (its pool then takes it at once)."""

    endpoints: Endpoints
    deliveries: Deliveries
    session: requests.Session
    due: threading.Event
    pid: int


_lock = threading.Lock()
_current: Hooks | None = None


def hooks(ctx: WorkerContext) -> Hooks:
    """This process's webhook state, created on first use."""
    global _current
    with _lock:
        if _current is None or _current.pid != os.getpid():
            s, client = ctx.settings, ctx.store.redis
            _current = Hooks(
                Endpoints(client, s.webhooks),
                Deliveries(client, s.webhook_log_ttl_s, delivery_hold_s(s.webhook_timeout_s)),
                webhooks_send.session(s.webhook_allow_private, max(1, s.webhook_concurrency)),
                threading.Event(),
                os.getpid(),
            )
        return _current


def delivery_id(event: Event, endpoint_id: str) -> str:
    """The one delivery of `event` to an endpoint (so a repeated announcement adds none)."""
    return "dlv_" + hashlib.sha256(f"{event.id}\0{endpoint_id}".encode()).hexdigest()[:24]


def _targets(endpoints: Endpoints, record: dict[str, str], event_type: str) -> list[Endpoint]:
    """The job's named endpoint if it named one, else all its key's; enabled and subscribed."""
    owner, named = record.get("owner", ""), record.get("webhook", "")
    if named:
        found = endpoints.get(named)
        candidates = [found] if found is not None and found.owner == owner else []
    else:
        candidates = endpoints.of_owner(owner)
    return [e for e in candidates if not e.disabled and event_type in e.event_types]


@run.handler
def announce(ctx: WorkerContext, ended: Ended) -> None:
    """An announced job ended: one delivery per endpoint that wants its event."""
    values = ctx.store.redis.hmget(keys.job(ended.job_id), RECORD_FIELDS)
    record = {k: str(v) for k, v in zip(RECORD_FIELDS, values, strict=True) if v is not None}
    if not record.get("id"):
        return  # expired, or deleted
    event = event_for(record, ended.status)
    h = hooks(ctx)
    for endpoint in _targets(h.endpoints, record, event.type):
        if h.deliveries.add(delivery_id(event, endpoint.id), endpoint, event):
            h.due.set()


def _after(ctx: WorkerContext, started: Started, sent: Sent) -> Attempt:
    """What the delivery is after this attempt: delivered, failed for good, or due again."""
    done = len(json.loads(started.record.get("attempts") or "[]"))  # this one included
    status, delay_s = FAILED, 0.0
    if sent.outcome == "delivered":
        status = DELIVERED
    elif sent.outcome not in FINAL:
        delay = retry_delay_s(done, ctx.settings.webhook_retry_scale, sent.retry_after_s)
        status, delay_s = (PENDING, delay) if delay is not None else (FAILED, 0.0)
    return Attempt(
        status,
        sent.outcome,
        sent.status_code,
        started.now_s,
        sent.duration_s,
        delay_s,
        sent.reason,
    )


def _attempt(h: Hooks, started: Started, deadline: Deadline) -> tuple[Sent, Endpoint | None]:
    """Send the delivery to its endpoint, if there is one to send to; never raises but for
    Redis being unreachable."""
    try:
        endpoint = h.endpoints.get(started.record.get("endpoint", ""))
        if endpoint is None or endpoint.disabled:
            why = "endpoint_deleted" if endpoint is None else "endpoint_disabled"
            return Sent(why, None, 0.0, reason=f"the endpoint was {why.partition('_')[2]}"), None
        return send(h.session, endpoint, started.record, started.now_s, deadline), endpoint
    except Exception as exc:
        if is_backend_error(exc):
            raise
        why = f"the attempt failed: {type(exc).__name__}"
        log.warning("webhook delivery %s: %s", started.record.get("id"), why)
        return Sent(INTERNAL_ERROR, None, 0.0, reason=why), None


def deliver(ctx: WorkerContext, dlv: str, token: str, deadline: Deadline) -> None:
    """Make one attempt of the delivery `dlv`, within `deadline`, if `token` still holds it."""
    h = hooks(ctx)
    started = h.deliveries.begin(dlv, token)
    if started is None:
        return  # taken over, ended, or out of attempts
    sent, endpoint = _attempt(h, started, deadline)
    attempt = _after(ctx, started, sent)
    disable = ("", "")
    if sent.outcome == GONE and endpoint is not None:
        reason = {"reason": "the endpoint answered 410 Gone", "at": round(started.now_s, 3)}
        disable = (endpoint.id, json.dumps(reason))
    if h.deliveries.finish(dlv, token, attempt, disable):
        ATTEMPTS.labels(sent.outcome).inc()
        if attempt.status != PENDING:
            DELIVERIES.labels(attempt.status).inc()
        log.info(
            "webhook delivery %s attempt %s: %s",
            dlv,
            sent.outcome,
            attempt.status,
            extra={"delivery_id": dlv, "event": "webhook"},
        )
