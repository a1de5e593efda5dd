"""Turning an accepted request into a job: from the cache, as a follower, or enqueued."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from chatq import broker, jobs, keys
from chatq.errors import ApiError
from chatq.jobs import Created, CreateKind
from web import metrics, tracing
from web.context import Services
from web.webhooks import record_fields

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
        **record,
        "status": jobs.COMPLETED,
        "cached": "1",
        "result": result_json,
        "output_text": message.get("content") or "",
        "finish_reason": choice.get("finish_reason") or "stop",
        "started_at": now,
        "completed_at": now,
        "cache_key": "",
        "cache_ttl": "",
    }


def _idem(
    owner: str,
    idem_key: str | None,
    job_id: str,
    priority: str,
    request: dict[str, Any],
    fields: dict[str, str],
) -> tuple[str, str] | None:
    if idem_key is None:
        return None
    asked: dict[str, Any] = {"priority": priority, "request": request}
    digest = jobs.digest({**asked, "fields": fields} if fields else asked)
    return keys.idempotency(owner, idem_key), f"{job_id} {digest}"


@dataclass
class Draft:
    """A job about to be created: its record, and what the cache said about it."""

    record: dict[str, str]
    hit: bool
    flight: str


def _draft(
    svc: Services,
    owner: str,
    request: dict[str, Any],
    priority: str,
    cache_control: str,
    fields: dict[str, str],
    job_id: str,
) -> Draft:
    """The new job's record, answered from the cache when it can be."""
    s = svc.settings
    rule = jobs.policy(request, cache_control, s.cache_ttl_s)
    key = jobs.cache_key(request, "*" if s.cache_shared else owner) if rule.cacheable else ""
    record = (
        jobs.new_record(job_id, owner, request["model"], priority, request, time.time()) | fields
    )
    record |= record_fields(svc, owner)  # announce its end to webhooks, if any
    record |= tracing.job_fields()
    if rule.store_ttl_s:
        record |= {"cache_key": key, "cache_ttl": str(rule.store_ttl_s)}
    if not rule.lookup:
        return Draft(record, False, "")
    hit = _lookup(svc, key)
    metrics.CACHE_LOOKUPS.labels("hit" if hit else "miss").inc()
    if hit is None:
        return Draft(record, False, key)
    return Draft(_as_cached(record, hit), True, "")


def job_id_for(svc: Services, owner: str, request: dict[str, Any], cache_control: str) -> str:
    """A new job id; a cacheable request's is in its cache key's shard, where identical
    requests meet (to follow one another, and to find the result cached)."""
    rule = jobs.policy(request, cache_control, svc.settings.cache_ttl_s)
    if not rule.cacheable:
        return jobs.new_job_id()
    key = jobs.cache_key(request, "*" if svc.settings.cache_shared else owner)
    return jobs.new_job_id(keys.shard_of_digest(key))


def submit(
    svc: Services,
    owner: str,
    request: dict[str, Any],
    priority: str,
    idem_key: str | None,
    cache_control: str = "",
    fields: dict[str, str] | None = None,
    job_id: str = "",
    prompt_tokens: int | None = None,
) -> dict[str, str]:
    """Create a job for `request` (or find the one its Idempotency-Key made); its record.
    `fields` are extra record fields (a response's `api` and `response`); `job_id` the id
    to give it (see job_id_for; a caller may have registered to wait for it);
    `prompt_tokens` its prompt's count if made already (the key's limits charge it)."""
    draft = _draft(
        svc,
        owner,
        request,
        priority,
        cache_control,
        fields or {},
        job_id or job_id_for(svc, owner, request, cache_control),
    )
    job_id = draft.record["id"]
    draft.record |= jobs.counted_fields(prompt_tokens)
    if not draft.hit:
        svc.admission.check_queue()
    if not svc.admission.admit(owner, job_id, request, prompt_tokens, draft.hit):
        return _make(svc, owner, request, priority, idem_key, fields or {}, draft)
    draft.record["announce"] = "1"  # its end, through the outbox, corrects what it holds
    try:
        record = _make(svc, owner, request, priority, idem_key, fields or {}, draft)
    except Exception:
        with contextlib.suppress(Exception):
            svc.admission.release(owner, job_id)
        raise
    if record["id"] != job_id:  # its Idempotency-Key's earlier job: no job was made
        svc.admission.release(owner, job_id)
    return record


def _make(
    svc: Services,
    owner: str,
    request: dict[str, Any],
    priority: str,
    idem_key: str | None,
    fields: dict[str, str],
    draft: Draft,
) -> dict[str, str]:
    """Create the drafted job, or find its Idempotency-Key's earlier one; its record."""
    record, job_id = draft.record, draft.record["id"]
    idem = _idem(owner, idem_key, job_id, priority, request, fields)
    if idem is not None:
        earlier = svc.store.remember_idempotency(key=idem[0], value=idem[1])
        found = _earlier(svc, earlier, idem[1].partition(" ")[2]) if earlier else None
        if found is not None:
            return found
        if earlier:  # its job is gone (deleted, or never made): the key is this job's now
            svc.redis.set(idem[0], idem[1], ex=svc.settings.job_ttl_s)
    traceparent = record.get("traceparent", "")
    queue, message = ("", "") if draft.hit else _message(svc, job_id, priority, owner, traceparent)
    created = _create(svc, draft, queue, message)
    if created.kind is CreateKind.CACHED:
        # The identical job it would have followed finished after our cache lookup.
        record, draft.hit = _as_cached(record, created.value), True
        created = _create(svc, Draft(record, True, ""))
    record["created_at"] = created.created_at or record["created_at"]
    if created.kind is CreateKind.FOLLOWER:
        metrics.CACHE_LOOKUPS.labels("coalesced").inc()
        return svc.store.get(job_id) or record
    if not draft.hit:
        if not queue:  # the broker is not the store's Redis: the create pushed no message
            enqueue(svc, job_id, priority, owner, traceparent)
        metrics.JOBS_SUBMITTED.labels(priority).inc()
    return record


def _message(
    svc: Services, job_id: str, priority: str, owner: str, traceparent: str
) -> tuple[str, str]:
    return broker.message_for_create(svc.celery, svc.settings, job_id, priority, owner, traceparent)


def _create(svc: Services, draft: Draft, queue: str = "", message: str = "") -> Created:
    """The store's create; with `message` (see _message), the job's run message pushed with it
    (one round trip, and no job queued without its message)."""
    return svc.store.create(
        record=draft.record,
        lease_s=svc.settings.lease_s,
        flight=draft.flight,
        cached=draft.hit,
        queue=queue,
        message=message,
    )


def enqueue(svc: Services, job_id: str, priority: str, owner: str, traceparent: str = "") -> None:
    """Send a queued job's message to its owner's queue; if that fails the sweeper sends it
    once its lease runs out."""
    try:
        broker.enqueue(
            svc.celery, job_id, priority, state=svc.redis, owner=owner, traceparent=traceparent
        )
    except Exception:
        log.exception("could not send the message for %s; the sweeper will", job_id)


def enqueue_detached(svc: Services, follower_ids: tuple[str, ...]) -> None:
    """Send the messages of the followers a cancel detached: they were waiting on the
    cancelled job's upstream call, and now run on their own (in their own traces)."""
    for follower_id in follower_ids:
        follower = svc.store.get(follower_id) or {}
        enqueue(
            svc,
            follower_id,
            follower.get("priority") or "interactive",
            follower.get("owner", ""),
            follower.get("traceparent", ""),
        )
