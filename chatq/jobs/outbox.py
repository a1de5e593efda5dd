"""The outbox: jobs that ended and must be announced for sure (webhooks, batch accounting).

A job whose record has `announce` 1 is added to its shard's outbox stream of its lane by the
same atomic step that ends it; a reader reads the streams of the lanes its worker runs.
Readers share them through one consumer group: each entry goes to one reader, stays pending
until acknowledged, and is taken over by another reader once its reader has been silent for
`claim_idle_s` (a worker that died mid-way). Each reader looks for such entries every quarter
of that, not at every read: one look is a command per stream (64 a lane). Delivery is at
least once: a handler must be idempotent. If Redis loses the streams or the group (a restart
without persistence, a FLUSHDB), a reader makes them again at its next read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis

from chatq import keys
from chatq.jobs import record as jobs
from chatq.scripting import is_cluster

GROUP = "chatq-relay"


@dataclass(frozen=True)
class Ended:
    """One outbox entry of `stream`: the job `job_id` ended as `status`."""

    entry_id: str
    job_id: str
    status: str
    stream: str


def _entries(stream: str, rows: Any) -> list[Ended]:
    return [
        Ended(str(entry_id), fields.get("id", ""), fields.get("status", ""), stream)
        for entry_id, fields in rows or []
        if fields
    ]


def _streams(rows: Any) -> list[Ended]:
    """The entries of an XREADGROUP answer over several streams (RESP2 or RESP3)."""
    pairs = rows.items() if isinstance(rows, dict) else rows or []
    return [entry for stream, stream_rows in pairs for entry in _entries(stream, stream_rows)]


def _no_group(exc: redis.ResponseError) -> bool:
    return str(exc).startswith("NOGROUP")


class Outbox:
    """One reader of the outbox of `lanes` (a stream per shard and lane), named `consumer`
    (unique per process). On a Cluster each stream is read on its own, without blocking."""

    def __init__(
        self,
        client: redis.Redis,
        consumer: str,
        claim_idle_s: float = 30.0,
        lanes: tuple[str, ...] = jobs.PRIORITIES,
    ) -> None:
        self.redis = client
        self.consumer = consumer
        self.streams = keys.outboxes(lanes)
        self.claim_idle_ms = int(claim_idle_s * 1000)
        self.look_every_s = claim_idle_s / 4
        self._looked_at = float("-inf")  # time.monotonic() of the last look for stale entries
        self.cluster = is_cluster(client)
        self._grouped = False

    def _group(self) -> None:
        if self._grouped:
            return
        for stream in self.streams:
            try:
                self.redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        self._grouped = True

    def read(self, count: int = 100, block_s: float = 1.0) -> list[Ended]:
        """Entries for this reader: first those a silent reader left (when it is time to
        look), then new ones."""
        try:
            return self._read(count, block_s)
        except redis.ResponseError as exc:
            if not _no_group(exc):
                raise
            self._grouped = False
            return []

    def _read(self, count: int, block_s: float) -> list[Ended]:
        self._group()
        if time.monotonic() - self._looked_at >= self.look_every_s:
            stale = self._stale(count)
            # A full page may leave more: look again at the next read.
            self._looked_at = float("-inf") if stale else time.monotonic()
            if stale:
                return stale
        if not self.cluster:  # one blocking read over every stream
            return _streams(
                self.redis.xreadgroup(
                    GROUP,
                    self.consumer,
                    dict.fromkeys(self.streams, ">"),
                    count=count,
                    block=int(block_s * 1000),
                )
            )
        found = [
            entry
            for stream in self.streams
            for entry in _streams(
                self.redis.xreadgroup(GROUP, self.consumer, {stream: ">"}, count=count)
            )
        ]
        if not found:
            time.sleep(block_s)
        return found

    def _stale(self, count: int) -> list[Ended]:
        """Entries pending with a reader silent for `claim_idle_s`, now this reader's."""
        pipe = self.redis.pipeline(transaction=False)
        for stream in self.streams:
            pipe.xautoclaim(stream, GROUP, self.consumer, self.claim_idle_ms, count=count)
        claims = pipe.execute()
        return [
            entry
            for stream, claimed in zip(self.streams, claims, strict=True)
            for entry in _entries(stream, claimed[1])
        ]

    def ack(self, entries: list[Ended]) -> None:
        """These are handled: no reader gets them again."""
        for entry in entries:
            try:
                self.redis.xack(entry.stream, GROUP, entry.entry_id)
            except redis.ResponseError as exc:
                if not _no_group(exc):
                    raise
                self._grouped = False  # its stream is gone and made again since it was read
            self.redis.xdel(entry.stream, entry.entry_id)
