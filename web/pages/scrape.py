"""What the web's /metrics shows: every gunicorn worker's series summed, and the figures read
from Redis at scrape time (the queue's; each key's usage)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from chatq import metrics as queue_stats
from chatq.metrics import untenanted
from chatq.topology import BACKEND_ERRORS
from web import metrics
from web.context import Services
from web.pages.usage import UsageCollector


class QueueCollector(Collector):
    """Queue figures read from Redis at scrape time."""

    def __init__(self, svc: Services) -> None:
        self.svc = svc

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Depth and oldest age per queue, jobs in progress, recommended concurrency."""
        try:
            # The same figures as GET /v1/queue.
            snap = queue_stats.snapshot(self.svc.redis, self.svc.broker)
        except BACKEND_ERRORS:
            return
        depth = GaugeMetricFamily(
            "chatq_queue_depth", "Jobs waiting in the broker", labels=["queue"]
        )
        age = GaugeMetricFamily(
            "chatq_queue_oldest_age_seconds", "Age of the oldest waiting job", labels=["queue"]
        )
        for name, jobs_waiting in snap.depths.items():
            depth.add_metric([name], jobs_waiting)
            oldest_s = snap.oldest_age_s[name]
            if oldest_s is not None:  # a broker that cannot tell (RabbitMQ): no sample
                age.add_metric([name], oldest_s)
        yield depth
        yield age
        yield GaugeMetricFamily(
            "chatq_jobs_in_progress", "Jobs running on workers", value=snap.workers.busy
        )
        yield GaugeMetricFamily(
            "chatq_recommended_concurrency",
            "Worker slots needed by Little's law x 1.2",
            value=snap.recommended_concurrency,
        )
        yield from metrics.gauges(snap.batches)
        yield from metrics.webhook_gauges(snap.webhooks)


def render_metrics(
    svc: Services, tenants: bool, http: Collector | None = None
) -> tuple[bytes, str]:
    """The text exposition: every gunicorn worker's metrics summed, plus the queue's; the
    series that name a tenant (key) only with `tenants`. `http`: the app's HTTP request
    metrics when they are kept in memory (no multiprocess folder)."""
    queue = CollectorRegistry()
    queue.register(QueueCollector(svc))
    if tenants:
        queue.register(UsageCollector(svc))
    registry = CollectorRegistry()
    if svc.settings.metrics_dir:
        MultiProcessCollector(registry, path=svc.settings.metrics_dir)  # type: ignore[no-untyped-call]
    else:
        registry.register(REGISTRY)
        if http is not None:
            registry.register(http)
    body = generate_latest(registry if tenants else untenanted(registry))
    return body + generate_latest(queue), CONTENT_TYPE_LATEST
