"""Every target judged from one run: the headline table first (the rows each judged against
its peer of the same run, and the soak's, from `--soak` files), then the further targets."""

from __future__ import annotations

from collections.abc import Callable

from bench import (
    capacity_targets,
    isolation_targets,
    latency_targets,
    soak_targets,
    upstream_targets,
    waiter_targets,
)
from bench.rows import JSON, Row, dig
from bench.sections import transport

__all__ = ["JSON", "Row", "dig", "evaluate"]

Judge = Callable[[JSON], list[Row]]

HEADLINE: list[Judge] = [
    latency_targets.added_latency,
    latency_targets.gateway,
    capacity_targets.throughput,
    capacity_targets.cpu_per_job,
    capacity_targets.redis_per_job,
    waiter_targets.tokens,
    waiter_targets.e2e_wake,
    waiter_targets.wake_throughput,
    waiter_targets.waiters_rss,
    soak_targets.gc_pause,
    soak_targets.soak,
]
FURTHER: list[Judge] = [
    latency_targets.long_job,
    waiter_targets.waiters_vs_gthread,
    waiter_targets.wake_latency,
    upstream_targets.connections,
    latency_targets.cache_hit,
    latency_targets.background,
    isolation_targets.batch,
    isolation_targets.fairness,
    upstream_targets.pacing,
    isolation_targets.bodies,
    transport.judge,
]
JUDGES: list[Judge] = [*HEADLINE, *FURTHER]


def _judged(judge: Judge, sections: JSON) -> list[Row]:
    """A judge's rows; a section that failed or lacks a figure gives a row saying so."""
    try:
        return judge(sections)
    except (KeyError, IndexError, TypeError, ZeroDivisionError) as exc:
        doc = (judge.__doc__ or judge.__name__).strip()
        issue = 12 if judge in HEADLINE else 6
        return [
            Row(doc, f"see issue {issue}", f"no figure: {type(exc).__name__} {exc}", None, issue)
        ]


def evaluate(sections: JSON) -> list[Row]:
    """Every target row: the headline table's, then the further ones."""
    return [row for judge in JUDGES for row in _judged(judge, sections)]
