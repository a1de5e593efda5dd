"""A job's life: its record, the store's steps, results, events, rates, cache."""

from chatq.jobs.cache import LocalCache, cache_key, digest, policy
from chatq.jobs.erasure import erase
from chatq.jobs.events import Event, EventsPage, JobEvent, continuing, parse_events
from chatq.jobs.notify import Listener
from chatq.jobs.outbox import Ended, Outbox
from chatq.jobs.rates import COUNTS, Rates, owner_field
from chatq.jobs.record import (
    CANCELLED,
    COMPLETED,
    FAILED,
    IN_PROGRESS,
    JOB_ID_PATTERN,
    PRIORITIES,
    QUEUED,
    STATUSES,
    Job,
    TerminalStatus,
    counted_fields,
    is_terminal,
    new_job_id,
    new_record,
    new_run_id,
    public_view,
)
from chatq.jobs.results import Claim, Created, CreateKind, LeaseState, Piece, SweepOutcome, Swept
from chatq.jobs.store import Store
from chatq.jobs.waiters import Waiter

__all__ = [
    "CANCELLED",
    "COMPLETED",
    "COUNTS",
    "FAILED",
    "IN_PROGRESS",
    "JOB_ID_PATTERN",
    "PRIORITIES",
    "QUEUED",
    "STATUSES",
    "Claim",
    "CreateKind",
    "Created",
    "Ended",
    "Event",
    "EventsPage",
    "Job",
    "JobEvent",
    "LeaseState",
    "Listener",
    "LocalCache",
    "Outbox",
    "Piece",
    "Rates",
    "Store",
    "SweepOutcome",
    "Swept",
    "TerminalStatus",
    "Waiter",
    "cache_key",
    "continuing",
    "counted_fields",
    "digest",
    "erase",
    "is_terminal",
    "new_job_id",
    "new_record",
    "new_run_id",
    "owner_field",
    "parse_events",
    "policy",
    "public_view",
]
