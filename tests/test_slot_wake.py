"""A gevent worker whose slots are all busy takes the next waiting job as soon as one frees up,
not at its next broker poll (worker/runtime/pollfix.py: kombu's poll with no read registered is not
ended by an ack). The threads pool runs Celery's event loop, which an ack already ends."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import pytest

from tests.batchkit import own_stack
from tests.conftest import Stack
from worker.runtime.pollfix import MAX_POLL_S

JOBS = 8
# A whole number of polls: a job starts when the loop wakes and ends just after a later wake,
# so a worker that waits for its next poll loses nearly a full MAX_POLL_S between two jobs.
JOB_S = 3 * MAX_POLL_S


@pytest.fixture(scope="module")
def one_slot() -> Iterator[Stack]:
    """A gevent worker of one slot, on a Redis and a fakellm of its own."""
    with own_stack(CHATQ_WORKER_POOL="gevent", CHATQ_WORKER_CONCURRENCY="1") as (stack, _):
        yield stack


def test_a_freed_slot_takes_the_next_waiting_job_at_once(one_slot: Stack) -> None:
    ids = [
        one_slot.submit(f"slot {i}", model=f"fake:ttft={JOB_S:g}").json()["id"] for i in range(JOBS)
    ]
    with ThreadPoolExecutor(JOBS) as pool:
        jobs = list(pool.map(lambda i: one_slot.get(i, wait=30).json(), ids))
    assert [j["status"] for j in jobs] == ["completed"] * JOBS
    jobs.sort(key=lambda j: j["started_at"])
    # Both timestamps come from Redis's clock (the job record), in seconds.
    gaps_s = [b["started_at"] - a["completed_at"] for a, b in pairwise(jobs)]
    assert min(gaps_s) >= 0, "one slot ran two jobs at once"
    # The median, so that one gap stretched by a busy machine does not decide; waiting for the
    # next poll makes nearly every gap about MAX_POLL_S.
    assert statistics.median(gaps_s) < MAX_POLL_S / 2, gaps_s
