"""What the web's and the worker's Prometheus metrics share: the latency buckets.

Each side defines its own metrics (web/metrics.py, worker/metrics.py), so that neither
exports the other's, always-zero, series.
"""

from __future__ import annotations

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
