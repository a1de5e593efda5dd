"""Load figures for people and autoscalers: queue depth, age, workers, rates."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import cast

import msgspec
import redis

from chatq import admission, batches, jobs, keys, runtime
from chatq.broker import QUEUES, Broker, RedisBroker
from chatq.metrics import queue_objects as objects
from chatq.metrics.queue_objects import WebhookWork as WebhookWork
from chatq.metrics.queue_objects import Workers as Workers

SAFETY_FACTOR = 1.2


def recommended_concurrency(arrival_rate_per_s: float, mean_job_s: float) -> int:
    """Little's law with a safety factor: slots needed = rate x time in system x 1.2."""
    return math.ceil(arrival_rate_per_s * mean_job_s * SAFETY_FACTOR)


@dataclass(frozen=True)
class Window:
    """Rates over the last minute or two."""

    arrival_rate_per_s: float
    done_rate_per_s: float
    mean_job_s: float


def window(client: redis.Redis, now: float | None = None, owner: str = "") -> Window:
    """Arrivals, runs ended and their mean time over the last full minute and the current
    one (counted per minute, chatq/jobs/rates.py): of every job, or of key name `owner`'s."""
    now_s = now or time.time()
    minute = int(now_s // 60)
    fields = [jobs.owner_field(name, owner) if owner else name for name in jobs.COUNTS]
    pipe = client.pipeline(transaction=False)
    for m in (minute - 1, minute):
        pipe.hmget(keys.stats(m), fields)
    totals = dict.fromkeys(jobs.COUNTS, 0.0)
    for bucket in pipe.execute():
        for name, value in zip(jobs.COUNTS, bucket, strict=True):
            totals[name] += float(value or 0)
    span_s = 60 + (now_s - minute * 60)
    done = totals["done"]
    return Window(
        arrival_rate_per_s=totals["arrivals"] / span_s,
        done_rate_per_s=done / span_s,
        mean_job_s=totals["busy_s"] / done if done else 0.0,
    )


def depths(client: redis.Redis, plan: admission.Plan | None = None) -> dict[str, int]:
    """Messages waiting in the Redis broker `client`, per lane (not those a worker reserved),
    in every tenant queue of `plan`."""
    return RedisBroker(client, plan=plan).depths()


def workers(client: redis.Redis, now: float) -> Workers:
    """Sum the recent heartbeats; forget workers silent for WORKER_STALE_S."""
    count = slots = busy = 0
    stale = []
    for name, value in client.hgetall(keys.workers()).items():
        beat = runtime.parse(value)
        if not beat.live(now):
            stale.append(name)
            continue
        count, slots, busy = count + 1, slots + beat.slots, busy + beat.busy
    if stale:
        client.hdel(keys.workers(), *stale)
    return Workers(count, slots, busy)


@dataclass(frozen=True)
class BatchLines:
    """The lines of the unfinished batches, by where they are (see batches.Progress)."""

    active: int = 0
    total: int = 0
    waiting_in_file: int = 0
    fed: int = 0
    done: int = 0

    def view(self) -> objects.Batches:
        """The `batches` part of GET /v1/queue."""
        lines = objects.BatchLines(self.total, self.waiting_in_file, self.fed, self.done)
        return objects.Batches(self.active, lines)


def batch_lines(client: redis.Redis, owner: str | None = None) -> BatchLines:
    """Sum the progress of every unfinished batch (of key name `owner`, if given: read from
    its own set, not every key's)."""
    active = keys.batches_active() if owner is None else keys.batches_active_of(owner)
    ids = sorted(cast(set[str], client.smembers(active)))
    pipe = client.pipeline(transaction=False)
    for batch_id in ids:
        pipe.hgetall(keys.batch(batch_id))
    found = [batches.progress(r) for r in pipe.execute() if r]
    return BatchLines(
        len(found),
        sum(p.total for p in found),
        sum(p.waiting_in_file for p in found),
        sum(p.fed for p in found),
        sum(p.done for p in found),
    )


def webhook_work(client: redis.Redis, now: float) -> WebhookWork:
    """Count the deliveries running and due at Redis time `now`."""
    pipe = client.pipeline(transaction=False)
    pipe.zcount(keys.webhooks_running(), f"({now}", "+inf")
    pipe.zcount(keys.webhooks_due(), "-inf", now)
    pipe.zcount(keys.webhooks_due(), f"({now}", "+inf")
    pipe.zrange(keys.webhooks_waiting(), 0, -1)
    pipe.zrange(keys.webhooks_key_waiting(), 0, -1)
    running, due, later, capped, capped_keys = pipe.execute()
    pipe = client.pipeline(transaction=False)
    for endpoint_id in capped:
        pipe.zcard(keys.webhooks_waiting(endpoint_id))
    for owner in capped_keys:
        pipe.zcard(keys.webhooks_key_waiting(owner))
    waiting = sum(int(n) for n in pipe.execute())
    # A running attempt's delivery is in the due set too, at the end of its hold.
    return WebhookWork(int(running), int(due) + waiting, max(0, int(later) - int(running)))


@dataclass(frozen=True)
class Snapshot:
    """Everything GET /v1/queue and the queue metrics show, read at one instant."""

    depths: dict[str, int]
    oldest_age_s: dict[str, float | None]
    workers: Workers
    rates: Window
    batches: BatchLines = field(default_factory=BatchLines)
    webhooks: WebhookWork = field(default_factory=lambda: WebhookWork(0, 0, 0))

    @property
    def recommended_concurrency(self) -> int:
        """Worker slots the current arrival rate needs."""
        return recommended_concurrency(self.rates.arrival_rate_per_s, self.rates.mean_job_s)

    def body(self) -> dict[str, object]:
        """The body of GET /v1/queue."""
        live = self.workers
        lanes = {q: objects.Lane(self.depths[q], _rounded(self.oldest_age_s[q])) for q in QUEUES}
        queue = objects.Queue(
            queues=objects.Lanes(**lanes),
            in_progress=live.busy,
            workers=live,
            arrival_rate_per_s=round(self.rates.arrival_rate_per_s, 3),
            mean_job_seconds=round(self.rates.mean_job_s, 3),
            recommended_concurrency=self.recommended_concurrency,
            batches=self.batches.view(),
            webhooks=self.webhooks,
        )
        return msgspec.to_builtins(queue)  # type: ignore[no-any-return]


def redis_time(client: redis.Redis) -> float:
    """Redis's clock, which the store's timestamps use (hosts' clocks may disagree)."""
    seconds, micros = client.time()
    return seconds + micros / 1e6


def _rounded(age_s: float | None) -> float | None:
    return None if age_s is None else round(age_s, 3)


def snapshot(client: redis.Redis, broker: Broker | None = None) -> Snapshot:
    """Depth and oldest age per queue (from `broker`, default: the Redis broker `client`),
    live workers, and the window's rates."""
    broker = broker or RedisBroker(client)
    now = redis_time(client)
    return Snapshot(
        broker.depths(),
        broker.oldest_ages_s(now),
        workers(client, now),
        window(client, now),
        batch_lines(client),
        webhook_work(client, now),
    )
