"""Deleting a job for good (DELETE /v1/responses/{id}): cancelled first if it has not ended,
then its keys removed by one step (chatq/jobs/delete.lua)."""

from __future__ import annotations

from dataclasses import dataclass

from chatq.jobs.scripts import DELETE
from chatq.jobs.store import Store


@dataclass(frozen=True)
class Erased:
    """What a delete did: `status` is 'deleted' or 'missing'; `detached` are the followers
    the cancel left to run on their own (the caller enqueues them)."""

    status: str
    detached: tuple[str, ...] = ()


def erase(store: Store, job_id: str, lease_s: float) -> Erased:
    """Cancel the job if it is still queued or running, then delete all its keys."""
    cancel = store.cancel(job_id=job_id, lease_s=lease_s)
    if cancel.status == "missing":
        return Erased("missing")
    answer = DELETE.on(store.redis)(id=job_id)
    # Only 'deleted' or 'missing' can come back: a cancelled or ended job never changes again.
    return Erased(answer if answer in ("deleted", "missing") else "missing", cancel.detached)
