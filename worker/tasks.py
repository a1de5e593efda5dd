"""The Celery app of the workers and its task (a job), thin like a view; the threads each worker
process runs beside its pool (monitor, relay, webhook delivery pool, batch loops)."""

from __future__ import annotations

import errno
import logging
import sys
from typing import Any

from celery import signals

from chatq import admission as fairness
from chatq import batches as files
from chatq import broker, config, topology, tracing
from chatq import metrics as gc_pauses
from chatq import runtime as process
from chatq.broker import RUN_JOB_TASK, make_celery
from chatq.scripting import is_cluster
from worker import (
    admission,  # noqa: F401  its relay handler settles ended jobs
    batches,
    metrics,
    runtime,
)
from worker import run as relay
from worker.context import context
from worker.run import Monitor, run_job
from worker.webhooks import DeliveryPool

settings = config.load()
app = make_celery(settings, max_connections=2 * settings.worker_concurrency + 20)
_monitors: list[Monitor] = []
_relays: list[relay.Relay] = []
_delivery_pools: list[DeliveryPool] = []


@app.task(name=RUN_JOB_TASK, ignore_result=True, acks_late=True)
def run(job_id: str) -> None:
    """Run the job `job_id`; the message carries nothing else."""
    run_job(context(settings, app), job_id)


# Celery's line for each message received and each task done: chatq logs each job's start
# and end itself (worker/run/runner.py), so these say it again, at ~3.5 % of a busy worker's CPU.
# A task that raises is still logged, at ERROR.
CELERY_PER_TASK_LOGGERS = ("celery.worker.strategy", "celery.app.trace")


@signals.after_setup_logger.connect
def _set_up_logging(**_: Any) -> None:
    process.setup(settings.log_level, settings.secret_values(), settings.log_format)
    if settings.log_level.upper() != "DEBUG":
        for name in CELERY_PER_TASK_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


@signals.worker_init.connect
def _tune_gevent_pool(**_: Any) -> None:
    runtime.tune_gevent_pool(shorten_poll=not broker.is_amqp(app))


@signals.worker_init.connect
def _start_tracing(**_: Any) -> None:
    # Spans only with an OTLP endpoint set (chatq/tracing/context.py); a forked pool's processes
    # inherit the exporter, which the SDK restarts in each after the fork.
    tracing.start("chatq-worker")


@signals.worker_init.connect
def _reread_capped_tenants(**_: Any) -> None:
    # A read that leaves out a tenant at its cap must end in time to take that tenant's next
    # job once one of its jobs ends: its queues come back only at the next read.
    if fairness.plan(settings).capped and not broker.is_amqp(app):
        runtime.end_reads_within(fairness.RUNNING_REFRESH_S)


@signals.worker_init.connect
def _serve_metrics(**_: Any) -> None:
    # Before the worker consumes anything: a worker nobody can scrape must not run unseen.
    # One port per worker process, so that every process is scraped and counted.
    if not settings.worker_metrics_bind:
        return
    host, _sep, port = settings.worker_metrics_bind.rpartition(":")
    try:
        metrics.serve(host or "127.0.0.1", int(port), settings.metrics_token)
    except (OSError, ValueError, OverflowError) as exc:
        # A SystemExit passes Celery's signal dispatch, which would log any Exception and go on.
        sys.exit(
            f"worker: cannot serve metrics on CHATQ_WORKER_METRICS_BIND="
            f"{settings.worker_metrics_bind}: {_bind_failure(exc)}"
        )


def _bind_failure(exc: Exception) -> str:
    """Why a metrics address could not be served, in a few words."""
    if not isinstance(exc, OSError):
        return "not a host:port"
    return "address already in use" if exc.errno == errno.EADDRINUSE else str(exc.strerror or exc)


@signals.celeryd_after_setup.connect
def _check_redis(**_: Any) -> None:
    client = topology.connect_state(settings, 2)
    try:
        topology.check_at_start(client, settings.redis_require_safe)
        if fairness.plan(settings).capped and is_cluster(client):
            # Its running counts would be in another slot than the claims that keep them.
            sys.exit("worker: CHATQ_TENANT_MAX_RUNNING needs the job store on one Redis")
    except topology.UnsafeRedis:
        raise SystemExit(1) from None  # before the consumer starts: no job is taken
    finally:
        client.close()


@signals.celeryd_after_setup.connect
def _check_files_dir(**_: Any) -> None:
    # The batch loop keeps files there: a folder another user owns is refused before any job.
    if "batch" in settings.worker_lanes:
        try:
            files.prepare_dir(settings.files_dir)
        except files.FilesDirRefused as exc:
            sys.exit(f"worker: refusing to start: {exc}")


@signals.worker_ready.connect
def _start_monitor(**_: Any) -> None:
    monitor = Monitor(context(settings, app))
    monitor.start()
    _monitors.append(monitor)
    if relay.HANDLERS:
        _relays.append(relay.Relay(monitor.ctx, monitor.name))
        _relays[-1].start()
    _delivery_pools.append(DeliveryPool(monitor.ctx))
    _delivery_pools[-1].start()
    if "batch" in settings.worker_lanes:  # lines run where the loop feeding them runs
        batches.start(monitor.ctx)
    metrics.WORKER_SLOTS.set(settings.worker_concurrency)
    gc_pauses.install()
    process.collect_on_a_clock()


@signals.worker_shutdown.connect
def _stop_monitor(**_: Any) -> None:
    # Only once the pool has drained: running jobs keep their leases until they end.
    for each in _relays:
        each.stop()
    for pool in _delivery_pools:  # its attempts end by their deadline
        pool.stop(settings.webhook_timeout_s + 1)
    for monitor in _monitors:
        monitor.stop()
    batches.stop()
