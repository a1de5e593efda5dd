"""The web's one log line per request, and its requests in flight (the HTTP request metrics
are prometheus-flask-exporter's: web/metrics/http_requests.py; /metrics is web/pages/scrape.py)."""

from __future__ import annotations

import logging
import time

from flask import Flask, Response, g, request

from chatq import metrics as gc_pauses
from web.metrics import series as metrics
from web.metrics.http_requests import endpoint

log = logging.getLogger("chatq.web.requests")


def _started() -> None:
    g.chatq_started = time.perf_counter()
    metrics.HTTP_IN_PROGRESS.inc()


def _finished(response: Response) -> Response:
    duration_s = time.perf_counter() - g.pop("chatq_started", time.perf_counter())
    metrics.HTTP_IN_PROGRESS.dec()
    gc_pauses.flush()
    if request.path != "/metrics":
        context = {
            "method": request.method,
            "path": endpoint(),
            "status": response.status_code,
            "duration_ms": round(duration_s * 1000, 2),
            "key": g.get("chatq_key", "-"),
            "job_id": g.get("chatq_job_id", "-"),
        }
        log.info("request", extra=context)
    return response


def install_request_log(app: Flask, access_log: bool = True) -> None:
    """One log line per request (unless `access_log` is off), with its key name and job id,
    and the in-flight gauge."""
    # Off: the logger's own level drops the line before a record is made.
    log.setLevel(logging.NOTSET if access_log else logging.WARNING)
    app.before_request(_started)
    app.after_request(_finished)
