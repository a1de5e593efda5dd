"""The web's HTTP request metrics, observed by prometheus-flask-exporter.

`chatq_http_request_duration_seconds` (histogram: `method`, `endpoint`, `status`) and
`chatq_http_request_total` (`method`, `status`), the exporter's two default series under the
`chatq` prefix. Under gunicorn (CHATQ_METRICS_DIR set) it runs in its multiprocess mode and
the web's own /metrics sums every process's files; the exporter serves no endpoint of its own,
so the token guard and the queue's series stay in one answer.
"""

from __future__ import annotations

from flask import Flask, Request, request
from prometheus_client import CollectorRegistry
from prometheus_flask_exporter import PrometheusMetrics
from prometheus_flask_exporter.multiprocess import GunicornPrometheusMetrics

from chatq.metrics import LATENCY_BUCKETS_S

# Where create_app keeps the metrics of an app outside gunicorn, for its /metrics.
EXTENSION = "chatq_http_metrics"


def endpoint(req: Request | None = None) -> str:
    """The route template of the request (never the raw path: one series per job id)."""
    rule = (req or request).url_rule
    return rule.rule if rule else "unmatched"


class _NoInfoSeries:
    """Leaves out the exporter's `chatq_exporter_info` gauge: no dashboard or alert reads it."""

    def info(self, *_args: object, **_labels: object) -> None:
        """Nothing: the exporter calls this once, for its version series."""


class _Gunicorn(_NoInfoSeries, GunicornPrometheusMetrics):  # type: ignore[misc]
    """The exporter's multiprocess mode under gunicorn, without its separate HTTP server."""


class _InProcess(_NoInfoSeries, PrometheusMetrics):  # type: ignore[misc]
    """The exporter in one process's memory (the app outside gunicorn: in-process tests)."""


def install(app: Flask, metrics_dir: str) -> None:
    """Time every request but /metrics's, by route template, method and status: in the
    multiprocess folder `metrics_dir` (`python -m web` sets PROMETHEUS_MULTIPROC_DIR, which
    the exporter reads, to it) or, when empty, in a registry of the app's own."""
    # The label is named after the callable: `endpoint`, as the dashboard reads it.
    options = {
        "defaults_prefix": "chatq",
        "group_by": endpoint,
        "buckets": LATENCY_BUCKETS_S,
        "excluded_paths": [r"/metrics\Z"],
    }
    if metrics_dir:
        _Gunicorn(app, **options)
        return
    # One registry per app: a second app in the process (the tests make many) gets series of
    # its own instead of a clash with the first's names.
    registry = CollectorRegistry()
    _InProcess(app, path=None, registry=registry, **options)
    app.extensions[EXTENSION] = registry
