"""Issue 12: the prefetch ablation, re-run with chatq's 0.1 s broker-poll cap.

Bare Celery under chatq's own Celery settings (bench/alt/chatq_tasks.py: late ack, priority
order, the gevent pool tuned as `python -m worker` tunes it), 300 gevent slots, tasks that
wait 1 s cooperatively, all sent at once: how many run at once with each prefetch
multiplier, with the cap and (for comparison with the first ablation) without it. Every
50 ms the harness reads the broker: a message a worker has reserved but not started is not
in the queue's lists (with kombu's ack emulation, turned on for this measure only, it is in
its `unacked` hash), so the queue depth chatq reports (`LLEN`)
does not count it. Reserved beyond the slots (`HLEN unacked` - slots, when positive) is
certainly waiting inside a worker, unseen; `HLEN unacked` - tasks running also counts
messages in transit to a free slot (a few milliseconds each).
"""

from __future__ import annotations

import threading
import time

import redis

from bench.lab import Lab
from bench.procstat import CpuMeter
from bench.sections.common import JSON
from bench.sections.throughput import baseline_worker, drain, send_all
from bench.stats import mean
from chatq.broker.backlog import queue_keys

SLOTS = 300
TASK_S = 1.0
SAMPLE_S = 0.05
UNACKED = "unacked"  # kombu's hash of reserved messages, with ack emulation
NEAR_BEST = 0.95
STACKS: list[tuple[str, JSON]] = []


def _sample(client: redis.Redis, queue: str) -> tuple[int, int, int]:
    """(messages in the queue's lists, messages reserved and unacknowledged, tasks running)."""
    pipe = client.pipeline(transaction=False)
    for key in queue_keys(queue):
        pipe.llen(key)
    pipe.hlen(UNACKED)
    pipe.get("alt:running")
    *lengths, unacked, running = pipe.execute()
    return sum(lengths), int(unacked), int(running or 0)


def _sampler(
    client: redis.Redis, queue: str, stop: threading.Event, out: list[tuple[int, int, int]]
) -> None:
    while not stop.wait(SAMPLE_S):
        out.append(_sample(client, queue))


def _variant(lab: Lab, prefetch: int, count: int, cap: bool) -> JSON:
    """`count` 1 s tasks on 300 slots at one prefetch multiplier, with or without the cap."""
    bare = baseline_worker(
        lab,
        "chatq",
        "gevent",
        SLOTS,
        ALT_PREFETCH=str(prefetch),
        ALT_POLL_CAP="1" if cap else "0",
        ALT_ACK_EMULATION="1",
    )
    send_all(bare.app, bare.queue, 20)
    drain(bare.client, 20)
    bare.client.set("alt:done", 0)
    samples: list[tuple[int, int, int]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sampler, args=(bare.client, bare.queue, stop, samples))
    meter = CpuMeter({"celery": bare.worker.pid, "redis": bare.redis_pid}).start()
    t0 = time.monotonic()
    sampler.start()
    send_all(bare.app, bare.queue, count, TASK_S)
    done = drain(bare.client, count)
    elapsed_s = time.monotonic() - t0
    stop.set()
    sampler.join()
    cpu = meter.stop()
    bare.worker.stop()
    hidden = [max(0, unacked - running) for _, unacked, running in samples]
    # While work waited somewhere (in the lists or reserved): how many slots ran a task?
    busy = [s[2] for s, h in zip(samples, hidden, strict=True) if s[0] + h > 0]
    return {
        "prefetch_multiplier": prefetch,
        "poll_cap": cap,
        "slots": SLOTS,
        "task_s": TASK_S,
        "tasks": count,
        "done": done,
        "jobs_per_s": round(done / elapsed_s, 1),
        "in_flight": round(done / elapsed_s * TASK_S, 1),
        "running_with_backlog": round(mean(busy) or 0, 1),
        "hidden_reserved_max": max(hidden, default=0),
        "reserved_beyond_slots_max": max((max(0, u - SLOTS) for _, u, _ in samples), default=0),
        "cpu": cpu,
    }


def recommend(variants: list[JSON]) -> JSON | None:
    """The smallest multiplier (with the cap) whose slots ran within 5 % of the most tasks
    while work waited, and what an exact queue depth then needs."""
    capped = sorted((v for v in variants if v["poll_cap"]), key=lambda v: v["prefetch_multiplier"])
    if not capped:
        return None
    best = max(v["running_with_backlog"] for v in capped)
    chosen = next(v for v in capped if v["running_with_backlog"] >= NEAR_BEST * best)
    exact = chosen["reserved_beyond_slots_max"] == 0
    return {
        "prefetch_multiplier": chosen["prefetch_multiplier"],
        "running_with_backlog": chosen["running_with_backlog"],
        "best": best,
        "reserved_beyond_slots_max": chosen["reserved_beyond_slots_max"],
        "queue_depth": "LLEN of the queue's lists is exact"
        if exact
        else "exact only as LLEN + (HLEN unacked - busy slots from the heartbeats)",
    }


def run(lab: Lab) -> JSON:
    """Each (prefetch, tasks, cap) variant of the sizes, then the recommendation."""
    variants = [
        _variant(lab, prefetch, count, cap) for prefetch, count, cap in lab.sizes.slow_task_variants
    ]
    return {"variants": variants, "recommendation": recommend(variants)}
