"""Prometheus metrics of the web: names under `chatq_`, base units, `_total` counters.

Web processes run under gunicorn in multiprocess mode (PROMETHEUS_MULTIPROC_DIR is set by
`python -m web` before this module is imported), so gauges say how they combine. The
worker never imports this module, so its own /metrics carries none of these. The HTTP
request histogram and counter are prometheus-flask-exporter's (web/metrics/http_requests.py).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

JOBS_SUBMITTED = Counter("chatq_jobs_submitted_total", "Jobs accepted", ["priority"])
CACHE_LOOKUPS = Counter("chatq_cache_lookups_total", "Result cache lookups at submit", ["result"])
HTTP_IN_PROGRESS = Gauge(
    "chatq_http_requests_in_progress",
    "HTTP requests being handled",
    multiprocess_mode="livesum",
)
ADMISSION_REJECTIONS = Counter(
    "chatq_admission_rejections_total", "Requests turned away", ["reason"]
)
WAITERS = Gauge(
    "chatq_longpoll_waiters", "Requests parked waiting on a job", multiprocess_mode="livesum"
)
HELD_OVER_CAP = Counter(
    "chatq_held_requests_over_cap_total",
    "Requests of a key holding CHATQ_MAX_HELD_REQUESTS_PER_KEY open in its web process: "
    "long-polls answered at once, others refused",
    ["answer"],
)
