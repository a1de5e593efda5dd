"""The job store: every rule of a job's life, one Lua script each (beside this module,
declared in chatq/jobs/scripts.py), called here with named arguments; what each answers is
typed in chatq/jobs/results.py.

Each call is one atomic step in Redis: it checks the job's state, writes, appends the event,
sets expiry and publishes the notification. Times come from Redis's clock, never a host's.
The steps a worker takes (claim, attempt, append, finish) may be repeated after a lost
answer without doing anything twice.
"""

from __future__ import annotations

import json
import logging
from typing import Any, TypeVar

import redis
from msgspec import structs

from chatq import keys
from chatq.errors import JobError
from chatq.jobs import scripts as store_scripts
from chatq.jobs.rates import Rates
from chatq.jobs.results import (
    Cancel,
    Claim,
    Created,
    CreateKind,
    LeaseState,
    Piece,
    Swept,
)
from chatq.scripting import BoundScript, flat_pairs, is_cluster
from chatq.topology import NO_WAIT, ReplicasBehind, Replication, run_and_wait

log = logging.getLogger(__name__)
A = TypeVar("A", bound=tuple[Any, ...])
R = TypeVar("R")
# A notification "+ <id> <id> ...": these jobs have more text (one per flush, not per job).
PROGRESS = "+"
WORKER_LOST = structs.asdict(
    JobError(
        "server_error",
        "worker_lost",
        "the job's worker was lost too many times; it was not retried again",
    )
)


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
        # Each tenant's running cap (0: none), and owner/cap pairs that override it.
        self.cap = max_running
        self.caps: tuple[str | int, ...] = flat_pairs(max_running_overrides)
        # How long a job parked over its tenant's cap waits to be sent again (0: a lease).
        self.park_s = park_s
        self.cluster = is_cluster(client)
        if replication.replicas and self.cluster:
            raise ValueError("CHATQ_REDIS_MIN_REPLICAS needs one Redis (or Sentinel), no Cluster")
        self.replication = replication
        self._create = store_scripts.CREATE.on(client)
        self._claim = store_scripts.CLAIM.on(client)
        self._attempt = store_scripts.ATTEMPT.on(client)
        self._append = store_scripts.APPEND.on(client)
        self._finish = store_scripts.FINISH.on(client)
        self._cancel = store_scripts.CANCEL.on(client)
        self._sweep = store_scripts.SWEEP.on(client)
        self._heartbeat = store_scripts.HEARTBEAT.on(client)
        self._watch = store_scripts.WATCH.on(client)

    def _run_replicated(self, script: BoundScript[Any, A, R], args: A, *, strict: bool = True) -> R:
        """Run `script`, then WAIT for the replicas CHATQ_REDIS_MIN_REPLICAS asks for; fewer
        in time raise ReplicasBehind if `strict`, else a warning (the write stands on the
        primary either way)."""
        if not self.replication.replicas:
            return script.spec.answer(script.send(None, args))
        wire_keys, argv = script.spec.wire(args)
        answer, acked = run_and_wait(
            self.redis, script.script, wire_keys[0], argv, self.replication
        )
        if acked < self.replication.replicas:
            behind = ReplicasBehind(acked, self.replication)
            if strict:
                raise behind
            log.warning("%s of %s: %s", script.spec.name, argv[0], behind)
        return script.spec.answer(answer)

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
        (chatq/broker/celery_app.py run_message)."""
        fields = dict(record)
        text = fields.pop("output_text", "")
        job_id = record["id"]
        args = store_scripts.CreateArgs(
            id=job_id,
            ttl_s=self.job_ttl_s,
            lease_s=lease_s,
            flight=flight,
            max_followers=self.max_followers,
            mode="cached" if cached else "queue",
            text=text,
            may_exist=may_exist,
            queue=queue,
            message=message,
            record=flat_pairs(fields.items()),
        )
        created = self._run_replicated(self._create, args)
        if created.kind is CreateKind.CREATED and not cached:
            self.rates.arrived(record.get("owner", ""))
        return created

    def watch(self, *, job_id: str) -> bool:
        """A request follows the events of `job_id`: if it is queued, its claim announces its
        start (claim.lua); False when it is not queued."""
        return self._watch(id=job_id)

    def claim(self, *, job_id: str, run_id: str, lease_s: float) -> Claim:
        """queued -> in_progress for `run_id`, its first attempt counted; or 'capped': its
        tenant has its cap of jobs running, so it stays queued (parked, see claim.lua)."""
        park_s = self.park_s or lease_s
        return self._claim(
            id=job_id, run=run_id, lease_s=lease_s, park_s=park_s, cap=self.cap, caps=self.caps
        )

    def begin_attempt(self, *, job_id: str, run_id: str, attempt: int) -> bool:
        """Count the run's attempt number `attempt` (2, 3, ...), dropping partial text."""
        return self._attempt(id=job_id, run=run_id, n=attempt)

    def append(self, *, job_id: str, run_id: str, offset_bytes: int, text: str) -> bool:
        """Append text written after `offset_bytes` bytes of this attempt's text."""
        return self.append_many([Piece(job_id, run_id, offset_bytes, text)])[0]

    def append_many(self, pieces: list[Piece]) -> list[bool]:
        """Append several jobs' text and announce it (one script call on a single Redis, one
        per shard on a Cluster); for each piece, whether its run still held its job."""
        ours = [False] * len(pieces)
        for group in self._by_shard([p.job_id for p in pieces]):
            answer = self._append(pieces=store_scripts.encode_pieces(pieces[i] for i in group))
            for i, ok in zip(group, answer, strict=True):
                ours[i] = ok
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
        args = store_scripts.FinishArgs(
            id=job_id,
            run=run_id,
            status=status,
            reason=finish_reason,
            tail=tail,
            ttl_s=self.job_ttl_s,
            fields=flat_pairs(fields.items()),
        )
        return self._run_replicated(self._finish, args, strict=False)

    def cancel(self, *, job_id: str, lease_s: float) -> Cancel:
        """Cancel a job that has not ended; its followers are detached to run on their own."""
        args = store_scripts.CancelArgs(id=job_id, lease_s=lease_s, ttl_s=self.job_ttl_s)
        return self._run_replicated(self._cancel, args)

    def sweep(
        self, *, lease_s: float, resend_s: float, max_takeovers: int, limit: int = 100
    ) -> list[Swept]:
        """Act on the jobs whose lease ran out, up to `limit` per shard (see SweepOutcome)."""
        # A Cluster keeps each shard's leases in its own slot; one Redis keeps them in one key.
        groups = [[c] for c in keys.SHARDS] if self.cluster else [[keys.SHARDS[0]]]
        swept: list[Swept] = []
        for shards in groups:
            swept += self._sweep(
                limit=limit,
                lease_s=lease_s,
                resend_s=resend_s,
                max_takeovers=max_takeovers,
                ttl_s=self.job_ttl_s,
                error_json=json.dumps(WORKER_LOST),
                shards=tuple(shards),
            )
        return swept

    def heartbeat(
        self, *, runs: list[tuple[str, str]], lease_s: float, worker: str, slots: int
    ) -> list[LeaseState]:
        """Renew the leases of (job id, run id) pairs and record the worker as alive."""
        states: list[LeaseState] = [LeaseState.LOST] * len(runs)
        now = ""
        for group in self._by_shard([job_id for job_id, _ in runs]) or [[]]:
            now, answer = self._heartbeat(
                lease_s=lease_s, runs=flat_pairs([runs[i] for i in group])
            )
            for i, state in zip(group, answer, strict=True):
                states[i] = state
        self.redis.hset(keys.workers(), worker, f"{slots} {len(runs)} {now}")
        return states
