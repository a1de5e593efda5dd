"""A worker process's Prometheus series and its own /metrics server."""

from worker.metrics.series import (
    JOB_DURATION,
    JOBS_FINISHED,
    PACING_WAIT,
    QUEUE_WAIT,
    RUNNING_JOBS,
    TIME_TO_FIRST_TOKEN,
    TOKENS,
    UPSTREAM_COOLDOWNS,
    UPSTREAM_DURATION,
    UPSTREAM_RETRIES,
    WEBHOOK_SLOTS,
    WEBHOOK_SLOTS_BUSY,
    WORKER_SLOTS,
)
from worker.metrics.server import serve

__all__ = [
    "JOBS_FINISHED",
    "JOB_DURATION",
    "PACING_WAIT",
    "QUEUE_WAIT",
    "RUNNING_JOBS",
    "TIME_TO_FIRST_TOKEN",
    "TOKENS",
    "UPSTREAM_COOLDOWNS",
    "UPSTREAM_DURATION",
    "UPSTREAM_RETRIES",
    "WEBHOOK_SLOTS",
    "WEBHOOK_SLOTS_BUSY",
    "WORKER_SLOTS",
    "serve",
]
