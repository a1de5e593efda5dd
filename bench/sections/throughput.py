"""Issue 6 measure 4: jobs/s through 1 web + 1 worker, and bare Celery as the baseline.

Issue 12: the baseline is bare Celery with its default settings on chatq's own pool type and
size; CPU per job by role (psutil, over the same load run) against its CPU per task.
"""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from statistics import median

import redis
from celery import Celery

from bench.alt.stack import alt_env, start_celery
from bench.lab import Lab
from bench.loadrun import run_load
from bench.procstat import CpuMeter
from bench.sections.common import JSON, body, breakdown, closed_spec, outcome_summary, target
from bench.stats import time_average_concurrency
from chatq.broker.celery_app import make_celery
from chatq.config.settings import Settings
from tests.procs import UPSTREAM_KEY, Proc

STREAM_MODEL = "fake:tps=20,tokens=21"  # first token at once, then 20 more over 1.0 s
STREAM_S = 1.0

STACKS = [
    ("main", {}),
    ("threads", {"CHATQ_WORKER_POOL": "threads", "CHATQ_WORKER_CONCURRENCY": "100"}),
]


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


def _chatq_run(
    lab: Lab, model: str, clients: int, duration_s: float, minus_s: float, stack_name: str = "main"
) -> JSON:
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
    summary["cpu_ms_per_job"] = _cpu_ms_per_job(summary["cpu"], result)
    summary["clients"] = clients
    return summary


def _cpu_ms_per_job(cpu: JSON, result: JSON) -> JSON:
    """CPU ms per completed job by role over the whole load run (every job it completed)."""
    done = len([o for o in result["outcomes"] if o["ok"]])
    if not done:
        return {}
    per_job = {k: round(1000 * v["cpu_s"] / done, 2) for k, v in cpu.items()}
    per_job["chatq (web + worker + redis)"] = round(
        sum(v for k, v in per_job.items() if k in ("web", "worker", "redis")), 2
    )
    return per_job


def send_all(app: Celery, queue: str, count: int, task_s: float = 0.0) -> None:
    """`count` trivial tasks, or (task_s > 0) tasks that first wait task_s seconds."""
    name = "alt.sleep_write" if task_s else "alt.write_result"
    extra = [task_s] if task_s else []
    with ThreadPoolExecutor(4) as pool:
        list(
            pool.map(
                lambda _: app.send_task(
                    name, args=[str(uuid.uuid4()), *extra], queue=queue, routing_key=queue
                ),
                range(count),
            )
        )


@dataclass
class Bare:
    """A bare Celery worker on a Redis of its own, and the producer's app, queue and client."""

    worker: Proc
    app: Celery
    queue: str
    client: redis.Redis
    redis_pid: int


def baseline_worker(lab: Lab, settings: str, pool: str, slots: int, **alt: str) -> Bare:
    """A Celery worker for the bare task (`alt` adds ALT_* settings of
    bench/alt/chatq_tasks.py, e.g. ALT_PREFETCH)."""
    server = lab.redis()
    assert server.process is not None
    env = {**alt_env(server.url, lab.fakellm(), UPSTREAM_KEY, slots), **alt}
    client = redis.Redis.from_url(server.url)
    if settings == "chatq":
        worker = start_celery(env, pool, slots, "bench.alt.chatq_tasks", "interactive")
        app, queue = make_celery(Settings(redis_url=server.url)), "interactive"
    else:
        worker = start_celery(env, pool, slots)
        app, queue = Celery("alt", broker=server.url), "alt"
    return Bare(worker, app, queue, client, server.process.pid)


def drain(client: redis.Redis, count: int, timeout_s: float = 120) -> int:
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
    bare = baseline_worker(lab, settings, pool, slots)
    send_all(bare.app, bare.queue, 20)  # warm up connections on both sides
    drain(bare.client, 20)
    bare.client.set("alt:done", 0)
    meter = CpuMeter(
        {"celery": bare.worker.pid, "redis": bare.redis_pid, "producer (harness)": os.getpid()}
    ).start()
    t0 = time.monotonic()
    send_all(bare.app, bare.queue, count)
    done = drain(bare.client, count)
    elapsed_s = time.monotonic() - t0
    cpu = meter.stop()
    bare.worker.stop()
    per_task = {k: round(1000 * v["cpu_s"] / max(done, 1), 2) for k, v in cpu.items()}
    return {
        "settings": settings,
        "pool": pool,
        "slots": slots,
        "tasks": count,
        "done": done,
        "jobs_per_s": round(done / elapsed_s, 1),
        "cpu": cpu,
        "cpu_ms_per_task": per_task["celery"],
        "cpu_ms_per_task_by_role": per_task,
    }


def _same_pool(baselines: list[JSON], pool: str, slots: int) -> JSON | None:
    """The bare Celery run with default settings on chatq's pool type (its size if run)."""
    plain = [b for b in baselines if b["settings"] == "plain" and b["pool"] == pool]
    return next((b for b in plain if b["slots"] == slots), plain[0] if plain else None)


def _cpu_ratio(instant: JSON, bare: JSON | None) -> float | None:
    """chatq's CPU per job (web + worker + Redis) over bare Celery's worker CPU per task."""
    mine = instant["cpu_ms_per_job"].get("chatq (web + worker + redis)")
    theirs = bare["cpu_ms_per_task"] if bare else None
    return round(mine / theirs, 2) if mine and theirs else None


def run(lab: Lab) -> JSON:
    """Instant and 1 s streaming upstream; instant with the threads pool; bare Celery."""
    s = lab.sizes
    instant = _chatq_run(lab, "fake", s.throughput_clients, s.throughput_duration_s, 0.0)
    streaming = _chatq_run(lab, STREAM_MODEL, s.stream_clients, s.stream_duration_s, STREAM_S)
    threads = _chatq_run(lab, "fake", s.throughput_clients, s.throughput_duration_s, 0.0, "threads")
    lab.drop("threads")
    baselines = [_baseline(lab, v, s.baseline_tasks) for v in s.baseline_variants]
    env = lab.chatq().env
    pool, slots = env.get("CHATQ_WORKER_POOL", "gevent"), int(env["CHATQ_WORKER_CONCURRENCY"])
    same = _same_pool(baselines, pool, slots)
    same_jobs_s = same["jobs_per_s"] if same else None
    return {
        "instant": instant,
        "streaming_1s": streaming,
        "stream_model": STREAM_MODEL,
        "instant_threads_pool": threads,
        "worker_pool": pool,
        "worker_concurrency": slots,
        "bare_celery": baselines,
        "bare_celery_same_pool": same,
        "instant_vs_bare_pct": round(100 * (instant["jobs_per_s"] or 0) / same_jobs_s, 1)
        if same_jobs_s
        else None,
        "cpu_per_job_vs_bare_task": _cpu_ratio(instant, same),
    }
