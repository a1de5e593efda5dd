"""Reads and atomic transitions of job records in Redis."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import redis

from chatq import keys, lua

JSONDict = dict[str, Any]
Arg = str | int | float

WORKER_LOST = {
    "type": "server_error",
    "code": "worker_lost",
    "message": "the job's worker was lost too many times; it was not retried again",
}


@dataclass(frozen=True)
class Event:
    """One entry of a job's event stream; `id` is the stream id, the cursor."""

    id: str
    type: str
    value: str
    extra: str

    def public(self) -> JSONDict:
        """The event as API.md shows it."""
        if self.type == "delta":
            return {"type": "delta", "delta": self.value}
        if self.type == "status":
            return {"type": "status", "status": self.value}
        if self.type == "end":
            return {"type": "end", "status": self.value, "finish_reason": self.extra or None}
        return {"type": self.type}


class Store:
    """Job records in one Redis; every state change is one Lua script."""

    def __init__(self, client: redis.Redis, job_ttl_s: int) -> None:
        self.redis = client
        self.job_ttl_s = job_ttl_s
        self._create = client.register_script(lua.PRELUDE + lua.CREATE)
        self._sent = client.register_script(lua.SENT)
        self._claim = client.register_script(lua.PRELUDE + lua.CLAIM)
        self._attempt = client.register_script(lua.PRELUDE + lua.ATTEMPT)
        self._append = client.register_script(lua.PRELUDE + lua.APPEND)
        self._finish = client.register_script(lua.PRELUDE + lua.FINISH)
        self._cancel = client.register_script(lua.PRELUDE + lua.CANCEL)
        self._requeue = client.register_script(lua.PRELUDE + lua.REQUEUE)
        self._heartbeat = client.register_script(lua.HEARTBEAT)

    def _job_keys(self, job_id: str) -> list[str]:
        return [keys.job(job_id), keys.events(job_id), keys.leases()]

    def get(self, job_id: str) -> dict[str, str] | None:
        """The job's hash, or None when it does not exist (or has expired)."""
        record: dict[str, str] = self.redis.hgetall(keys.job(job_id))  # type: ignore[assignment]
        return record or None

    def create(
        self, record: dict[str, str], enqueue_grace_s: float, idem: tuple[str, str] | None
    ) -> str:
        """Write a new job; with `idem` (key, value) answer the earlier value if any, else ''."""
        job_id = record["id"]
        idem_key, idem_value = idem if idem else ("", "")
        fields = [item for pair in record.items() for item in pair]
        deadline = time.time() + enqueue_grace_s
        args: list[Arg] = [job_id, self.job_ttl_s, deadline, idem_value, *fields]
        return str(self._create(keys=[*self._job_keys(job_id), idem_key], args=args))

    def mark_sent(self, job_id: str, resend_after_s: float) -> None:
        """Note that a queued job's message is sent: resend only if still queued much later."""
        deadline = time.time() + resend_after_s
        self._sent(keys=self._job_keys(job_id), args=[job_id, deadline])

    def claim(self, job_id: str, run_id: str, lease_s: float) -> str:
        """queued -> in_progress for `run_id`; answers 'claimed' or the state that prevented it."""
        now = time.time()
        args: list[Arg] = [job_id, run_id, repr(now), now + lease_s]
        return str(self._claim(keys=self._job_keys(job_id), args=args))

    def begin_attempt(self, job_id: str, run_id: str) -> bool:
        """Count an upstream attempt (emitting `reset` if text was sent); False if not ours."""
        keys_ = self._job_keys(job_id)[:2]
        return bool(self._attempt(keys=keys_, args=[job_id, run_id]))

    def append(self, job_id: str, run_id: str, text: str) -> bool:
        """Append generated text as one delta event; False if the job is no longer ours."""
        keys_ = self._job_keys(job_id)[:2]
        return bool(self._append(keys=keys_, args=[job_id, run_id, text]))

    def finish(
        self,
        job_id: str,
        run_id: str,
        status: str,
        fields: dict[str, str],
        tail: str = "",
        finish_reason: str = "",
    ) -> bool:
        """in_progress -> `status` with `fields`; False (and nothing written) if not ours."""
        flat = [item for pair in fields.items() for item in pair]
        args: list[Arg] = [
            job_id, run_id, status, repr(time.time()), self.job_ttl_s, finish_reason, tail
        ]
        return bool(self._finish(keys=self._job_keys(job_id), args=[*args, *flat]))

    def cancel(self, job_id: str) -> str:
        """Cancel a job unless terminal; answers 'cancelled', its terminal state or 'missing'."""
        args: list[Arg] = [job_id, repr(time.time()), self.job_ttl_s]
        return str(self._cancel(keys=self._job_keys(job_id), args=args))

    def requeue_if_expired(self, job_id: str, lease_s: float, max_takeovers: int) -> str:
        """Act on a lease that ran out: 'requeued', 'resend', 'failed', 'fresh' or 'gone'."""
        now = time.time()
        error = json.dumps(WORKER_LOST)
        args: list[Arg] = [job_id, repr(now), now + lease_s, max_takeovers, self.job_ttl_s, error]
        return str(self._requeue(keys=self._job_keys(job_id), args=args))

    def expired_leases(self, limit: int = 500) -> list[str]:
        """Ids of jobs whose lease deadline has passed."""
        found = self.redis.zrangebyscore(keys.leases(), "-inf", time.time(), start=0, num=limit)
        return [str(job_id) for job_id in found]

    def heartbeat(self, runs: list[tuple[str, str]], lease_s: float) -> list[str]:
        """Renew the leases of (job id, run id) pairs; answers each job's state for us."""
        if not runs:
            return []
        job_keys = [keys.job(job_id) for job_id, _ in runs]
        args: list[Arg] = [time.time() + lease_s]
        for job_id, run_id in runs:
            args += [job_id, run_id]
        found = self._heartbeat(keys=[keys.leases(), *job_keys], args=args)
        return [str(s) for s in found]

    def events_after(self, job_id: str, cursor: str, count: int) -> list[Event]:
        """Up to `count` events after the stream id `cursor` ('0' for the start)."""
        rows = self.redis.xrange(keys.events(job_id), min=f"({cursor}", count=count)
        return [parse_event(row) for row in rows]  # type: ignore[union-attr]


def parse_event(row: Any) -> Event:
    """An Event from one XRANGE row."""
    stream_id, data = row
    return Event(str(stream_id), data.get("t", ""), data.get("v", ""), data.get("f", ""))
