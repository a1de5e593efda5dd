"""Garbage-collector pauses as a Prometheus histogram, in the web and the worker alike.

A full collection stops every request and job of the process; `gc.freeze()` after start-up
moves what start-up built out of its way, so that collections only traverse what came since.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import Histogram

GC_PAUSE = Histogram(
    "chatq_gc_pause_seconds", "Time the garbage collector stopped this process",
    ["generation"], buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
)
_started = 0.0


def _timed(phase: str, info: dict[str, Any]) -> None:
    global _started
    if phase == "start":
        _started = time.perf_counter()
    else:
        GC_PAUSE.labels(str(info["generation"])).observe(time.perf_counter() - _started)


def install() -> None:
    """Time every collection of this process, once."""
    if _timed not in gc.callbacks:
        gc.callbacks.append(_timed)


def freeze_start_up() -> None:
    """Collect what start-up left, then keep the survivors out of later collections."""
    gc.collect()
    gc.freeze()
