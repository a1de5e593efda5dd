"""The outbox: jobs that ended and must be announced for sure (webhooks, batch accounting).

A job whose record has `announce` 1 is added to the `chatq:outbox` stream by the same atomic
step that ends it. Readers share it through one consumer group: each entry goes to one
reader, stays pending until acknowledged, and is taken over by another reader once its
reader has been silent for `claim_idle_s` (a worker that died mid-way). Delivery is at least
once: a handler must be idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from chatq import keys

GROUP = "chatq-relay"


@dataclass(frozen=True)
class Ended:
    """One outbox entry: the job `job_id` ended as `status`."""

    entry_id: str
    job_id: str
    status: str


def _entries(rows: Any) -> list[Ended]:
    return [Ended(str(entry_id), fields.get("id", ""), fields.get("status", ""))
            for entry_id, fields in rows or [] if fields]


class Outbox:
    """One reader of the outbox, named `consumer` (unique per process)."""

    def __init__(self, client: redis.Redis, consumer: str, claim_idle_s: float = 30.0) -> None:
        self.redis = client
        self.consumer = consumer
        self.claim_idle_ms = int(claim_idle_s * 1000)
        self._grouped = False

    def _group(self) -> None:
        if self._grouped:
            return
        try:
            self.redis.xgroup_create(keys.outbox(), GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._grouped = True

    def read(self, count: int = 100, block_s: float = 1.0) -> list[Ended]:
        """Entries for this reader: first those a silent reader left, then new ones."""
        self._group()
        claimed = self.redis.xautoclaim(keys.outbox(), GROUP, self.consumer,
                                        self.claim_idle_ms, count=count)
        stale = _entries(claimed[1])
        if stale:
            return stale
        rows: Any = self.redis.xreadgroup(GROUP, self.consumer, {keys.outbox(): ">"},
                                          count=count, block=int(block_s * 1000))
        if isinstance(rows, dict):  # RESP3 answers {stream: entries}
            return _entries(rows.get(keys.outbox()))
        return _entries(rows[0][1]) if rows else []

    def ack(self, entries: list[Ended]) -> None:
        """These are handled: no reader gets them again."""
        if entries:
            self.redis.xack(keys.outbox(), GROUP, *[e.entry_id for e in entries])
            self.redis.xdel(keys.outbox(), *[e.entry_id for e in entries])
