"""After start-up a process keeps what it built out of collections, and collects in full
only every MIDDLE_PER_FULL collections of the middle generation."""

from __future__ import annotations

import gc

from prometheus_client import REGISTRY

from chatq.metrics import gc_pauses


def test_start_up_is_frozen_and_full_collections_made_rarer() -> None:
    before = gc.get_threshold()
    try:
        gc_pauses.freeze_start_up()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (before[0], before[1], gc_pauses.MIDDLE_PER_FULL)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def _full_collections(metric: str) -> float:
    return REGISTRY.get_sample_value(f"{metric}_count", {"generation": "2"}) or 0.0


def test_each_collection_is_timed_by_the_clock_and_by_its_cpu_time() -> None:
    before = {
        m: _full_collections(m) for m in ("chatq_gc_pause_seconds", "chatq_gc_pause_cpu_seconds")
    }
    gc_pauses.install()
    gc_pauses.flush()
    gc.collect()
    gc_pauses.flush()
    for metric, count in before.items():
        assert _full_collections(metric) >= count + 1, metric
    cpu_s = REGISTRY.get_sample_value("chatq_gc_pause_cpu_seconds_sum", {"generation": "2"})
    paused_s = REGISTRY.get_sample_value("chatq_gc_pause_seconds_sum", {"generation": "2"})
    assert cpu_s is not None and paused_s is not None
    assert 0 < cpu_s <= paused_s + 0.001  # the clocks' resolutions apart
