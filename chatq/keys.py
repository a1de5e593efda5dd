"""Every Redis key chatq uses, one function each, under the `chatq:` prefix.

The keys of one job share the hash tag `{<job id>}`, so that they live in one slot of a
Redis Cluster; the Lua scripts build the same names with `K(kind, id)` (chatq/lua/prelude.lua).
"""

from __future__ import annotations

import hashlib

PREFIX = "chatq:"

# Pub/sub channel; message "<job id> <status>" on every change of a job, on a leader's last
# one "<job id> <status> <record as JSON, less the request, with output_text>", and
# "+ <job id> <job id> ..." for the jobs a worker's flush gave more text.
NOTIFY_CHANNEL = PREFIX + "notify"


def _of_job(kind: str, job_id: str) -> str:
    return f"{PREFIX}{{{job_id}}}:{kind}"


def job(job_id: str) -> str:
    """Hash: the job record. No expiry while active; CHATQ_JOB_TTL s once it has ended."""
    return _of_job("job", job_id)


def text(job_id: str) -> str:
    """String: the job's output text, grown by APPEND; expires with the job."""
    return _of_job("text", job_id)


def events(job_id: str) -> str:
    """Stream: the job's events (status, delta, reset, end); expires with the job."""
    return _of_job("events", job_id)


def followers(job_id: str) -> str:
    """Set: ids of the jobs that share this (leader) job's upstream call; deleted when it ends."""
    return _of_job("followers", job_id)


def idempotency(owner: str, idem_key: str) -> str:
    """String: "<job id> <body sha256>" for an Idempotency-Key; expires after CHATQ_JOB_TTL s."""
    digest = hashlib.sha256(f"{owner}\0{idem_key}".encode()).hexdigest()
    return f"{PREFIX}idem:{digest}"


def outbox() -> str:
    """Stream: "id", "status" of each ended job whose record has `announce` 1 (webhooks,
    batches); read by the workers' relay through a consumer group; capped near 1,000,000."""
    return PREFIX + "outbox"


def leases() -> str:
    """Sorted set: job id -> Redis time by which its holder must have renewed it; no expiry."""
    return PREFIX + "leases"


def cooldown(endpoint_id: str) -> str:
    """String: set while an endpoint cools down; expires after CHATQ_UPSTREAM_COOLDOWN s."""
    return f"{PREFIX}cooldown:{endpoint_id}"


def upstream_failures(endpoint_id: str) -> str:
    """String (counter): recent consecutive failures of an endpoint; expires 60 s after the last."""
    return f"{PREFIX}upstream_failures:{endpoint_id}"


def stats(unix_second: int) -> str:
    """Hash: arrivals, done and busy_s counted in that second; expires after 300 s."""
    return f"{PREFIX}stats:{unix_second}"


def workers() -> str:
    """Hash: worker name -> "slots busy redis_time" of its last heartbeat; no expiry."""
    return PREFIX + "workers"


def inflight(cache_key: str) -> str:
    """String: id of the job now running for this cache key; deleted when it ends."""
    return f"{PREFIX}inflight:{cache_key}"


def cache(cache_key: str) -> str:
    """String: a completed result (chat.completion JSON); expires after its cache TTL."""
    return f"{PREFIX}cache:{cache_key}"


# Webhooks. Endpoints made through the API live in Redis; those of CHATQ_WEBHOOKS only in the
# settings, but their disabled state and delivery logs live here too. The Lua scripts of
# chatq/lua/webhook_*.lua build the same names.


def webhook(endpoint_id: str) -> str:
    """Hash: an endpoint made through the API (owner, url, name, event types, signing
    secrets as JSON, times); no expiry, deleted with the endpoint."""
    return f"{PREFIX}webhooks:endpoint:{endpoint_id}"


def webhooks_of(owner: str) -> str:
    """Set: the ids of the endpoints a key name made through the API; no expiry."""
    return f"{PREFIX}webhooks:owner:{owner}"


def webhooks_disabled() -> str:
    """Hash: endpoint id -> why it was disabled (JSON: reason, Redis time); no expiry."""
    return PREFIX + "webhooks:disabled"


def webhook_delivery(delivery_id: str) -> str:
    """Hash: one delivery (endpoint, event, payload, status, attempts as JSON, dispatch token);
    expires CHATQ_WEBHOOK_LOG_TTL s after its last change."""
    return f"{PREFIX}webhooks:delivery:{delivery_id}"


def webhook_deliveries(endpoint_id: str) -> str:
    """Sorted set: an endpoint's delivery ids -> Redis time made; the newest 1,000, none older
    than CHATQ_WEBHOOK_LOG_TTL s; deleted with the endpoint."""
    return f"{PREFIX}webhooks:log:{endpoint_id}"


def webhooks_due() -> str:
    """Sorted set: delivery id -> Redis time its next attempt is due (or, once handed to a
    worker, when that worker's hold runs out); no expiry."""
    return PREFIX + "webhooks:due"


# --- Files and batches (the OpenAI Files and Batch APIs). A file's and a batch's keys share
# the hash tag of its id, as a job's do; the Lua scripts name them with K(kind, id).


def file_meta(file_id: str) -> str:
    """Hash: an uploaded or generated file's metadata (its bytes live in the file storage);
    no expiry: the janitor deletes it with its bytes once `expires_at` has passed."""
    return _of_job("file", file_id)


def file_batches(file_id: str) -> str:
    """Set: ids of the unfinished batches that read this file (it cannot be deleted then)."""
    return _of_job("file_batches", file_id)


def files_of(owner: str) -> str:
    """Sorted set: the key name's file ids by Redis time of creation; no expiry."""
    return f"{PREFIX}files:{owner}"


def files_expiry() -> str:
    """Sorted set: file id -> Redis time at which it expires; no expiry."""
    return PREFIX + "files_expiry"


def batch(batch_id: str) -> str:
    """Hash: the batch record (status, counts, feeding cursor, usage); no expiry while the
    batch runs, CHATQ_FILES_TTL s once it has ended."""
    return _of_job("batch", batch_id)


def batches_of(owner: str) -> str:
    """Sorted set: the key name's batch ids by Redis time of creation; no expiry."""
    return f"{PREFIX}batches:{owner}"


def batches_active() -> str:
    """Set: ids of the batches not yet ended, which the workers' batch loop looks after."""
    return PREFIX + "batches_active"


def batch_lease(batch_id: str) -> str:
    """String: the worker that runs the batch's next step now; expires after CHATQ_LEASE s."""
    return _of_job("lease", batch_id)


def batch_invalid(batch_id: str) -> str:
    """String (bitmap): bit N set when line N of the input failed validation; deleted when
    the batch ends."""
    return _of_job("invalid", batch_id)


def batch_results(batch_id: str) -> str:
    """Hash: line number -> "o" (output) or "e" (error) and the line written to that file;
    deleted once the files are written."""
    return _of_job("results", batch_id)


def batch_order(batch_id: str) -> str:
    """List: line numbers in the order they were accounted (the files' order); deleted with
    the results."""
    return _of_job("order", batch_id)


def batch_line(batch_id: str, line: int) -> str:
    """String: the id of the job made for line `line` (it guards against making it twice);
    expires after CHATQ_JOB_TTL s."""
    return f"{PREFIX}{{{batch_id}}}:line:{line}"


def batch_janitor() -> str:
    """String: held by the worker sweeping expired files; expires after a minute."""
    return PREFIX + "files_janitor"
