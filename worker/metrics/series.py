"""Prometheus metrics of a worker process, served on its own port (CHATQ_WORKER_METRICS_BIND)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from chatq.metrics import LATENCY_BUCKETS_S

JOBS_FINISHED = Counter("chatq_jobs_finished_total", "Jobs ended, by final status", ["status"])
QUEUE_WAIT = Histogram(
    "chatq_job_queue_wait_seconds",
    "From submit to a worker starting the job",
    buckets=LATENCY_BUCKETS_S,
)
TIME_TO_FIRST_TOKEN = Histogram(
    "chatq_job_time_to_first_token_seconds",
    "From a job's start to its first generated text",
    buckets=LATENCY_BUCKETS_S,
)
JOB_DURATION = Histogram(
    "chatq_job_duration_seconds", "From a job's start to its end", buckets=LATENCY_BUCKETS_S
)
UPSTREAM_DURATION = Histogram(
    "chatq_upstream_request_duration_seconds",
    "One upstream call, to its last byte",
    ["endpoint", "status_code"],
    buckets=LATENCY_BUCKETS_S,
)
UPSTREAM_RETRIES = Counter(
    "chatq_upstream_retries_total", "Upstream attempts retried", ["endpoint", "reason"]
)
UPSTREAM_COOLDOWNS = Counter(
    "chatq_upstream_cooldowns_total", "Times an endpoint was put in cooldown", ["endpoint"]
)
PACING_WAIT = Histogram(
    "chatq_upstream_pacing_wait_seconds",
    "A call's wait for its turn within the upstream's rate limits (paced calls only)",
    ["endpoint"],
    buckets=(0.0, *LATENCY_BUCKETS_S),
)
TOKENS = Counter("chatq_tokens_total", "Tokens the upstream counted", ["direction"])
RUNNING_JOBS = Gauge("chatq_worker_running_jobs", "Jobs running in this worker process")
WORKER_SLOTS = Gauge("chatq_worker_slots", "Concurrent job slots of this worker process")
WEBHOOK_SLOTS = Gauge(
    "chatq_webhook_slots", "Webhook delivery slots of this worker process (apart from its jobs')"
)
WEBHOOK_SLOTS_BUSY = Gauge(
    "chatq_webhook_slots_busy", "Webhook delivery attempts running in this worker process"
)
