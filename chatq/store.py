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


@dataclass(frozen=True)
class Created:
    """How a create went: 'created', 'idem' (value: the earlier "id digest"), 'follower'
    (value: the leader's id) or 'cached' (value: the result that is now in the cache)."""

    kind: str
    value: str = ""


class Store:
    """Job records in one Redis; every state change is one Lua script."""

    def __init__(self, client: redis.Redis, job_ttl_s: int) -> None:
        self.redis = client
        self.job_ttl_s = job_ttl_s
        script = client.register_script
        self._create = script(lua.PRELUDE + lua.CREATE)
        self._sent = script(lua.PRELUDE + lua.SENT)
        self._claim = script(lua.PRELUDE + lua.CLAIM)
        self._attempt = script(lua.PRELUDE + lua.ATTEMPT)
        self._append = script(lua.PRELUDE + lua.APPEND)
        self._finish = script(lua.PRELUDE + lua.FINISH)
        self._cancel = script(lua.PRELUDE + lua.CANCEL)
        self._requeue = script(lua.PRELUDE + lua.REQUEUE)
        self._heartbeat = script(lua.PRELUDE + lua.HEARTBEAT)

    def get(self, job_id: str) -> dict[str, str] | None:
        """The job's hash, or None when it does not exist (or has expired)."""
        record: dict[str, str] = self.redis.hgetall(keys.job(job_id))  # type: ignore[assignment]
        return record or None

    def create(
        self,
        record: dict[str, str],
        lease_s: float,
        idem: tuple[str, str] | None = None,
        flight: str = "",
        done: bool = False,
    ) -> Created:
        """Write a new job: queued, or already `done` (a cache hit).

        With `idem` (key, value) an earlier job under that key wins; with `flight` (a
        cache key) the job follows an identical one still running instead of running.
        """
        idem_key, idem_value = idem if idem else ("", "")
        fields = [item for pair in record.items() for item in pair]
        flight_ttl_s = self.job_ttl_s
        now = time.time()
        args: list[Arg] = [
            record["id"], self.job_ttl_s, now + lease_s, idem_key, idem_value,
            flight, flight_ttl_s, "done" if done else "new", repr(now), *fields,
        ]
        answer = [str(x) for x in self._create(keys=[], args=args)]
        return Created(*answer[:2])

    def mark_sent(self, job_id: str, resend_after_s: float) -> None:
        """Note that a queued job's message is sent: resend only if still queued much later."""
        self._sent(keys=[], args=[job_id, time.time() + resend_after_s])

    def claim(self, job_id: str, run_id: str, lease_s: float) -> str:
        """queued -> in_progress for `run_id`; answers 'claimed' or the state that prevented it."""
        now = time.time()
        return str(self._claim(keys=[], args=[job_id, run_id, repr(now), now + lease_s]))

    def begin_attempt(self, job_id: str, run_id: str) -> bool:
        """Count an upstream attempt (emitting `reset` if text was sent); False if not ours."""
        return bool(self._attempt(keys=[], args=[job_id, run_id]))

    def append(self, job_id: str, run_id: str, text: str) -> bool:
        """Append generated text as one delta event; False if the job is no longer ours."""
        return bool(self._append(keys=[], args=[job_id, run_id, text]))

    def finish(
        self,
        job_id: str,
        run_id: str,
        status: str,
        fields: dict[str, str],
        tail: str = "",
        finish_reason: str = "",
    ) -> bool:
        """in_progress -> `status` with `fields` (followers too); False if not ours."""
        flat = [item for pair in fields.items() for item in pair]
        args: list[Arg] = [
            job_id, run_id, status, repr(time.time()), self.job_ttl_s, finish_reason, tail, *flat
        ]
        return bool(self._finish(keys=[], args=args))

    def cancel(self, job_id: str, lease_s: float) -> tuple[str, list[str]]:
        """Cancel unless terminal: ('cancelled' or the state, followers to enqueue anew)."""
        now = time.time()
        args: list[Arg] = [job_id, repr(now), self.job_ttl_s, now + lease_s]
        answer = [str(x) for x in self._cancel(keys=[], args=args)]
        return answer[0], answer[1:]

    def requeue_if_expired(self, job_id: str, lease_s: float, max_takeovers: int) -> str:
        """Act on a lease that ran out: 'requeued', 'resend', 'failed', 'fresh' or 'gone'."""
        now = time.time()
        error = json.dumps(WORKER_LOST)
        args: list[Arg] = [job_id, repr(now), now + lease_s, max_takeovers, self.job_ttl_s, error]
        return str(self._requeue(keys=[], args=args))

    def expired_leases(self, limit: int = 500) -> list[str]:
        """Ids of jobs whose lease deadline has passed."""
        found = self.redis.zrangebyscore(keys.leases(), "-inf", time.time(), start=0, num=limit)
        return [str(job_id) for job_id in found]

    def heartbeat(self, runs: list[tuple[str, str]], lease_s: float) -> list[str]:
        """Renew the leases of (job id, run id) pairs; answers each job's state for us."""
        if not runs:
            return []
        args: list[Arg] = [time.time() + lease_s]
        for job_id, run_id in runs:
            args += [job_id, run_id]
        return [str(s) for s in self._heartbeat(keys=[], args=args)]



def parse_event(row: Any) -> Event:
    """An Event from one XRANGE row."""
    stream_id, data = row
    return Event(str(stream_id), data.get("t", ""), data.get("v", ""), data.get("f", ""))
