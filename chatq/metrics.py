"""Prometheus metrics of both processes: names under `chatq_`, base units, `_total` counters.

Web processes run under gunicorn in multiprocess mode (PROMETHEUS_MULTIPROC_DIR is set by
`python -m web` before this module is imported), so gauges say how they combine.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

# The seed's buckets (0.1 0.5 1 2 5) with finer ones below 0.1 and longer ones above.
LATENCY_BUCKETS_S = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300,
)

# Web
JOBS_SUBMITTED = Counter("chatq_jobs_submitted_total", "Jobs accepted", ["priority"])
CACHE_LOOKUPS = Counter(
    "chatq_cache_lookups_total", "Result cache lookups at submit", ["result"]
)
HTTP_IN_PROGRESS = Gauge(
    "chatq_http_requests_in_progress", "HTTP requests being handled",
    multiprocess_mode="livesum",
)
ADMISSION_REJECTIONS = Counter(
    "chatq_admission_rejections_total", "Requests turned away", ["reason"]
)
WAITERS = Gauge(
    "chatq_longpoll_waiters", "Requests parked waiting on a job", multiprocess_mode="livesum"
)

# Worker
JOBS_FINISHED = Counter("chatq_jobs_finished_total", "Jobs ended, by final status", ["status"])
QUEUE_WAIT = Histogram(
    "chatq_job_queue_wait_seconds", "From submit to a worker starting the job",
    buckets=LATENCY_BUCKETS_S,
)
TIME_TO_FIRST_TOKEN = Histogram(
    "chatq_job_time_to_first_token_seconds", "From a job's start to its first generated text",
    buckets=LATENCY_BUCKETS_S,
)
JOB_DURATION = Histogram(
    "chatq_job_duration_seconds", "From a job's start to its end", buckets=LATENCY_BUCKETS_S
)
UPSTREAM_DURATION = Histogram(
    "chatq_upstream_request_duration_seconds", "One upstream call, to its last byte",
    ["endpoint", "status_code"], buckets=LATENCY_BUCKETS_S,
)
UPSTREAM_RETRIES = Counter(
    "chatq_upstream_retries_total", "Upstream attempts retried", ["endpoint", "reason"]
)
UPSTREAM_COOLDOWNS = Counter(
    "chatq_upstream_cooldowns_total", "Times an endpoint was put in cooldown", ["endpoint"]
)
TOKENS = Counter("chatq_tokens_total", "Tokens the upstream counted", ["direction"])
RUNNING_JOBS = Gauge("chatq_worker_running_jobs", "Jobs running in this worker process")
WORKER_SLOTS = Gauge("chatq_worker_slots", "Concurrent job slots of this worker process")
