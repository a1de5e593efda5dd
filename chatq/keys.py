"""Every Redis key chatq uses, one function each, under the `chatq:` prefix.

On a Redis Cluster a Lua script may touch the keys of one slot only, so keys come in two
kinds. A job's keys, and the indexes its scripts keep (leases, outbox, notifications, the
single-flight and cache keys of a request), carry the hash tag of the job's shard, `{j<c>}`,
where `c` is the first character of the job id's token: 64 shards, spread over the cluster.
Everything else (workers, rates, webhooks, files, batches, idempotency keys) carries the one
tag `{g}`: its scripts may touch any of it. The Lua scripts build the same names (see
chatq/scripting/prelude.lua: `K(kind, id)`, `S(shard, name)` and `G`). On a single Redis the tags
change nothing.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Iterable

PREFIX = "chatq:"
GLOBAL = PREFIX + "{g}:"
# The alphabet of job id tokens (url-safe base64): one shard per character.
SHARDS = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"
JOB_KINDS = ("job", "text", "events", "followers")


def shard(job_id: str) -> str:
    """The shard of a job: the first character of its id's token (`job_<c>…`)."""
    return job_id[4:5] or SHARDS[0]


def shard_of_digest(hex_digest: str) -> str:
    """The shard that a request with this digest (a cache key) is placed in: by its first
    two hex digits (as chatq/scripting/prelude.lua's digest_shard)."""
    try:
        number = int(hex_digest[:2], 16)
    except ValueError:
        number = 0
    return SHARDS[number % len(SHARDS)]


def _sharded(shard_char: str, name: str) -> str:
    return f"{PREFIX}{{j{shard_char}}}:{name}"


def _of_job(kind: str, job_id: str) -> str:
    return _sharded(shard(job_id), f"{kind}:{job_id}")


def job(job_id: str) -> str:
    """Hash: the job record. No expiry while active; CHATQ_JOB_TTL s once it has ended."""
    return _of_job("job", job_id)


def jobs_pattern() -> str:
    """A SCAN pattern matching every job record, whatever its shard."""
    return f"{PREFIX}{{j?}}:job:*"


def text(job_id: str) -> str:
    """String: the job's output text, grown by APPEND; expires with the job."""
    return _of_job("text", job_id)


def events(job_id: str) -> str:
    """Stream: the job's events (status, delta, reset, end); expires with the job."""
    return _of_job("events", job_id)


def followers(job_id: str) -> str:
    """Set: ids of the jobs that share this (leader) job's upstream call (the leader's field
    `followed` is '1' once one joined); deleted when it ends."""
    return _of_job("followers", job_id)


def leases(shard_char: str) -> str:
    """Sorted set: job id -> Redis time by which its holder must renew it, for the shard's
    active jobs on a Cluster; on one Redis, every active job's is in the first shard's key
    (see leases_of); no expiry."""
    return _sharded(shard_char, "leases")


def leases_of(job_id: str, cluster: bool = False) -> str:
    """The leases key that holds `job_id`'s lease: its shard's on a Cluster, else the one
    key (a sweep then reads one key, not one per shard)."""
    return leases(shard(job_id) if cluster else SHARDS[0])


def outbox(shard_char: str, lane: str = "interactive") -> str:
    """Stream: "id", "status" of each ended job of the shard and lane (its `priority`) whose
    record has `announce` 1 (webhooks, batches, token limits); read by the relay of the
    workers that run the lane, through a consumer group; capped near 100,000 entries."""
    return _sharded(shard_char, "outbox" if lane == "interactive" else f"outbox:{lane}")


def outboxes(lanes: Iterable[str]) -> list[str]:
    """Every shard's outbox stream of each of `lanes`."""
    return [outbox(shard_char, lane) for lane in lanes for shard_char in SHARDS]


def notify(shard_char: str) -> str:
    """Pub/sub channel of the shard (sharded pub/sub on a Cluster): "<job id> <status>" on
    every change of a job, on a leader's last one "<job id> <status> <record as JSON, less
    the request, with output_text>", and "+ <job id> <job id> ..." for the jobs a worker's
    flush gave more text."""
    return _sharded(shard_char, "notify")


def notify_global() -> str:
    """Pub/sub channel of the `{g}` slot: "<batch id> <status>" when a batch changes."""
    return GLOBAL + "notify"


def inflight(cache_key: str) -> str:
    """String: id of the job now running for this cache key (its shard is the key's); deleted
    when it ends."""
    return _sharded(shard_of_digest(cache_key), f"inflight:{cache_key}")


def cache(cache_key: str) -> str:
    """String: a completed result (chat.completion JSON); expires after its cache TTL."""
    return _sharded(shard_of_digest(cache_key), f"cache:{cache_key}")


def stats(unix_minute: int) -> str:
    """Hash: arrivals, done and busy_s of every job in that minute, as the processes count
    them (chatq/jobs/rates.py); expires after 300 s."""
    return f"{GLOBAL}stats:{unix_minute}"


def idempotency(owner: str, idem_key: str) -> str:
    """String: "<job id> <body sha256>" for an Idempotency-Key; expires after CHATQ_JOB_TTL s."""
    digest = hashlib.sha256(f"{owner}\0{idem_key}".encode()).hexdigest()
    return f"{GLOBAL}idem:{digest}"


def cooldown(endpoint_id: str) -> str:
    """String: set while an endpoint cools down; expires after CHATQ_UPSTREAM_COOLDOWN s."""
    return f"{GLOBAL}cooldown:{endpoint_id}"


def upstream_failures(endpoint_id: str) -> str:
    """String (counter): recent consecutive failures of an endpoint; expires 60 s after the last."""
    return f"{GLOBAL}upstream_failures:{endpoint_id}"


def tenant_running(tenant: str) -> str:
    """Set: ids of the tenant's (key name's) jobs a worker has claimed and not ended, for a
    tenant with a running cap only (the job's field `counted` is then '1'); kept by the
    claim, finish, cancel and sweep scripts (single Redis only); no expiry."""
    return f"{GLOBAL}running:{tenant}"


def parked(lane: str) -> str:
    """Sorted set: job id -> Redis time, the lane's queued jobs a claim found over their
    tenant's running cap (the job's field `parked` is then '1'): their message was taken, the
    sweeper sends it again; no expiry."""
    return f"{GLOBAL}parked:{lane}"


def pacing(endpoint_id: str) -> str:
    """Hash: an endpoint's rate limits as buckets (limit, rate per second and level, of
    requests and of tokens; the Redis time of the levels; a 429's hold), shared by every
    worker (chatq/admission/pacing.lua); expires an hour after its last use."""
    return f"{GLOBAL}pacing:{endpoint_id}"


def workers() -> str:
    """Hash: worker name -> "slots busy redis_time" of its last heartbeat; no expiry."""
    return GLOBAL + "workers"


# Webhooks. Endpoints made through the API live in Redis; those of CHATQ_WEBHOOKS only in the
# settings, but their disabled state and delivery logs live here too. The Lua scripts of
# chatq/webhooks/webhook_*.lua build the same names.


def webhook(endpoint_id: str) -> str:
    """Hash: an endpoint made through the API (owner, url, name, event types, signing
    secrets as JSON, times); no expiry, deleted with the endpoint."""
    return f"{GLOBAL}webhooks:endpoint:{endpoint_id}"


def webhooks_of(owner: str) -> str:
    """Set: the ids of the endpoints a key name made through the API; no expiry."""
    return f"{GLOBAL}webhooks:owner:{owner}"


def webhooks_disabled() -> str:
    """Hash: endpoint id -> why it was disabled (JSON: reason, Redis time); no expiry."""
    return GLOBAL + "webhooks:disabled"


def webhook_delivery(delivery_id: str) -> str:
    """Hash: one delivery (endpoint, its key name, event, payload, status, attempts as JSON,
    dispatch token); expires CHATQ_WEBHOOK_LOG_TTL s after its last change, deleted when pushed
    out of its endpoint's log (unless an event's first delivery still pending,
    chatq/webhooks/webhook_add.lua) and with its endpoint."""
    return f"{GLOBAL}webhooks:delivery:{delivery_id}"


def webhook_delivery_index(endpoint_id: str) -> str:
    """Sorted set: every delivery of an endpoint that may still exist (in its log or not) ->
    Redis time its expiry was last set; expires with the last, deleted with the endpoint."""
    return f"{GLOBAL}webhooks:deliveries:{endpoint_id}"


def webhook_deliveries(endpoint_id: str) -> str:
    """Sorted set: an endpoint's delivery ids -> Redis time made; the newest 1,000, none older
    than CHATQ_WEBHOOK_LOG_TTL s; deleted with the endpoint."""
    return f"{GLOBAL}webhooks:log:{endpoint_id}"


def webhooks_due() -> str:
    """Sorted set: delivery id -> Redis time its next attempt is due (or, once taken by a
    worker, when that worker's hold runs out); no expiry."""
    return GLOBAL + "webhooks:due"


def webhooks_running() -> str:
    """Sorted set: the deliveries whose attempt is running -> Redis time their worker's hold
    runs out (a lost worker's stay until then); no expiry."""
    return GLOBAL + "webhooks:running"


def webhooks_busy(endpoint_id: str) -> str:
    """Sorted set: an endpoint's deliveries whose attempt is running, as webhooks_running;
    expires with the last hold."""
    return f"{GLOBAL}webhooks:busy:{endpoint_id}"


def webhooks_waiting(endpoint_id: str | None = None) -> str:
    """Sorted set: an endpoint's deliveries that came due while it had its cap of attempts
    running -> when they came due; without an id, the endpoints that have such deliveries ->
    Redis time to look at them again. No expiry (emptied as attempts end)."""
    if endpoint_id is None:
        return GLOBAL + "webhooks:waiting"
    return f"{GLOBAL}webhooks:waiting:{endpoint_id}"


def webhooks_key_busy(owner: str) -> str:
    """Sorted set: a key name's deliveries whose attempt is running, as webhooks_running;
    expires with the last hold."""
    return f"{GLOBAL}webhooks:key_busy:{owner}"


def webhooks_key_waiting(owner: str | None = None) -> str:
    """Sorted set: a key name's deliveries that came due while it had its cap of attempts
    running -> when they came due; without a name, the key names that have such deliveries ->
    Redis time to look at them again. No expiry (emptied as attempts end)."""
    if owner is None:
        return GLOBAL + "webhooks:keys_waiting"
    return f"{GLOBAL}webhooks:key_waiting:{owner}"


# --- Files and batches (the OpenAI Files and Batch APIs); the Lua scripts name them with
# K(kind, id), which puts every kind but a job's under `{g}`.


def file_meta(file_id: str) -> str:
    """Hash: an uploaded or generated file's metadata (its bytes live in the file storage);
    no expiry: the janitor deletes it with its bytes once `expires_at` has passed."""
    return f"{GLOBAL}file:{file_id}"


def file_batches(file_id: str) -> str:
    """Set: ids of the unfinished batches that read this file (it cannot be deleted then)."""
    return f"{GLOBAL}file_batches:{file_id}"


def files_of(owner: str) -> str:
    """Sorted set: the key name's file ids by Redis time of creation; no expiry."""
    return f"{GLOBAL}files:{owner}"


def files_expiry() -> str:
    """Sorted set: file id -> Redis time at which it expires; no expiry."""
    return GLOBAL + "files_expiry"


def files_usage(owner: str) -> str:
    """Hash: what the key name's files take, `bytes` and `count` (its uploads and its batches'
    output and error files, until deleted or swept), and what its uploads in progress hold,
    `held_bytes` and `held_count` (chatq/batches/file_quota.py); no expiry."""
    return f"{GLOBAL}files_usage:{owner}"


def files_holds(owner: str) -> str:
    """Hash: upload (file) id -> bytes the upload holds of the key name's quota; no expiry: a
    hold goes when its upload ends, or when it lapses (files_hold_until)."""
    return f"{GLOBAL}files_holds:{owner}"


def files_hold_until(owner: str) -> str:
    """Sorted set: upload id -> Redis time at which its hold lapses (its web died); no expiry."""
    return f"{GLOBAL}files_hold_until:{owner}"


def batch(batch_id: str) -> str:
    """Hash: the batch record (status, counts, feeding cursor, usage); no expiry while the
    batch runs, CHATQ_FILES_TTL s once it has ended."""
    return f"{GLOBAL}batch:{batch_id}"


def batches_of(owner: str) -> str:
    """Sorted set: the key name's batch ids by Redis time of creation; no expiry."""
    return f"{GLOBAL}batches:{owner}"


def batches_active() -> str:
    """Set: ids of the batches not yet ended, which the workers' batch loop looks after."""
    return GLOBAL + "batches_active"


def batches_active_of(owner: str) -> str:
    """Set: ids of the key name's batches not yet ended (CHATQ_BATCH_MAX_ACTIVE_PER_KEY caps
    it); no expiry."""
    return f"{GLOBAL}batches_active:{owner}"


def batch_lease(batch_id: str) -> str:
    """String: the worker that runs the batch's next step now; expires after CHATQ_LEASE s."""
    return f"{GLOBAL}lease:{batch_id}"


def batch_invalid(batch_id: str) -> str:
    """String (bitmap): bit N set when line N of the input failed validation; deleted when
    the batch ends."""
    return f"{GLOBAL}invalid:{batch_id}"


def batch_results(batch_id: str) -> str:
    """Hash: line number -> "o" (output) or "e" (error) and the line written to that file;
    deleted once the files are written."""
    return f"{GLOBAL}results:{batch_id}"


def batch_order(batch_id: str) -> str:
    """List: line numbers in the order they were accounted (the files' order); deleted with
    the results."""
    return f"{GLOBAL}order:{batch_id}"


def batch_janitor() -> str:
    """String: held by the worker sweeping expired files; expires after a minute."""
    return GLOBAL + "files_janitor"
