"""A key's own share of the load figures: GET /v1/queue for a key that is not an admin's
(CHATQ_ADMIN_KEYS). Its jobs waiting in each lane and the oldest one's age, the rates of its
jobs, its unfinished batches; and totals that name no tenant (depth per lane, workers)."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import redis

from chatq import keys
from chatq.broker import QUEUES, Broker, RedisBroker
from chatq.metrics import queue_objects as objects
from chatq.metrics.queue_stats import (
    BatchLines,
    Window,
    Workers,
    batch_lines,
    redis_time,
    window,
    workers,
)


@dataclass(frozen=True)
class Share:
    """What GET /v1/queue shows key name `owner`, read at one instant."""

    owner: str
    depths: dict[str, int | None]
    oldest_age_s: dict[str, float | None]
    rates: Window
    batches: BatchLines
    total_depths: dict[str, int]
    workers: Workers

    def body(self) -> dict[str, object]:
        """The body of GET /v1/queue for this key."""
        live = self.workers
        lanes = {q: objects.OwnLane(self.depths[q], _rounded(self.oldest_age_s[q])) for q in QUEUES}
        totals = objects.Totals(
            queues=objects.TotalLanes(
                **{q: objects.TotalLane(self.total_depths[q]) for q in QUEUES}
            ),
            in_progress=live.busy,
            workers=live,
        )
        share = objects.QueueShare(
            key=self.owner,
            queues=objects.OwnLanes(**lanes),
            arrival_rate_per_s=round(self.rates.arrival_rate_per_s, 3),
            mean_job_seconds=round(self.rates.mean_job_s, 3),
            batches=self.batches.view(),
            totals=totals,
        )
        return msgspec.to_builtins(share)  # type: ignore[no-any-return]


def _rounded(age_s: float | None) -> float | None:
    return None if age_s is None else round(age_s, 3)


def parked_of(state: redis.Redis, owner: str) -> dict[str, int]:
    """The jobs of `owner` parked over its running cap, per lane (chatq/jobs/claim.lua)."""
    pipe = state.pipeline(transaction=False)
    for lane in QUEUES:
        pipe.zrange(keys.parked(lane), 0, -1)
    parked = dict(zip(QUEUES, pipe.execute(), strict=True))
    for lane in QUEUES:
        for job_id in parked[lane]:
            pipe.hget(keys.job(job_id), "owner")
    owners = iter(pipe.execute())
    return {lane: sum(next(owners) == owner for _ in parked[lane]) for lane in QUEUES}


def own_depths(
    broker: Broker, owner: str, now: float
) -> tuple[dict[str, int | None], dict[str, float | None]]:
    """`owner`'s jobs waiting in each lane and the oldest one's age; None where they wait in
    a queue shared with other tenants (RabbitMQ, or CHATQ_FAIR_DISPATCH=0)."""
    unknown: dict[str, None] = dict.fromkeys(QUEUES)
    if not isinstance(broker, RedisBroker):
        return dict(unknown), dict(unknown)
    lists = {lane: broker.tenant_lists(lane, owner) for lane in QUEUES}
    pipe = broker.redis.pipeline(transaction=False)
    for lane in QUEUES:
        for key in lists[lane] or []:
            pipe.llen(key)
    lengths = iter(pipe.execute())
    parked = parked_of(broker.state, owner)
    depths: dict[str, int | None] = dict(unknown)
    ages: dict[str, float | None] = dict(unknown)
    for lane, found in lists.items():
        if found is not None:
            depths[lane] = sum(int(next(lengths)) for _ in found) + parked[lane]
            ages[lane] = broker.oldest_age_s(found, now)
    return depths, ages


def share(client: redis.Redis, broker: Broker, owner: str) -> Share:
    """Key name `owner`'s share of the figures, with the totals that name no tenant."""
    now = redis_time(client)
    depths, ages = own_depths(broker, owner, now)
    return Share(
        owner,
        depths,
        ages,
        window(client, now, owner),
        batch_lines(client, owner),
        broker.depths(),
        workers(client, now),
    )
