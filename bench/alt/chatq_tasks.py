"""Bare Celery with chatq's own Celery settings (`chatq.celery_app.make_celery`): the trivial
task, on the `interactive` queue, late-acked, prefetch 1. Isolates the cost of the settings
from the cost of chatq's code. Configured by ALT_REDIS_URL, ALT_POOL_SIZE and, to vary it,
ALT_PREFETCH (worker_prefetch_multiplier)."""

from __future__ import annotations

import os
import time

from bench.alt import tasks
from chatq.celery_app import make_celery
from chatq.config import Settings

SLOTS = int(os.environ.get("ALT_POOL_SIZE", "100"))
settings = Settings(redis_url=tasks.REDIS_URL, worker_concurrency=SLOTS)
app = make_celery(settings, max_connections=2 * SLOTS + 20)
if os.environ.get("ALT_PREFETCH"):  # the one setting the ablation varies
    app.conf.worker_prefetch_multiplier = int(os.environ["ALT_PREFETCH"])


@app.task(name="alt.write_result", ignore_result=True, acks_late=True)
def write_result(job_id: str) -> None:
    """The same writes as the plain baseline's task."""
    tasks.write_result.run(job_id)


@app.task(name="alt.sleep_write", ignore_result=True, acks_late=True)
def sleep_write(job_id: str, seconds: float) -> None:
    """Wait like a job on a slow upstream (cooperatively), then the same writes."""
    time.sleep(seconds)
    tasks.write_result.run(job_id)
