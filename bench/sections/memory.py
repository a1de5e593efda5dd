"""Issue 6 measure 6 (second half): Redis bytes per job, and that CHATQ_JOB_TTL cleans up."""

from __future__ import annotations

import time

import redis

from bench.lab import Lab
from bench.loadrun import run_load
from bench.sections.common import JSON, body, closed_spec, outcome_summary, target
from chatq import keys
from tests.procs import leases_count

TTL_S = 3
CLIENTS = 32
STACKS = [("ttl", {"CHATQ_JOB_TTL": str(TTL_S)})]


def _used(client: redis.Redis) -> dict[str, int]:
    """used_memory, and its dataset part (without client buffers and server overheads)."""
    info = client.info("memory")
    return {
        "used": int(info["used_memory"]),  # type: ignore[index]
        "dataset": int(info["used_memory_dataset"]),
    }  # type: ignore[index]


def _job_keys(client: redis.Redis) -> dict[str, int]:
    """How many chatq keys of each kind exist, and the leases set's size."""
    counts: dict[str, int] = {}
    for key in client.scan_iter(keys.PREFIX + "*", count=1000):
        # Every key is `chatq:{<tag>}:<kind>…` (chatq/keys.py).
        kind = str(key).removeprefix(keys.PREFIX).split(":")[1]
        counts[kind] = counts.get(kind, 0) + 1
    counts["leases_members"] = leases_count(client)
    return counts


def _wait_expired(client: redis.Redis, timeout_s: float) -> float:
    """Seconds until no job or events key is left (or the timeout)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        left = _job_keys(client)
        if not left.get("job") and not left.get("events"):
            break
        time.sleep(0.2)
    return time.monotonic() - start


def _sample_sizes(client: redis.Redis) -> JSON:
    """MEMORY USAGE (key included) of one job hash and its events stream, every field counted
    (SAMPLES 0: by default Redis sizes 5 of a hash's fields and scales them up, so that one
    run's figure differed from another's by which 5 it drew: 1,523 and 2,502 bytes for the
    same 1,904)."""
    job_key = next(iter(client.scan_iter(keys.jobs_pattern(), count=1000)), None)
    if job_key is None:
        return {}
    job_id = str(job_key).rsplit(":", 1)[1]
    sizes = {
        kind: int(client.memory_usage(key, samples=0) or 0)  # type: ignore[arg-type]
        for kind, key in (
            ("job_hash", keys.job(job_id)),
            ("text", keys.text(job_id)),
            ("events_stream", keys.events(job_id)),
        )
    }
    return {
        **{f"{kind}_bytes": size for kind, size in sizes.items()},
        "record_bytes_per_job": sum(sizes.values()),
        "events_in_stream": int(client.xlen(keys.events(job_id))),
    }


def _per_job(before: dict[str, int], after: dict[str, int], jobs: int) -> JSON:
    return {f"{k}_bytes_per_job": round((after[k] - before[k]) / max(jobs, 1)) for k in before}


def run(lab: Lab) -> JSON:
    """Warm up, then N jobs from 32 clients: bytes per job; then wait out the TTL."""
    name, recipe = STACKS[0]
    stack = lab.chatq(name, **recipe)
    client = stack.client()
    tgt = target(stack.url, body())
    run_load(closed_spec("chatq", tgt, CLIENTS, 30, max_jobs=CLIENTS))
    before = _used(client)  # after a warm-up (connections made), whose jobs expire with the rest
    summary = outcome_summary(
        run_load(closed_spec("chatq", tgt, CLIENTS, 120, max_jobs=lab.sizes.memory_jobs))
    )
    after, keys_after, sizes = _used(client), _job_keys(client), _sample_sizes(client)
    waited_s = _wait_expired(client, TTL_S + 30)
    left, final = _job_keys(client), _used(client)
    lab.drop(name)
    return {
        "jobs": summary["jobs"],
        "errors": summary["errors"],
        "ttl_s": TTL_S,
        **_per_job(before, after, summary["jobs"]),
        "keys_after_jobs": keys_after,
        **sizes,
        "expired_after_s": round(waited_s, 1),
        "keys_left_after_ttl": left,
        "dataset_bytes_left_after_ttl": final["dataset"] - before["dataset"],
        "cleaned": not left.get("job") and not left.get("events"),
    }
