"""The job store's Lua scripts (create.lua, claim.lua, ... sweep.lua), each declared by its
arguments and its answer; chatq/jobs/store.py calls them. Every one works in the slot of the job
(or shard) it names: that is the key it is routed by."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from chatq import keys
from chatq.jobs import record as jobs
from chatq.jobs.results import (
    Cancel,
    Claim,
    Created,
    CreateKind,
    LeaseState,
    Piece,
    SweepOutcome,
    Swept,
)
from chatq.scripting import LuaScript


def _job_slot(args: Any) -> str:
    return keys.job(args.id)


class CreateArgs(NamedTuple):
    """create.lua: accept a job (see there)."""

    id: str
    ttl_s: int
    lease_s: float
    flight: str
    max_followers: int
    mode: str
    text: str
    may_exist: bool
    queue: str
    message: str
    record: tuple[str, ...]  # field/value pairs


def decode_created(answer: list[Any]) -> Created:
    """create.lua's answer {kind, value, created_at}."""
    kind, value, created_at = answer
    return Created(CreateKind(kind), value, created_at)


CREATE = LuaScript("create.lua", CreateArgs, decode_created, anchor=_job_slot)


class ClaimArgs(NamedTuple):
    """claim.lua: a worker takes a queued job for one run."""

    id: str
    run: str
    lease_s: float
    park_s: float
    cap: int  # every owner's running cap (0: none)
    caps: tuple[str | int, ...]  # owner/cap pairs that override it


def decode_claim(answer: list[Any]) -> Claim:
    """claim.lua's answer {'claimed', request, owner, created_at, prompt_tokens, traceparent,
    tracestate, trace_link}, or {status} of a job it did not take."""
    if answer[0] != "claimed":
        return Claim(False, answer[0])
    _, request, owner, created_at, prompt_tokens, *trace = answer
    counted = int(prompt_tokens) if prompt_tokens else None
    return Claim(True, jobs.IN_PROGRESS, request, owner, float(created_at or 0), counted, *trace)


CLAIM = LuaScript("claim.lua", ClaimArgs, decode_claim, anchor=_job_slot)


class AttemptArgs(NamedTuple):
    """attempt.lua: the run's attempt number `n` (2, 3, ...) begins."""

    id: str
    run: str
    n: int


ATTEMPT = LuaScript("attempt.lua", AttemptArgs, bool, anchor=_job_slot)


class AppendArgs(NamedTuple):
    """append.lua: text of several jobs of one slot."""

    pieces: tuple[str | int, ...]  # (job id, run id, offset_bytes, text) per piece


def encode_pieces(pieces: Iterable[Piece]) -> tuple[str | int, ...]:
    """AppendArgs.pieces: each piece's four fields laid end to end (append.lua reads them
    four at a time)."""
    return tuple(x for p in pieces for x in (p.job_id, p.run_id, p.offset_bytes, p.text))


def decode_appended(answer: list[Any]) -> list[bool]:
    """append.lua's answer: per piece, whether its run still held its job."""
    return [bool(ok) for ok in answer]


APPEND = LuaScript(
    "append.lua", AppendArgs, decode_appended, anchor=lambda a: keys.job(str(a.pieces[0]))
)


class FinishArgs(NamedTuple):
    """finish.lua: the run that holds the job ends it."""

    id: str
    run: str
    status: str
    reason: str
    tail: str
    ttl_s: int
    fields: tuple[str, ...]  # field/value pairs


FINISH = LuaScript("finish.lua", FinishArgs, bool, anchor=_job_slot)


class CancelArgs(NamedTuple):
    """cancel.lua: a client cancels a job that has not ended."""

    id: str
    lease_s: float
    ttl_s: int


def decode_cancel(answer: list[Any]) -> Cancel:
    """cancel.lua's answer {status, ids of the detached followers...}."""
    status, *detached = answer
    return Cancel(status, tuple(detached))


CANCEL = LuaScript("cancel.lua", CancelArgs, decode_cancel, anchor=_job_slot)


class WatchArgs(NamedTuple):
    """watch.lua: a request follows a queued job's events."""

    id: str


WATCH = LuaScript("watch.lua", WatchArgs, bool, anchor=_job_slot)


class DeleteArgs(NamedTuple):
    """delete.lua: an ended job removed for good."""

    id: str


DELETE = LuaScript("delete.lua", DeleteArgs, str, anchor=_job_slot)


class SweepArgs(NamedTuple):
    """sweep.lua: act on the jobs whose lease ran out."""

    limit: int
    lease_s: float
    resend_s: float
    max_takeovers: int
    ttl_s: int
    error_json: str
    shards: tuple[str, ...]


def decode_swept(answer: list[Any]) -> list[Swept]:
    """sweep.lua's answer: flat, a Swept's fields laid end to end (one list, no nesting:
    the cheapest answer to build and read for a sweep of many jobs)."""
    stride = len(Swept.__dataclass_fields__)
    return [
        Swept(
            answer[i],
            SweepOutcome(answer[i + 1]),
            answer[i + 2] or jobs.PRIORITIES[0],
            answer[i + 3],
        )
        for i in range(0, len(answer), stride)
    ]


SWEEP = LuaScript("sweep.lua", SweepArgs, decode_swept, anchor=lambda a: keys.leases(a.shards[0]))


class HeartbeatArgs(NamedTuple):
    """heartbeat.lua: a worker renews the leases of its runs."""

    lease_s: float
    runs: tuple[str, ...]  # (job id, run id) pairs


class Heartbeat(NamedTuple):
    """heartbeat.lua's answer: Redis's time, and what became of each run."""

    now: str
    states: list[LeaseState]


def decode_heartbeat(answer: list[Any]) -> Heartbeat:
    """From {Redis time, state per run...}."""
    now, *states = answer
    return Heartbeat(now, [LeaseState(state) for state in states])


def _heartbeat_slot(args: Any) -> str:
    return keys.job(args.runs[0]) if args.runs else keys.leases(keys.SHARDS[0])


HEARTBEAT = LuaScript("heartbeat.lua", HeartbeatArgs, decode_heartbeat, anchor=_heartbeat_slot)
