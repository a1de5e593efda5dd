"""After start-up a process keeps what it built out of collections, and collects in full
only every MIDDLE_PER_FULL collections of the middle generation."""

from __future__ import annotations

import gc

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
