"""Small statistics: percentiles and summaries of latency samples."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100, nearest rank) of `values`; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary_ms(seconds: Sequence[float]) -> dict[str, float | int | None]:
    """Count, p50, p90, p99 and max of samples given in seconds, reported in milliseconds."""
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "p50_ms": _round(percentile(ms, 50)),
        "p90_ms": _round(percentile(ms, 90)),
        "p99_ms": _round(percentile(ms, 99)),
        "max_ms": _round(max(ms) if ms else None),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing or b is not positive."""
    if a is None or b is None or b <= 0:
        return None
    return round(a / b, 1)


def mean(values: Sequence[float]) -> float | None:
    """The arithmetic mean, None when empty."""
    return sum(values) / len(values) if values else None


def time_average_concurrency(
    spans: Sequence[tuple[float, float]], start: float, end: float
) -> tuple[float, int]:
    """Mean and peak number of spans open within [start, end] (a sweep over span edges)."""
    edges: list[tuple[float, int]] = []
    for a, b in spans:
        a, b = max(a, start), min(b, end)
        if b > a:
            edges += [(a, 1), (b, -1)]
    edges.sort()
    open_now = peak = 0
    area = 0.0
    last = start
    for t, step in edges:
        area += open_now * (t - last)
        open_now += step
        peak = max(peak, open_now)
        last = t
    return (area / (end - start) if end > start else 0.0), peak
