"""Long-polling: park a request until its job changes, woken by the notification listener."""

from __future__ import annotations

import time

from chatq import jobs
from chatq.errors import job_not_found
from web.context import Services
from web.params import jittered


def load_owned(svc: Services, job_id: str, owner: str) -> dict[str, str]:
    """The job's record if it exists and belongs to `owner`; otherwise 404."""
    record = svc.store.get(job_id)
    if record is None or record.get("owner") != owner:
        raise job_not_found()
    return record


def wait_terminal(svc: Services, record: dict[str, str], wait_s: float) -> dict[str, str]:
    """The record once terminal, or as it is when `wait_s` (jittered) runs out."""
    if wait_s <= 0 or jobs.is_terminal(record["status"]):
        return record
    job_id, owner = record["id"], record["owner"]
    deadline = time.monotonic() + jittered(wait_s)
    with svc.listener.waiting(job_id, terminal_only=True) as waiter:
        # Re-read after registering: a change in between is seen here or wakes us.
        record = load_owned(svc, job_id, owner)
        while not jobs.is_terminal(record["status"]):
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                break
            if waiter.wait(remaining_s):
                record = load_owned(svc, job_id, owner)
    return record
