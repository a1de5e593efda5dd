"""What the processes measure and report: shared series, GC pauses, the queue's figures."""

from chatq.metrics.gc_pauses import flush, install
from chatq.metrics.queue_objects import (
    Bucket,
    Health,
    Queue,
    QueueShare,
    RateLimits,
    Readiness,
    Usage,
    WebhookWork,
)
from chatq.metrics.queue_share import share
from chatq.metrics.queue_stats import BatchLines, redis_time, snapshot, window
from chatq.metrics.shared import (
    LATENCY_BUCKETS_S,
    Scrape,
    Untenanted,
    metrics_refusal,
    scrape_access,
    untenanted,
)

__all__ = [
    "LATENCY_BUCKETS_S",
    "BatchLines",
    "Bucket",
    "Health",
    "Queue",
    "QueueShare",
    "RateLimits",
    "Readiness",
    "Scrape",
    "Untenanted",
    "Usage",
    "WebhookWork",
    "flush",
    "install",
    "metrics_refusal",
    "redis_time",
    "scrape_access",
    "share",
    "snapshot",
    "untenanted",
    "window",
]
