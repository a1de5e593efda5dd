"""Turning an accepted request into a job: record first, then the Celery message."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

from chatq import celery_app, jobs, keys
from chatq.errors import ApiError
from web.context import Services

log = logging.getLogger(__name__)


def body_hash(body: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a request body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _reused(svc: Services, earlier: str, digest: str) -> dict[str, str] | None:
    job_id, _, earlier_digest = earlier.partition(" ")
    if earlier_digest != digest:
        raise ApiError(
            422,
            "idempotency_key_reused",
            "This Idempotency-Key was already used with a different request body.",
            param="Idempotency-Key",
        )
    return svc.store.get(job_id)


def submit(
    svc: Services,
    owner: str,
    request: dict[str, Any],
    priority: str,
    idem_key: str | None,
) -> dict[str, str]:
    """Create and enqueue a job (or find the one this Idempotency-Key made); its record."""
    job_id = jobs.new_job_id()
    record = jobs.new_record(job_id, owner, request["model"], priority, request, time.time())
    idem = None
    if idem_key is not None:
        digest = body_hash({"priority": priority, "request": request})
        idem = (keys.idempotency(owner, idem_key), f"{job_id} {digest}")
    earlier = svc.store.create(record, svc.settings.lease_s, idem)
    if earlier and idem is not None:
        found = _reused(svc, earlier, idem[1].partition(" ")[2])
        if found is not None:
            return found
        # The earlier job has expired along with its record: start afresh without the key.
        svc.store.create(record, svc.settings.lease_s, None)
    try:
        celery_app.enqueue(svc.celery, job_id, priority)
    except Exception:
        # The short enqueue lease stays: the sweeper sends the message once it runs out.
        log.exception("could not send the message for %s; the sweeper will", job_id)
        return record
    svc.store.mark_sent(job_id, svc.settings.queue_resend_s)
    return record
