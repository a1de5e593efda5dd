"""Issue 6 measure 4: jobs/s through 1 web + 1 worker, and bare Celery as the baseline."""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from statistics import median

import redis
from celery import Celery

from bench.alt.stack import alt_env, start_celery
from bench.lab import Lab
from bench.loadrun import run_load
from bench.procstat import CpuMeter
from bench.sections.common import JSON, body, breakdown, closed_spec, outcome_summary, target
from bench.stats import time_average_concurrency
from chatq.celery_app import make_celery
from chatq.config import Settings
from tests.procs import UPSTREAM_KEY, Proc

STREAM_MODEL = "fake:tps=20,tokens=21"  # first token at once, then 20 more over 1.0 s
STREAM_S = 1.0
SLOW_SLOTS = 300
SLOW_TASK_S = 1.0

STACKS = [("main", {}), ("threads", {"CHATQ_WORKER_POOL": "threads",
                                      "CHATQ_WORKER_CONCURRENCY": "100"})]

def _in_flight(result: JSON) -> JSON:
    """Mean and peak jobs in progress over the load window, from the jobs' own stamps."""
    done = [o for o in result["outcomes"] if o["ok"] and o.get("started")]
    if not done:
        return {"mean": None, "peak": None}
    offset = median(o["t1_wall"] - o["t1"] for o in done)
    start, end = (t + offset for t in result["window"])
    spans = [(o["started"], o["completed"]) for o in done]
    mean, peak = time_average_concurrency(spans, start, end)
    return {"mean": round(mean, 1), "peak": peak}


def _chatq_run(lab: Lab, model: str, clients: int, duration_s: float, minus_s: float,
               stack_name: str = "main") -> JSON:
    """Closed-loop jobs through one web and one worker process; jobs/s, CPU, where time goes."""
    name, recipe = next(r for r in STACKS if r[0] == stack_name)
    stack = lab.chatq(name, **recipe)
    pids = {**stack.pids(), "fakellm": lab.fakellm_pid("main" if name == "main" else "shared")}
    spec = closed_spec("chatq", target(stack.url, body(model)), clients, duration_s)
    meter = CpuMeter(pids).start()
    with lab.profiled(f"throughput-{model.replace(':', '_')}", stack.python_pids()):
        result = run_load(spec)
    cpu = meter.stop()
    summary = outcome_summary(result, minus_s)
    summary["in_flight"] = _in_flight(result)
    summary["breakdown"] = breakdown(result["outcomes"], minus_s)
    summary["cpu"] = {**cpu, "loadgen": result["loadgen_cpu"]}
    jobs_s = (summary["jobs_per_s"] or 0) * duration_s
    summary["cpu_ms_per_job"] = {
        k: round(1000 * v["cpu_s"] / jobs_s, 2) for k, v in cpu.items() if jobs_s
    }
    summary["clients"] = clients
    return summary


def _send_all(app: Celery, queue: str, count: int, task_s: float = 0.0) -> None:
    """`count` trivial tasks, or (task_s > 0) tasks that first wait task_s seconds."""
    name = "alt.sleep_write" if task_s else "alt.write_result"
    extra = [task_s] if task_s else []
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: app.send_task(name, args=[str(uuid.uuid4()), *extra],
                                              queue=queue, routing_key=queue), range(count)))


def _baseline_worker(lab: Lab, settings: str, pool: str, slots: int, prefetch: int = 0
                     ) -> tuple[Proc, Celery, str, redis.Redis]:
    """A Celery worker for the bare task, and the producer's app, queue and Redis client."""
    server = lab.redis()
    env = alt_env(server.url, lab.fakellm(), UPSTREAM_KEY, slots)
    if prefetch:
        env["ALT_PREFETCH"] = str(prefetch)
    client = redis.Redis.from_url(server.url)
    if settings == "chatq":
        worker = start_celery(env, pool, slots, "bench.alt.chatq_tasks", "interactive")
        return worker, make_celery(Settings(redis_url=server.url)), "interactive", client
    worker = start_celery(env, pool, slots)
    return worker, Celery("alt", broker=server.url), "alt", client


def _drain(client: redis.Redis, count: int, timeout_s: float = 120) -> int:
    """Wait until `count` tasks have written their result; answer how many did."""
    start = time.monotonic()
    while int(client.get("alt:done") or 0) < count and time.monotonic() - start < timeout_s:
        time.sleep(0.005)
    return int(client.get("alt:done") or 0)


def _baseline(lab: Lab, variant: tuple[str, str, int], count: int) -> JSON:
    """Bare Celery: `count` trivial tasks that write their own result; jobs/s end to end.

    `variant` is (settings, pool, slots): "plain" is Celery's defaults; "chatq" is chatq's
    own Celery settings (make_celery) and queue, to tell the settings' cost from the code's.
    """
    settings, pool, slots = variant
    worker, app, queue, client = _baseline_worker(lab, settings, pool, slots)
    _send_all(app, queue, 20)  # warm up connections on both sides
    _drain(client, 20)
    client.set("alt:done", 0)
    meter = CpuMeter({"celery": worker.pid, "producer (harness)": os.getpid()}).start()
    t0 = time.monotonic()
    _send_all(app, queue, count)
    done = _drain(client, count)
    elapsed_s = time.monotonic() - t0
    cpu = meter.stop()
    worker.stop()
    return {"settings": settings, "pool": pool, "slots": slots, "tasks": count, "done": done,
            "jobs_per_s": round(done / elapsed_s, 1), "cpu": cpu,
            "cpu_ms_per_task": round(1000 * cpu["celery"]["cpu_s"] / max(done, 1), 2),
            "producer_cpu_ms_per_task": round(
                1000 * cpu["producer (harness)"]["cpu_s"] / max(done, 1), 2)}


def _slow_tasks(lab: Lab, prefetch: int, count: int) -> JSON:
    """chatq's Celery settings, 300 gevent slots, tasks that wait 1 s: how many run at once?"""
    worker, app, queue, client = _baseline_worker(lab, "chatq", "gevent", SLOW_SLOTS, prefetch)
    _send_all(app, queue, 20)
    _drain(client, 20)
    client.set("alt:done", 0)
    meter = CpuMeter({"celery": worker.pid}).start()
    t0 = time.monotonic()
    _send_all(app, queue, count, SLOW_TASK_S)
    done = _drain(client, count)
    elapsed_s = time.monotonic() - t0
    cpu = meter.stop()
    worker.stop()
    rate = done / elapsed_s
    return {"prefetch_multiplier": prefetch, "slots": SLOW_SLOTS, "task_s": SLOW_TASK_S,
            "tasks": count, "done": done, "jobs_per_s": round(rate, 1),
            "in_flight": round(rate * SLOW_TASK_S, 1), "cpu": cpu}


def run(lab: Lab) -> JSON:
    """Instant and 1 s streaming upstream; instant with the threads pool; bare Celery."""
    s = lab.sizes
    instant = _chatq_run(lab, "fake", s.throughput_clients, s.throughput_duration_s, 0.0)
    streaming = _chatq_run(lab, STREAM_MODEL, s.stream_clients, s.stream_duration_s, STREAM_S)
    threads = _chatq_run(lab, "fake", s.throughput_clients, s.throughput_duration_s, 0.0,
                         "threads")
    lab.drop("threads")
    baselines = [_baseline(lab, v, s.baseline_tasks) for v in s.baseline_variants]
    best = max(b["jobs_per_s"] for b in baselines if b["settings"] == "plain")
    slow = [_slow_tasks(lab, prefetch, n) for prefetch, n in s.slow_task_variants]
    return {
        "bare_celery_1s_tasks": slow,
        "instant": instant, "streaming_1s": streaming, "stream_model": STREAM_MODEL,
        "instant_threads_pool": threads,
        "worker_concurrency": int(lab.chatq().env["CHATQ_WORKER_CONCURRENCY"]),
        "bare_celery": baselines, "bare_celery_best_jobs_per_s": best,
        "instant_vs_bare_pct": round(100 * (instant["jobs_per_s"] or 0) / best, 1),
    }
