"""chatq's hand-written HTTP metric hooks, as the web had them before prometheus-flask-exporter
took the HTTP metrics (kept here only as the bench's alternative, bench/http_metrics_cost.py).

One before-request hook stamps the start and raises the in-flight gauge; one after-request
hook lowers it, flushes the GC pauses, observes the histogram and the counter (positional
labels, the path check shared with the log line) and makes the request's log line.
"""

from __future__ import annotations

import logging
import time

from flask import Flask, Response, g, request
from prometheus_client import Counter, Histogram

from chatq.metrics import gc_pauses
from chatq.metrics.shared import LATENCY_BUCKETS_S
from web.metrics import series as metrics
from web.metrics.http_requests import endpoint

# The same names as chatq's series, in no registry: the cost of an observation does not
# depend on its name, and the exporter's objects in the same process keep theirs.
HTTP_DURATION = Histogram(
    "chatq_http_request_duration_seconds",
    "HTTP requests by route template, method and status",
    ["method", "endpoint", "status"],
    buckets=LATENCY_BUCKETS_S,
    registry=None,
)
HTTP_REQUESTS = Counter("chatq_http_request", "HTTP requests", ["method", "status"], registry=None)
log = logging.getLogger("chatq.web.requests")


def _started() -> None:
    g.chatq_started = time.perf_counter()
    metrics.HTTP_IN_PROGRESS.inc()


def _finished(response: Response) -> Response:
    duration_s = time.perf_counter() - g.pop("chatq_started", time.perf_counter())
    metrics.HTTP_IN_PROGRESS.dec()
    gc_pauses.flush()
    if request.path != "/metrics":
        method, status, path = request.method, str(response.status_code), endpoint()
        HTTP_DURATION.labels(method, path, status).observe(duration_s)
        HTTP_REQUESTS.labels(method, status).inc()
        context = {
            "method": method,
            "path": path,
            "status": response.status_code,
            "duration_ms": round(duration_s * 1000, 2),
            "key": g.get("chatq_key", "-"),
            "job_id": g.get("chatq_job_id", "-"),
        }
        log.info("request", extra=context)
    return response


def install(app: Flask, access_log: bool = True) -> None:
    """The hooks, as `web.metrics.request_hooks.install_request_log` installed them."""
    log.setLevel(logging.NOTSET if access_log else logging.WARNING)
    app.before_request(_started)
    app.after_request(_finished)
