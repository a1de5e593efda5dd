"""When the garbage collector runs, and how long each collection stopped the process.

runtime.collect_on_a_clock: under steady turnover (as many objects die as are made, the
objects of jobs that end paying for those of jobs that start) CPython's allocation count
barely moves, so its young collections grow rare and the young generations pile up every
object made since: each collection of them then walks about as much as a full one. The
clock's ticks keep them small. The turnover runs in a gevent process of its own, as the web
and the worker run; the pytest process is not patched.
"""

from __future__ import annotations

import gc
import json
import textwrap

import requests
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from chatq.metrics import gc_pauses
from chatq.runtime import collector
from scripts.localredis import free_port
from tests.procs import METRICS_AUTH, base_env, python_output, start_worker, wait_until

LIVE = 60_000

# `live` small objects stay alive while 200 are replaced every 10 ms (the whole set in 3 s),
# the clock's collections started first if `ticks` (both set before it by _turnover); every
# 0.1 s it notes how many objects the young and middle generations hold together.
TURNOVER = textwrap.dedent(
    """
    from gevent import monkey

    monkey.patch_all()

    import collections, gc, json, time
    import gevent
    from chatq.runtime import collect_on_a_clock

    if ticks:
        collect_on_a_clock()
    held = collections.deque([n] for n in range(live))
    gc.collect()
    young_most, step, deadline = 0, 0, time.monotonic() + 2.5
    while time.monotonic() < deadline:
        for _ in range(200):
            held.popleft()
            held.append([step])
        step += 1
        if step % 10 == 0:
            young_most = max(young_most, len(gc.get_objects(0)) + len(gc.get_objects(1)))
        gevent.sleep(0.01)
    print(json.dumps({"young_most": young_most, "frozen": gc.get_freeze_count(),
                      "thresholds": gc.get_threshold()}))
    """
)


def _turnover(ticks: bool) -> dict[str, int]:
    result: dict[str, int] = json.loads(python_output(f"live, ticks = {LIVE}, {ticks}\n{TURNOVER}"))
    return result


def test_under_steady_turnover_the_clock_keeps_the_young_generations_small() -> None:
    by_clock, by_allocations = _turnover(ticks=True), _turnover(ticks=False)
    # Without the ticks, what CPython's count alone gives: nearly every object made.
    assert by_allocations["young_most"] > LIVE / 2, by_allocations
    # With them, a few ticks' worth (~5,000 objects a tick here).
    assert by_clock["young_most"] < LIVE / 4, by_clock
    assert by_clock["frozen"] > 0
    assert by_clock["thresholds"][1:] == [collector.MIDDLE_THRESHOLD, collector.FULL_THRESHOLD]


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


def _young_collections(metrics_url: str) -> float:
    """The young and middle collections a process made so far, from its /metrics."""
    text = requests.get(metrics_url, headers=METRICS_AUTH, timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "chatq_gc_pause_seconds_count"
        and sample.labels.get("generation") in ("0", "1")
    )


def test_a_running_worker_collects_on_the_clock(own_redis_url: str, fakellm: str) -> None:
    bind = f"127.0.0.1:{free_port()}"
    env = base_env(own_redis_url, fakellm, CHATQ_WORKER_METRICS_BIND=bind)
    worker = start_worker(env, own_redis_url)
    try:
        url = f"http://{bind}/metrics"
        first = _young_collections(url)
        # Idle, a worker allocates too little to start collections by the count, and a scrape
        # a second does not either; the clock starts four a second.
        wait_until(lambda: _young_collections(url) - first >= 12, 30, "12 collections", 1.0)
    finally:
        worker.stop()
