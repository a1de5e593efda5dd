"""Turning an accepted request into a job: from the cache, as a follower, or enqueued."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from chatq import cache, celery_app, jobs, keys
from chatq.errors import ApiError
from chatq.store import Created, CreateKind
from web import metrics
from web.context import Services
from web.webhooks_routing import record_fields

log = logging.getLogger(__name__)


def _earlier(svc: Services, earlier: str, digest: str) -> dict[str, str] | None:
    job_id, _, earlier_digest = earlier.partition(" ")
    if earlier_digest != digest:
        raise ApiError(
            422,
            "idempotency_key_reused",
            "This Idempotency-Key was already used with a different request body.",
            param="Idempotency-Key",
        )
    return svc.store.get(job_id)


def _lookup(svc: Services, key: str) -> str | None:
    """A cached result from this process's LRU, else from Redis (then kept locally)."""
    found = svc.local_cache.get(key)
    if found is not None:
        return found
    pipe = svc.redis.pipeline(transaction=False)
    pipe.get(keys.cache(key))
    pipe.pttl(keys.cache(key))
    value, ttl_ms = pipe.execute()
    if value is not None and ttl_ms > 0:
        svc.local_cache.put(key, value, ttl_ms / 1000)
    return str(value) if value is not None else None


def _as_cached(record: dict[str, str], result_json: str) -> dict[str, str]:
    """The record of a job answered from the cache: completed as it is created."""
    result = json.loads(result_json)
    choice = (result.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    now = record["created_at"]
    return {
        **record, "status": jobs.COMPLETED, "cached": "1", "result": result_json,
        "output_text": message.get("content") or "",
        "finish_reason": choice.get("finish_reason") or "stop",
        "started_at": now, "completed_at": now, "cache_key": "", "cache_ttl": "",
    }


def _idem(owner: str, idem_key: str | None, job_id: str, priority: str,
          request: dict[str, Any], fields: dict[str, str]) -> tuple[str, str] | None:
    if idem_key is None:
        return None
    asked: dict[str, Any] = {"priority": priority, "request": request}
    digest = cache.digest({**asked, "fields": fields} if fields else asked)
    return keys.idempotency(owner, idem_key), f"{job_id} {digest}"


@dataclass
class Draft:
    """A job about to be created: its record, and what the cache said about it."""

    record: dict[str, str]
    hit: bool
    flight: str


def _draft(svc: Services, owner: str, request: dict[str, Any], priority: str,
           cache_control: str, fields: dict[str, str], job_id: str) -> Draft:
    """The new job's record, answered from the cache when it can be."""
    s = svc.settings
    rule = cache.policy(request, cache_control, s.cache_ttl_s)
    key = cache.cache_key(request, "*" if s.cache_shared else owner) if rule.cacheable else ""
    record = jobs.new_record(job_id, owner, request["model"], priority, request,
                             time.time()) | fields
    record |= record_fields(svc, owner)  # announce its end to webhooks, if any
    if rule.store_ttl_s:
        record |= {"cache_key": key, "cache_ttl": str(rule.store_ttl_s)}
    if not rule.lookup:
        return Draft(record, False, "")
    hit = _lookup(svc, key)
    metrics.CACHE_LOOKUPS.labels("hit" if hit else "miss").inc()
    if hit is None:
        return Draft(record, False, key)
    return Draft(_as_cached(record, hit), True, "")


def submit(
    svc: Services,
    owner: str,
    request: dict[str, Any],
    priority: str,
    idem_key: str | None,
    cache_control: str = "",
    fields: dict[str, str] | None = None,
    job_id: str = "",
) -> dict[str, str]:
    """Create a job for `request` (or find the one its Idempotency-Key made); its record.
    `fields` are extra record fields (a response's `api` and `response`); `job_id` the id
    to give it (a caller may have registered to wait for it), else a new one."""
    draft = _draft(svc, owner, request, priority, cache_control, fields or {},
                   job_id or jobs.new_job_id())
    record, job_id = draft.record, draft.record["id"]
    if not draft.hit:
        svc.admission.check_queue()
    idem = _idem(owner, idem_key, job_id, priority, request, fields or {})
    created = _create(svc, draft, idem)
    if created.kind is CreateKind.CACHED:
        # The identical job it would have followed finished after our cache lookup.
        record, draft.hit = _as_cached(record, created.value), True
        created = _create(svc, Draft(record, True, ""), idem)
    if created.kind is CreateKind.EARLIER and idem is not None:
        found = _earlier(svc, created.value, idem[1].partition(" ")[2])
        if found is not None:
            return found
        # Only a job deleted by hand leaves its key behind: then start afresh.
        created = _create(svc, draft, None)
    record["created_at"] = created.created_at or record["created_at"]
    if created.kind is CreateKind.FOLLOWER:
        metrics.CACHE_LOOKUPS.labels("coalesced").inc()
        return svc.store.get(job_id) or record
    if not draft.hit:
        enqueue(svc, job_id, priority)
        metrics.JOBS_SUBMITTED.labels(priority).inc()
    return record


def _create(svc: Services, draft: Draft, idem: tuple[str, str] | None) -> Created:
    return svc.store.create(record=draft.record, lease_s=svc.settings.lease_s,
                            idempotency=idem, flight=draft.flight, cached=draft.hit)


def enqueue(svc: Services, job_id: str, priority: str) -> None:
    """Send a queued job's message; if that fails the sweeper sends it once its lease runs out."""
    try:
        celery_app.enqueue(svc.celery, job_id, priority, state=svc.redis)
    except Exception:
        log.exception("could not send the message for %s; the sweeper will", job_id)
