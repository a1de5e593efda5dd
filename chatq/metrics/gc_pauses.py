"""Garbage-collector pauses as a Prometheus histogram, in the web and the worker alike.

A collection stops every request and job of the process; when each runs is chatq/runtime's
(`collect_on_a_clock`). A web holding 1,000 long-polls tracks ~64k objects, 9-15 ms of CPU a
full collection; a worker running 500 jobs ~74k, 33-50 ms; more on busy cores.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from typing import Any

from prometheus_client import Histogram

_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)
GC_PAUSE = Histogram(
    "chatq_gc_pause_seconds",
    "Time the garbage collector stopped this process",
    ["generation"],
    buckets=_BUCKETS_S,
)
# The same collections' CPU time: on a machine with more runnable processes than cores a
# pause also holds the time the process waited for a core, which this leaves out.
GC_PAUSE_CPU = Histogram(
    "chatq_gc_pause_cpu_seconds",
    "CPU time the garbage collector spent in each collection of this process",
    ["generation"],
    buckets=_BUCKETS_S,
)
_started_s = (0.0, 0.0)  # perf_counter() and thread_time() at the start of a collection
# Pauses timed but not yet observed. The callback runs inside whatever code allocated, which
# may hold a metric's lock: taking that lock there would deadlock, so it only appends here.
_pending: deque[tuple[str, float, float]] = deque(maxlen=10_000)


def _timed(phase: str, info: dict[str, Any]) -> None:
    global _started_s
    if phase == "start":
        _started_s = (time.perf_counter(), time.thread_time())
    else:
        wall_s, cpu_s = _started_s
        paused_s, cpu_used_s = time.perf_counter() - wall_s, time.thread_time() - cpu_s
        _pending.append((str(info["generation"]), paused_s, cpu_used_s))


def flush() -> None:
    """Observe the pauses timed since the last flush (call it from ordinary code)."""
    while _pending:
        generation, paused_s, cpu_used_s = _pending.popleft()
        GC_PAUSE.labels(generation).observe(paused_s)
        GC_PAUSE_CPU.labels(generation).observe(cpu_used_s)


def install() -> None:
    """Time every collection of this process, once."""
    if _timed not in gc.callbacks:
        gc.callbacks.append(_timed)
