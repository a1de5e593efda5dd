"""The worker's spans: a job's time queued, its claim, runs, upstream attempts, webhooks."""

from worker.tracing.spans import (
    RunTrace,
    attempt_ended,
    attempt_started,
    begin,
    ended,
    retrying,
    webhook_sent,
)

__all__ = [
    "RunTrace",
    "attempt_ended",
    "attempt_started",
    "begin",
    "ended",
    "retrying",
    "webhook_sent",
]
