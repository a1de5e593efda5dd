"""When a web or a worker collects its garbage: young collections on a clock, full ones rarely.

A collection stops every request and job of the process while it walks the objects of the
generations it collects. Beyond what start-up built (frozen out of every collection), a
process holds its requests and jobs in flight: they live for seconds and die by their
reference counts, not by the collector (a worker at 50 jobs/s made no cyclic garbage in any
of four 20-second windows). So the cost of a pause is how many of them a collection walks.

CPython starts a young collection when allocations of tracked objects outnumber
deallocations by 700, counting deaths in every generation. Under steady turnover the jobs
that end pay for the jobs that start, the count barely moves, and the young generation grows
with every job started since the last collection: in a worker running 500 jobs at 50 jobs/s
it reached 44k objects, and the middle one 70k, so that a young or middle collection walked
about as much as a full one (74k objects, 33-50 ms of CPU). Here a young collection also runs
every YOUNG_EVERY_S, and what outlives two of them moves on to the oldest generation at the
next middle one, so neither holds more than a few ticks' allocations.
"""

from __future__ import annotations

import gc
import threading
import time

YOUNG_EVERY_S = 0.25
# gc.set_threshold's second value: the middle generation is collected after this many young
# collections plus one (CPython's default, 10: after eleven), by the clock's ticks as by
# allocations.
MIDDLE_THRESHOLD = 1
# Its third: a full collection after this many middle ones plus one: at one middle
# collection every three ticks, about an hour. Cyclic garbage that reaches the oldest
# generation waits that long to be freed; a full collection walks every object in flight.
FULL_THRESHOLD = 4_800


def _tick_forever() -> None:
    ticks = 0
    while True:
        time.sleep(YOUNG_EVERY_S)
        ticks += 1
        gc.collect(1 if ticks % (MIDDLE_THRESHOLD + 2) == 0 else 0)


def collect_on_a_clock() -> threading.Thread:
    """Collect what start-up left and freeze the survivors out of later collections, set the
    older generations' thresholds, and start the ticks (on a daemon thread: a greenlet where
    gevent patched threads, as in the web and a worker with the gevent pool)."""
    gc.collect()
    gc.freeze()
    young, _, _ = gc.get_threshold()
    gc.set_threshold(young, MIDDLE_THRESHOLD, FULL_THRESHOLD)
    ticker = threading.Thread(target=_tick_forever, name="chatq-gc-ticks", daemon=True)
    ticker.start()
    return ticker
