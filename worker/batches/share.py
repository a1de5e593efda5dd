"""Sharing CHATQ_BATCH_MAX_QUEUED among the unfinished batches, fairly across key names.

Each tick the batch loop reads every unfinished batch's record once (one pipelined round
trip, whatever their number) and gives the room under the bound (CHATQ_BATCH_MAX_QUEUED less
the lines of every batch fed and not yet done) out a line at a time, as fair dispatch takes
interactive jobs: to the key name with the fewest lines in flight for its weight
(CHATQ_TENANT_WEIGHTS) among those with lines waiting, none to a key name past its running
cap (CHATQ_TENANT_MAX_RUNNING); then, within a key name, to its batch with the fewest lines
in flight. Ties go to the key name of the older batch, then the older batch. Every worker
computes the same shares from the same records and feeds only the batches whose lease it
holds, so the shares add up to the room whoever feeds what.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import redis

from chatq import admission, batches, keys, metrics
from chatq.config import Settings

# What the loop reads of each unfinished batch every tick: its record less the long fields
# (`errors`, `metadata`), which only the API shows.
LOOP_FIELDS = (
    "id",
    "owner",
    "status",
    "endpoint",
    "input_file_id",
    "output_expires_s",
    "created_at",
    "expires_at",
    "validated",
    "ending",
    "total",
    "completed",
    "failed",
    "invalid",
    "skipped",
    "fed",
    "feed_line",
    "feed_offset",
    "feed_done",
    "scan_line",
    "feed_waits_until",
)


@dataclass(frozen=True)
class Active:
    """The unfinished batches at one instant: their records (LOOP_FIELDS) oldest first, the
    ids whose record is gone, and Redis's time."""

    records: list[dict[str, str]]
    gone: list[str]
    now_s: float


def read_active(client: redis.Redis, ids: Sequence[str]) -> Active:
    """The records of the batches `ids` (in one round trip) and Redis's time."""
    pipe = client.pipeline(transaction=False)
    for batch_id in ids:
        pipe.hmget(keys.batch(batch_id), LOOP_FIELDS)
    rows = pipe.execute()
    records, gone = [], []
    for batch_id, values in zip(ids, rows, strict=True):
        record = {k: str(v) for k, v in zip(LOOP_FIELDS, values, strict=True) if v is not None}
        if record.get("status"):
            records.append(record)
        else:
            gone.append(batch_id)
    records.sort(key=lambda r: (float(r.get("created_at") or 0), r["id"]))
    # TIME apart: a Cluster's pipeline takes no command without a key.
    return Active(records, gone, metrics.redis_time(client))


@dataclass(frozen=True)
class Claim:
    """Who asks for lines: how many it has in flight, how many it may take, its weight."""

    in_flight: int
    wants: int
    weight: int = 1


def water_fill(claims: Sequence[Claim], room: int) -> list[int]:
    """Give up to `room` lines one at a time, each to the claim with the fewest lines in
    flight per weight that wants one more (ties: the first listed); what each got."""
    given = [0] * len(claims)
    heap = [(c.in_flight / c.weight, i) for i, c in enumerate(claims) if c.wants > 0]
    heapq.heapify(heap)
    while room > 0 and heap:
        _, i = heapq.heappop(heap)
        given[i] += 1
        room -= 1
        claim = claims[i]
        if given[i] < claim.wants:
            heapq.heappush(heap, ((claim.in_flight + given[i]) / claim.weight, i))
    return given


@dataclass(frozen=True)
class _Batch:
    batch_id: str
    tenant: str
    in_flight: int
    waiting: int  # lines it may feed now: 0 when it feeds none (not running, all fed, ...)


def _batch(record: dict[str, str], now_s: float, by_owner: bool) -> _Batch:
    progress = batches.progress(record)
    feeds = (
        record.get("status") == batches.IN_PROGRESS
        and record.get("validated") == "1"
        and not record.get("ending")
        and record.get("feed_done") != "1"
        # A line of it waited for its key's rate limits a moment ago: no room held for it.
        and float(record.get("feed_waits_until") or 0) <= now_s
    )
    tenant = record.get("owner", "") if by_owner else ""
    return _Batch(record["id"], tenant, progress.fed, progress.waiting_in_file if feeds else 0)


def _tenant_claim(plan: admission.Plan, tenant: str, group: list[_Batch]) -> Claim:
    in_flight = sum(b.in_flight for b in group)
    wants = sum(b.waiting for b in group)
    cap = plan.cap(tenant) if tenant else 0
    if cap:  # lines past its running cap would only wait in its queue, holding the room
        wants = min(wants, max(0, cap - in_flight))
    return Claim(in_flight, wants, plan.weight(tenant))


def shares(records: Sequence[dict[str, str]], settings: Settings, now_s: float) -> dict[str, int]:
    """Lines each batch may feed now (batch id -> lines; a batch left out gets none). With
    CHATQ_FAIR_DISPATCH off, every batch is of one turn, whoever owns it."""
    found = [_batch(r, now_s, settings.fair_dispatch) for r in records]
    room = settings.batch_max_queued - sum(b.in_flight for b in found)
    groups: dict[str, list[_Batch]] = {}
    for b in found:
        groups.setdefault(b.tenant, []).append(b)
    plan = admission.plan(settings)
    tenants = list(groups)
    given = water_fill([_tenant_claim(plan, t, groups[t]) for t in tenants], room)
    allowed: dict[str, int] = {}
    for tenant, lines in zip(tenants, given, strict=True):
        group = groups[tenant]
        split = water_fill([Claim(b.in_flight, b.waiting) for b in group], lines)
        allowed |= {b.batch_id: n for b, n in zip(group, split, strict=True) if n}
    return allowed
