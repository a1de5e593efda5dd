"""Bare Celery with chatq's own Celery settings (`chatq.broker.celery_app.make_celery`): the trivial
task, on the `interactive` queue, late-acked, prefetch 1. Isolates the cost of the settings
from the cost of chatq's code. Configured by ALT_REDIS_URL, ALT_POOL_SIZE and, to vary them,
ALT_PREFETCH (worker_prefetch_multiplier), ALT_POLL_CAP (0: without chatq's cap) and
ALT_ACK_EMULATION (1: kombu records each reserved message in Redis, as chatq does not).

Under gevent the worker is tuned as `python -m worker` tunes itself (worker/tasks.py): each
broker poll capped at 0.1 s (worker/runtime/pollfix.py) and task greenlets freed without the cycle
collector (worker/runtime/greenlets.py), unless ALT_POLL_CAP=0 asks for Celery's own 2 s poll.
"""

from __future__ import annotations

import os
import time
from typing import Any

from celery import signals

from bench.alt import tasks
from chatq.broker.celery_app import make_celery
from chatq.config.settings import Settings
from worker.runtime import tune_gevent_pool

SLOTS = int(os.environ.get("ALT_POOL_SIZE", "100"))
POLL_CAP = os.environ.get("ALT_POLL_CAP", "1") != "0"
RUNNING = "alt:running"  # tasks between their start and their end, for the ablation
settings = Settings(redis_url=tasks.REDIS_URL, worker_concurrency=SLOTS)
app = make_celery(settings, max_connections=2 * SLOTS + 20)
if os.environ.get("ALT_PREFETCH"):  # the one setting the ablation varies
    app.conf.worker_prefetch_multiplier = int(os.environ["ALT_PREFETCH"])
if os.environ.get("ALT_ACK_EMULATION") == "1":  # the ablation counts reserved messages in Redis
    app.conf.broker_transport_options["ack_emulation"] = True


@signals.worker_init.connect
def _tune_gevent_pool(**_: Any) -> None:
    tune_gevent_pool(shorten_poll=bool(POLL_CAP))


@app.task(name="alt.write_result", ignore_result=True, acks_late=True)
def write_result(job_id: str) -> None:
    """The same writes as the plain baseline's task."""
    tasks.write_result.run(job_id)


@app.task(name="alt.sleep_write", ignore_result=True, acks_late=True)
def sleep_write(job_id: str, seconds: float) -> None:
    """Wait like a job on a slow upstream (cooperatively), then the same writes."""
    client = tasks.redis_client()
    client.incr(RUNNING)
    try:
        time.sleep(seconds)
    finally:
        client.decr(RUNNING)
    tasks.write_result.run(job_id)
