"""Webhooks in the worker: the relay handler that turns an ended job into deliveries, the body
of the delivery task, and the scheduler that sends the deliveries that are due.

The schedule lives in Redis (chatq/webhooks_log.py), never in Celery ETAs: with the Redis
broker a message with an ETA waits in one worker's memory and is lost with it (chatq turns
kombu's ack emulation off), so hours-long ETAs would not be durable.
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

from chatq import celery_app, keys
from chatq.config import Settings
from chatq.outbox import Ended
from chatq.redis_conn import is_backend_error
from chatq.webhooks import Event, event_for, retry_delay_s
from chatq.webhooks_log import DELIVERED, FAILED, PENDING, Attempt, Deliveries, Started
from chatq.webhooks_net import guarded_session
from chatq.webhooks_store import Endpoint, Endpoints
from worker import relay
from worker.context import WorkerContext
from worker.webhooks_send import GONE, Sent, send

log = logging.getLogger(__name__)
TICK_S = 1.0
HOLD_MARGIN_S = 5.0
RECORD_FIELDS = ("id", "owner", "api", "webhook", "finish_reason", "completed_at", "created_at")

ATTEMPTS = Counter(
    "chatq_webhook_attempts_total", "Webhook delivery attempts, by outcome", ["outcome"]
)
DELIVERIES = Counter(
    "chatq_webhook_deliveries_total", "Webhook deliveries ended, by final status", ["status"]
)


def hold_s(settings: Settings) -> float:
    """How long a delivery handed to a worker is held before another may take it over: an
    attempt's connect and read timeouts, and a margin."""
    return 2 * settings.webhook_timeout_s + HOLD_MARGIN_S


@dataclass
class Hooks:
    """What a worker process holds for webhooks, made after any fork."""

    endpoints: Endpoints
    deliveries: Deliveries
    session: requests.Session
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
                Deliveries(client, s.webhook_log_ttl_s, hold_s(s)),
                guarded_session(s.webhook_allow_private),
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


@relay.handler
def announce(ctx: WorkerContext, ended: Ended) -> None:
    """An announced job ended: one delivery per endpoint that wants its event."""
    values = ctx.store.redis.hmget(keys.job(ended.job_id), RECORD_FIELDS)
    record = {k: str(v) for k, v in zip(RECORD_FIELDS, values, strict=True) if v is not None}
    if not record.get("id"):
        return  # expired, or deleted
    event = event_for(record, ended.status)
    h = hooks(ctx)
    for endpoint in _targets(h.endpoints, record, event.type):
        dlv = delivery_id(event, endpoint.id)
        token = h.deliveries.add(dlv, endpoint.id, event)
        if token:
            _send_task(ctx, dlv, token)


def _send_task(ctx: WorkerContext, dlv: str, token: str) -> None:
    try:
        celery_app.enqueue_webhook(ctx.celery, dlv, token)
    except Exception as exc:  # still due in Redis: the scheduler sends it once its hold ends
        log.warning("webhook delivery %s not sent now (%s); it will be", dlv, type(exc).__name__)


def _after(ctx: WorkerContext, started: Started, sent: Sent) -> Attempt:
    """What the delivery is after this attempt: delivered, failed for good, or due again."""
    done = len(json.loads(started.record.get("attempts") or "[]")) + 1
    status, delay_s = FAILED, 0.0
    if sent.outcome == "delivered":
        status = DELIVERED
    elif sent.outcome not in (GONE, "endpoint_deleted", "endpoint_disabled"):
        delay = retry_delay_s(done, ctx.settings.webhook_retry_scale, sent.retry_after_s)
        status, delay_s = (PENDING, delay) if delay is not None else (FAILED, 0.0)
    return Attempt(status, sent.outcome, sent.status_code, started.now_s, sent.duration_s, delay_s)


def deliver(ctx: WorkerContext, dlv: str, token: str) -> None:
    """Make one attempt of the delivery `dlv`, if the message with `token` is in charge."""
    h = hooks(ctx)
    started = h.deliveries.begin(dlv, token)
    if started is None:
        return  # a stale message: another one took this attempt over
    endpoint = h.endpoints.get(started.record.get("endpoint", ""))
    if endpoint is None or endpoint.disabled:
        sent = Sent("endpoint_deleted" if endpoint is None else "endpoint_disabled", None, 0.0)
    else:
        sent = send(
            h.session, endpoint, started.record, started.now_s, ctx.settings.webhook_timeout_s
        )
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


class Scheduler:
    """One thread per worker process: sends the deliveries that are due (retries, and those
    whose worker was lost), each held so that no other scheduler sends it too."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self._stop = threading.Event()

    def start(self) -> None:
        """Start sending."""
        threading.Thread(target=self._run, name="chatq-webhooks", daemon=True).start()

    def stop(self) -> None:
        """Stop after the current tick."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                for dlv, token in hooks(self.ctx).deliveries.take():
                    _send_task(self.ctx, dlv, token)
            except Exception as exc:
                if not is_backend_error(exc):
                    log.exception("webhook scheduler tick failed")
