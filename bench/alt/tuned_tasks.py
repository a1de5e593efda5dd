"""The naive app's task on chatq's own Celery settings (`chatq.broker.celery_app.make_celery`),
with a Redis result backend for the view to wait on: the parts chatq is made of (Flask, Celery,
Redis, a pooled `requests.Session`), tuned as chatq tunes them and doing nothing else. Its
latency is the floor of those parts (bench/added.py). Configured as bench/alt/tasks.py is; the
worker consumes the `interactive` queue, and under gevent is tuned as chatq_tasks.py's is.
"""

from __future__ import annotations

from typing import Any

from celery import signals

from bench.alt import tasks
from chatq.broker.celery_app import make_celery
from chatq.config.settings import Settings
from worker.runtime import tune_gevent_pool

settings = Settings(redis_url=tasks.REDIS_URL, worker_concurrency=tasks.POOL_SIZE)
app = make_celery(settings, max_connections=2 * tasks.POOL_SIZE + 20)
app.conf.update(result_backend=tasks.REDIS_URL, result_expires=tasks.RESULT_TTL_S)
QUEUE = "interactive"


@signals.worker_init.connect
def _tune_gevent_pool(**_: Any) -> None:
    tune_gevent_pool(shorten_poll=True)


@app.task(name="alt.call_llm_tuned", ignore_result=False, acks_late=True)
def call_llm(body: dict[str, Any]) -> dict[str, Any]:
    """The naive app's call, its completion to the result backend."""
    return tasks.call_llm.run(body)
