"""The job store: every rule of a job's life, one Lua script each (chatq/lua/), called here
with named arguments; what each answers is typed in chatq/store_results.py.

Each call is one atomic step in Redis: it checks the job's state, writes, appends the event,
sets expiry and publishes the notification. Times come from Redis's clock, never a host's.
The steps a worker takes (claim, attempt, append, finish) may be repeated after a lost
answer without doing anything twice.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import redis

from chatq import jobs, keys
from chatq.lua_scripts import is_cluster, register
from chatq.rates import Rates
from chatq.replicas import NO_WAIT, ReplicasBehind, Replication, run_and_wait
from chatq.store_results import (
    Cancel,
    Claim,
    Created,
    CreateKind,
    LeaseState,
    Piece,
    SweepOutcome,
    Swept,
)

log = logging.getLogger(__name__)
# A notification "+ <id> <id> ...": these jobs have more text (one per flush, not per job).
PROGRESS = "+"
WORKER_LOST = {
    "type": "server_error",
    "code": "worker_lost",
    "message": "the job's worker was lost too many times; it was not retried again",
}


def _flat(fields: dict[str, str]) -> list[str]:
    return [item for pair in fields.items() for item in pair]


class Store:
    """Job records in one Redis or a Redis Cluster; see the module docstring."""

    def __init__(
        self,
        client: redis.Redis,
        job_ttl_s: int,
        max_followers: int = 100,
        replication: Replication = NO_WAIT,
        max_running: int = 0,
        max_running_overrides: tuple[tuple[str, int], ...] = (),
        rates: Rates | None = None,
        park_s: float = 0.0,
    ) -> None:
        self.redis = client
        # The counts of /v1/queue's rates (kept only, unless the process sends them).
        self.rates = rates or Rates()
        self.job_ttl_s = job_ttl_s
        self.max_followers = max_followers
        # Each tenant's running cap, as the claim script takes it (0: none).
        self.caps: list[str | int] = [max_running]
        self.caps += [x for pair in max_running_overrides for x in pair]
        # How long a job parked over its tenant's cap waits to be sent again (0: a lease).
        self.park_s = park_s
        self.cluster = is_cluster(client)
        if replication.replicas and self.cluster:
            raise ValueError("CHATQ_REDIS_MIN_REPLICAS needs one Redis (or Sentinel), no Cluster")
        self.replication = replication
        self._scripts = {
            name: register(client, name)
            for name in (
                "create",
                "claim",
                "attempt",
                "append",
                "finish",
                "cancel",
                "sweep",
                "heartbeat",
                "watch",
            )
        }

    def _run(self, name: str, anchor: str, *args: str | int | float) -> Any:
        # `anchor`: a key of the slot the script works in (a Cluster routes the call by it).
        return self._scripts[name](keys=[anchor], args=list(args))

    def _run_replicated(
        self, name: str, job_id: str, *args: str | int | float, strict: bool = True
    ) -> Any:
        """`_run` on the job, then WAIT for the replicas CHATQ_REDIS_MIN_REPLICAS asks for;
        fewer in time raise ReplicasBehind if `strict`, else a warning (the write stands on
        the primary either way)."""
        if not self.replication.replicas:
            return self._run(name, keys.job(job_id), job_id, *args)
        script = self._scripts[name]
        answer, acked = run_and_wait(
            self.redis, script, keys.job(job_id), [job_id, *args], self.replication
        )
        if acked < self.replication.replicas:
            behind = ReplicasBehind(acked, self.replication)
            if strict:
                raise behind
            log.warning("%s of %s: %s", name, job_id, behind)
        return answer

    def _by_shard(self, job_ids: list[str]) -> list[list[int]]:
        """Indexes of `job_ids` grouped so that each group is one script call: one group on a
        single Redis, one per shard on a Cluster."""
        if not self.cluster:
            return [list(range(len(job_ids)))] if job_ids else []
        groups: dict[str, list[int]] = {}
        for i, job_id in enumerate(job_ids):
            groups.setdefault(keys.shard(job_id), []).append(i)
        return list(groups.values())

    def get(self, job_id: str) -> dict[str, str] | None:
        """The job's record with its `output_text`, or None when there is none (or expired)."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hgetall(keys.job(job_id))
        pipe.get(keys.text(job_id))
        record, text = pipe.execute()
        return {**record, "output_text": text or ""} if record else None

    def remember_idempotency(self, *, key: str, value: str) -> str | None:
        """Keep `value` ("<job id> <digest>") under an Idempotency-Key for the job TTL, unless
        the key was used before: then its earlier value (and nothing is written)."""
        if self.redis.set(key, value, nx=True, ex=self.job_ttl_s):
            return None
        earlier = self.redis.get(key)
        return str(earlier) if earlier is not None else None

    def create(
        self,
        *,
        record: dict[str, str],
        lease_s: float,
        flight: str = "",
        cached: bool = False,
        may_exist: bool = False,
        queue: str = "",
        message: str = "",
    ) -> Created:
        """Write a new job: queued (leased for `lease_s` until a worker claims it), or
        completed at once when `cached`; with `flight` (a cache key, in whose shard the job
        is) it follows an identical job in flight. `may_exist`: the id is not a new one (a
        batch line's), so a job of that id is looked for first (answer EXISTS). `message`:
        its run message, pushed onto the broker's list `queue` with the job when it is
        queued to run (not a follower's, nor a cache hit's); the broker must be this Redis
        (chatq/celery_app.py run_message)."""
        fields = dict(record)
        text = fields.pop("output_text", "")
        job_id = record["id"]
        kind, value, created_at = self._run_replicated(
            "create",
            job_id,
            self.job_ttl_s,
            lease_s,
            flight,
            self.max_followers,
            "cached" if cached else "queue",
            text,
            "1" if may_exist else "0",
            queue,
            message,
            *_flat(fields),
        )
        created = Created(CreateKind(kind), value, created_at)
        if created.kind is CreateKind.CREATED and not cached:
            self.rates.arrived(record.get("owner", ""))
        return created

    def watch(self, *, job_id: str) -> bool:
        """A request follows the events of `job_id`: if it is queued, its claim announces its
        start (claim.lua); False when it is not queued."""
        return bool(self._run("watch", keys.job(job_id), job_id))

    def claim(self, *, job_id: str, run_id: str, lease_s: float) -> Claim:
        """queued -> in_progress for `run_id`, its first attempt counted; or 'capped': its
        tenant has its cap of jobs running, so it stays queued (parked, see claim.lua)."""
        park_s = self.park_s or lease_s
        answer = self._run("claim", keys.job(job_id), job_id, run_id, lease_s, park_s, *self.caps)
        if answer[0] != "claimed":
            return Claim(False, answer[0])
        _, request, owner, created_at, prompt_tokens, *trace = answer
        counted = int(prompt_tokens) if prompt_tokens else None
        return Claim(
            True, jobs.IN_PROGRESS, request, owner, float(created_at or 0), counted, *trace
        )

    def begin_attempt(self, *, job_id: str, run_id: str, attempt: int) -> bool:
        """Count the run's attempt number `attempt` (2, 3, ...), dropping partial text."""
        return bool(self._run("attempt", keys.job(job_id), job_id, run_id, attempt))

    def append(self, *, job_id: str, run_id: str, offset_bytes: int, text: str) -> bool:
        """Append text written after `offset_bytes` bytes of this attempt's text."""
        return self.append_many([Piece(job_id, run_id, offset_bytes, text)])[0]

    def append_many(self, pieces: list[Piece]) -> list[bool]:
        """Append several jobs' text and announce it (one script call on a single Redis, one
        per shard on a Cluster); for each piece, whether its run still held its job."""
        ours = [False] * len(pieces)
        for group in self._by_shard([p.job_id for p in pieces]):
            args = [
                a
                for i in group
                for a in (
                    pieces[i].job_id,
                    pieces[i].run_id,
                    pieces[i].offset_bytes,
                    pieces[i].text,
                )
            ]
            answer = self._run("append", keys.job(pieces[group[0]].job_id), *args)
            for i, ok in zip(group, answer, strict=True):
                ours[i] = bool(ok)
        return ours

    def finish(
        self,
        *,
        job_id: str,
        run_id: str,
        status: str,
        fields: dict[str, str],
        tail: str = "",
        finish_reason: str = "",
    ) -> bool:
        """in_progress -> `status` with `fields`, followers alike; False if not ours.

        An end the replicas did not acknowledge in time stands: it is logged, not retried (if
        the primary is lost before a replica has it, the job runs again after its lease)."""
        args: list[str | int] = [run_id, status, finish_reason, tail, self.job_ttl_s]
        return bool(self._run_replicated("finish", job_id, *args, *_flat(fields), strict=False))

    def cancel(self, *, job_id: str, lease_s: float) -> Cancel:
        """Cancel a job that has not ended; its followers are detached to run on their own."""
        status, *detached = self._run_replicated("cancel", job_id, lease_s, self.job_ttl_s)
        return Cancel(status, tuple(detached))

    def sweep(
        self, *, lease_s: float, resend_s: float, max_takeovers: int, limit: int = 100
    ) -> list[Swept]:
        """Act on the jobs whose lease ran out, up to `limit` per shard (see SweepOutcome)."""
        # A Cluster keeps each shard's leases in its own slot; one Redis keeps them in one key.
        groups = [[c] for c in keys.SHARDS] if self.cluster else [[keys.SHARDS[0]]]
        swept: list[Swept] = []
        for shards in groups:
            answer = self._run(
                "sweep",
                keys.leases(shards[0]),
                limit,
                lease_s,
                resend_s,
                max_takeovers,
                self.job_ttl_s,
                json.dumps(WORKER_LOST),
                *shards,
            )
            swept += [
                Swept(
                    answer[i],
                    SweepOutcome(answer[i + 1]),
                    answer[i + 2] or jobs.PRIORITIES[0],
                    answer[i + 3],
                )
                for i in range(0, len(answer), 4)
            ]
        return swept

    def heartbeat(
        self, *, runs: list[tuple[str, str]], lease_s: float, worker: str, slots: int
    ) -> list[LeaseState]:
        """Renew the leases of (job id, run id) pairs and record the worker as alive."""
        states: list[LeaseState] = [LeaseState.LOST] * len(runs)
        now = ""
        for group in self._by_shard([job_id for job_id, _ in runs]) or [[]]:
            anchor = keys.job(runs[group[0]][0]) if group else keys.leases(keys.SHARDS[0])
            now, *answer = self._run(
                "heartbeat", anchor, lease_s, *[x for i in group for x in runs[i]]
            )
            for i, state in zip(group, answer, strict=True):
                states[i] = LeaseState(state)
        self.redis.hset(keys.workers(), worker, f"{slots} {len(runs)} {now}")
        return states
