"""What the web's and the worker's Prometheus metrics share: the latency buckets, and who may
read the series that name a tenant.

Each side defines its own metrics (web/metrics/series.py, worker/metrics/series.py), so that neither
exports the other's, always-zero, series.
"""

from __future__ import annotations

import enum
import hmac
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Metric
from prometheus_client.registry import Collector

from chatq.errors import ApiError

# The seed's buckets (0.1 0.5 1 2 5) with finer ones below 0.1 and longer ones above.
LATENCY_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2,
    5,
    10,
    30,
    60,
    120,
    300,
)


# Labels that name a tenant (a key name): series carrying one are served only to a scrape
# with CHATQ_METRICS_TOKEN.
TENANT_LABELS = frozenset({"key"})


class Scrape(enum.Enum):
    """What a scrape of /metrics may read."""

    ALL = "all"  # with the metrics token: every series
    UNTENANTED = "untenanted"  # without credentials: the series that name no tenant
    REFUSED = "refused"  # with wrong credentials: 401


def scrape_access(authorization: str, token: str) -> Scrape:
    """What a scrape sending this `Authorization` header may read, given the metrics token
    (`token`, empty when none is set: then no scrape reads a tenant's series)."""
    if not authorization:
        return Scrape.UNTENANTED
    scheme, _, sent = authorization.partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(sent.strip(), token):
        return Scrape.ALL
    return Scrape.REFUSED


def metrics_refusal() -> ApiError:
    """The 401 of a scrape with wrong credentials."""
    return ApiError(
        401,
        "invalid_metrics_token",
        "Wrong credentials for /metrics: send `Authorization: Bearer <CHATQ_METRICS_TOKEN>`, "
        "or none for the series that name no key.",
    )


class Untenanted(Collector):
    """The metric families of `source` that carry no tenant label."""

    def __init__(self, source: Collector) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        """Every family of `source` none of whose samples names a tenant."""
        for family in self.source.collect():
            if not any(TENANT_LABELS.intersection(s.labels) for s in family.samples):
                yield family


def untenanted(source: Collector) -> CollectorRegistry:
    """A registry of the series of `source` that name no tenant."""
    registry = CollectorRegistry()
    registry.register(Untenanted(source))
    return registry
