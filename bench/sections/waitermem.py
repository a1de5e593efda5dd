"""Issue 12: KiB per parked waiter, by tracemalloc inside one web process (bench/waiterkib.py).

chatq's gunicorn (one gevent worker, chatq's options) serves the app behind a tracing
wrapper; jobs are created and claimed through the Store, without workers. A first round parks
and wakes a few waiters (connections, the listener, lazy state made once), then tracing
starts, the waiters are parked and, once the process is idle, the Python memory allocated
since and still held is read, with the sites that hold most of it. RSS growth per waiter is
read beside it: it also counts what Python does not allocate (libev watchers, allocator
slack; the stacks greenlet copies to the heap are traced).
"""

from __future__ import annotations

import requests

from bench.completer import chatq_finisher, chatq_store, create_running, finish_burst
from bench.lab import Lab
from bench.procstat import rss_bytes, serving_pid
from bench.sections.common import JSON
from bench.sections.waiters import WAIT_S, park, wake_stats
from scripts.localredis import free_port
from tests.procs import Proc, base_env, wait_until

TTL_S = 900
WARMUP_WAITERS = 20
STACKS: list[tuple[str, JSON]] = []


def _round(
    url: str, pid: int, store_url: str, count: int, traced: bool = True
) -> tuple[JSON, JSON, int]:
    """Park `count` waiters, read the trace and RSS, wake them all: (trace, wakes, RSS)."""
    store = chatq_store(store_url, TTL_S)
    runs = create_running(store, count)
    load, _ = park(url, "chatq", [r[0] for r in runs], pid)
    trace = requests.get(url + "/__bench__/trace", timeout=60).json() if traced else {}
    rss = rss_bytes(pid)
    stamps = finish_burst(chatq_finisher(store), runs)
    answers = load.result(WAIT_S + 60)["answers"]
    return trace, wake_stats(answers, stamps), rss


def run(lab: Lab) -> JSON:
    """Warm up, start tracing, park `waitermem_waiters`, read, wake."""
    server = lab.redis()
    port = free_port()
    env = base_env(
        server.url,
        lab.fakellm(),
        CHATQ_MAX_WAIT="120",
        CHATQ_JOB_TTL=str(TTL_S),
        CHATQ_LOG_LEVEL="WARNING",
        CHATQ_WEB_WORKERS="1",
        CHATQ_MAX_HELD_REQUESTS_PER_KEY="0",  # one key parks them all
        CHATQ_BIND=f"127.0.0.1:{port}",
    )
    proc = lab.track(Proc("waiterkib", ["bench.waiterkib"], env).start())
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: requests.get(url + "/healthz", timeout=1).ok, 30, "waiterkib")
    worker = serving_pid(proc.pid)
    _round(url, worker, server.url, WARMUP_WAITERS, traced=False)
    requests.post(url + "/__bench__/trace/start", timeout=60).raise_for_status()
    rss_before = rss_bytes(worker)
    count = lab.sizes.waitermem_waiters
    trace, wakes, rss_parked = _round(url, worker, server.url, count)
    proc.stop()
    per_waiter = [
        {**site, "bytes_per_waiter": round(site["bytes"] / count, 1)} for site in trace["top"]
    ]
    return {
        "waiters": count,
        "errors": wakes["errors"],
        "kib_per_waiter": round(trace["traced_bytes"] / count / 1024, 2),
        "rss_kib_per_waiter": round((rss_parked - rss_before) / count / 1024, 2),
        "top_sites": per_waiter,
    }
