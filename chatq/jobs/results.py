"""What the job store's steps answer (chatq/jobs/store.py): typed, never bare strings."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CreateKind(StrEnum):
    """How a create went."""

    CREATED = "created"  # written (queued, or completed from the cache)
    EXISTS = "exists"  # a job with that id exists: nothing written
    FOLLOWER = "follower"  # written, following an identical job in flight
    CACHED = "cached"  # an identical job finished meanwhile: nothing written


@dataclass(frozen=True)
class Created:
    """The answer of `create`: for FOLLOWER the leader's id, for CACHED the cached result;
    `created_at` is Redis's time of writing."""

    kind: CreateKind
    value: str = ""
    created_at: str = ""


@dataclass(frozen=True)
class Claim:
    """The answer of `claim`: the job's request and owner (and its prompt's token count, if
    made when it was submitted, and the trace it runs in), or the status that prevented it."""

    claimed: bool
    status: str = ""
    request: str = ""
    owner: str = ""
    created_at: float = 0.0
    prompt_tokens: int | None = None
    traceparent: str = ""
    tracestate: str = ""
    trace_link: str = ""


@dataclass(frozen=True)
class Cancel:
    """The answer of `cancel`: the job's status now ('missing' when there is none) and the
    followers it detached, to be enqueued anew."""

    status: str
    detached: tuple[str, ...] = ()


@dataclass(frozen=True)
class Piece:
    """Text of one job's attempt, written after its first `offset_bytes` bytes."""

    job_id: str
    run_id: str
    offset_bytes: int
    text: str


class LeaseState(StrEnum):
    """What a heartbeat learns of one run."""

    HELD = "held"
    CANCELLED = "cancelled"
    LOST = "lost"


class SweepOutcome(StrEnum):
    """What the sweeper did with a job whose lease ran out."""

    GONE = "gone"  # it had ended
    QUEUED = "queued"  # still waiting: send it again only if the broker lost its message
    PARKED = "parked"  # still waiting, its message dropped by a claim over its tenant's cap
    SUSPECT = "suspect"  # running, its lease ran out: taken over if still so a lease later
    REQUEUED = "requeued"  # its worker was lost: queued again, to be sent now
    FAILED = "failed"  # its worker was lost too many times


@dataclass(frozen=True)
class Swept:
    """One job the sweeper acted on."""

    job_id: str
    outcome: SweepOutcome
    priority: str
    owner: str = ""
