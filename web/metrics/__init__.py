"""The web's metrics: its series, its per-request hooks, figures read at scrape time."""

from web.metrics.http_requests import EXTENSION, install
from web.metrics.request_hooks import install_request_log
from web.metrics.scraped import gauges, webhook_gauges
from web.metrics.series import (
    ADMISSION_REJECTIONS,
    CACHE_LOOKUPS,
    HELD_OVER_CAP,
    JOBS_SUBMITTED,
    WAITERS,
)

__all__ = [
    "ADMISSION_REJECTIONS",
    "CACHE_LOOKUPS",
    "EXTENSION",
    "HELD_OVER_CAP",
    "JOBS_SUBMITTED",
    "WAITERS",
    "gauges",
    "install",
    "install_request_log",
    "webhook_gauges",
]
