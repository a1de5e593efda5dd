"""Prometheus metrics of the web (and the buckets both sides use): names under `chatq_`,
base units, `_total` counters.

Web processes run under gunicorn in multiprocess mode (PROMETHEUS_MULTIPROC_DIR is set by
`python -m web` before this module is imported), so gauges say how they combine.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

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
