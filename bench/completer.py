"""Ending jobs on a schedule, the way their own systems do, and noting when.

chatq: jobs are created and claimed through chatq's Store and ended with `Store.finish`,
the same Lua script a worker runs (it writes the terminal state and PUBLISHes
`<id> completed` on its shard's notification channel). Celery: `backend.store_result`, as a
task's end does (SET `celery-task-meta-<id>` and PUBLISH on that key).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from celery import Celery

from chatq.jobs import record as jobs
from chatq.jobs.store import Store
from chatq.topology import connections as redis_conn

Run = tuple[str, str]
RESULT = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "done"},
                "finish_reason": "stop",
            }
        ],
    }
)
REQUEST = {"model": "fake", "messages": [{"role": "user", "content": "hello"}]}
LEASE_S = 3600.0


def chatq_store(redis_url: str, job_ttl_s: int) -> Store:
    """A Store on `redis_url`, as the web and the worker build theirs."""
    return Store(redis_conn.connect(redis_url, max_connections=64), job_ttl_s)


def _create_one(store: Store, owner: str) -> Run:
    job_id, run_id = jobs.new_job_id(), jobs.new_run_id()
    record = jobs.new_record(job_id, owner, "fake", "interactive", REQUEST, time.time())
    store.create(record=record, lease_s=LEASE_S)
    claim = store.claim(job_id=job_id, run_id=run_id, lease_s=LEASE_S)
    if not claim.claimed:
        raise RuntimeError(f"could not claim {job_id}: {claim.status}")
    return job_id, run_id


def create_running(store: Store, count: int, owner: str = "alice") -> list[Run]:
    """`count` jobs, created and claimed (in_progress) without any Celery message."""
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda _: _create_one(store, owner), range(count)))


def chatq_finisher(store: Store) -> Callable[[Run], None]:
    """Ends one chatq job as completed, through the worker's own Lua path."""

    def finish(run: Run) -> None:
        if not store.finish(
            job_id=run[0],
            run_id=run[1],
            status=jobs.COMPLETED,
            fields={"result": RESULT},
            finish_reason="stop",
        ):
            raise RuntimeError(f"job {run[0]} was not ours to finish")

    return finish


def celery_finisher(redis_url: str) -> Callable[[Run], None]:
    """Ends one Celery task as SUCCESS in the Redis result backend."""
    app = Celery("alt", broker=redis_url, backend=redis_url)
    app.conf.update(result_serializer="json", accept_content=["json"])

    def finish(run: Run) -> None:
        app.backend.store_result(run[0], {"ok": True}, "SUCCESS")

    return finish


def celery_ids(count: int) -> list[Run]:
    """Task ids that no task has used yet (AsyncResult.get() waits on them)."""
    return [(str(uuid.uuid4()), "") for _ in range(count)]


def finish_at_rate(
    finish: Callable[[Run], None], runs: Sequence[Run], rate_per_s: float
) -> dict[str, float]:
    """End `runs` in order, one every 1/rate s; answer id -> monotonic time just before."""
    stamps: dict[str, float] = {}
    start = time.monotonic()
    for i, run in enumerate(runs):
        delay_s = start + i / rate_per_s - time.monotonic()
        if delay_s > 0:
            time.sleep(delay_s)
        stamps[run[0]] = time.monotonic()
        finish(run)
    return stamps


def finish_burst(
    finish: Callable[[Run], None], runs: Sequence[Run], threads: int = 2
) -> dict[str, float]:
    """End `runs` as fast as `threads` callers can; answer id -> time just before each."""
    stamps: dict[str, float] = {}

    def one(run: Run) -> None:
        stamps[run[0]] = time.monotonic()
        finish(run)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, runs))
    return stamps
