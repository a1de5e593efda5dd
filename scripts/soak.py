"""`make soak`: a long steady load on a whole chatq, watching for leaks and drift.

    .venv/bin/python -m scripts.soak                      # 30 min, 100 jobs/s, 1,000 waiters
    .venv/bin/python -m scripts.soak --minutes 2 --rate 20 --waiters 200
    .venv/bin/python -m scripts.soak --preset gc          # the GC check: 10 min at 50 jobs/s

It starts its own Redis, fakellm, workers and web (all on 127.0.0.1), then submits jobs at a
steady rate; the client of each job long-polls it until it ends, so that about `waiters`
long-polls are parked at any time (each job takes waiters / rate seconds upstream). Every
`--sample-seconds` it records the RSS of the web and of each worker, Redis's memory, the CPU
time of every process (reported as CPU milliseconds per job, by role), and the latencies of
the last interval (submit, submit to end as the client saw it, and how late the
waiter was woken after the job ended). After the load it waits for the job TTL to pass and
records Redis's memory again. It also reports the longest garbage-collector pause of the web
and of each worker over the load, bounded by the buckets of their `chatq_gc_pause_seconds`
histograms (bench/gcpauses.py), and the completion rate as jobs/s per core of this machine.

Verdicts (the script exits 1 if one fails): RSS of web and workers flat within 10 % after the
warm-up; Redis memory back to its baseline once the job TTLs passed; p99 latency steady (the
last tenth's p99 within 1.5x the first tenth's after warm-up); no errors. Everything goes to a
JSON file (`--out`), and a summary is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import redis

from bench import gcpauses, meta
from chatq import keys
from scripts.localredis import LocalRedis, free_port
from scripts.soak_load import Load, drive
from scripts.soak_samples import Stack, redis_memory, sampler
from scripts.soak_verdicts import MiB, gc_longest, rates, verdicts
from tests.procs import Proc, base_env, start_fakellm, start_web, wait_until

ROOT = Path(__file__).resolve().parents[1]
PRESETS = {"gc": {"minutes": 10.0, "rate": 50.0}}  # issue 12: GC pauses, 10 min at 50 jobs/s


# --- the run -----------------------------------------------------------------------------


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="load duration (default 30)")
    p.add_argument("--rate", type=float, default=100.0, help="jobs per second (default 100)")
    p.add_argument(
        "--waiters",
        type=int,
        default=1000,
        help="long-polls parked at once; each job lasts waiters/rate s (default 1000)",
    )
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--ttl", type=int, default=120, help="CHATQ_JOB_TTL in s (default 120)")
    p.add_argument(
        "--warmup-fraction",
        type=float,
        default=0.2,
        help="share of the load ignored by the verdicts (default 0.2)",
    )
    p.add_argument("--sample-seconds", type=float, default=5.0, help="sampling interval")
    p.add_argument(
        "--out", type=Path, default=None, help="JSON file (default .run/soak/soak-<time>.json)"
    )
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="gc: --minutes 10 --rate 50 (over those two options)",
    )
    args = p.parse_args(argv)
    for name, value in PRESETS.get(args.preset or "", {}).items():
        setattr(args, name, value)
    if args.minutes <= 0 or args.rate <= 0 or args.waiters < 1 or args.workers < 1:
        p.error("--minutes, --rate, --waiters and --workers must be positive")
    return args


def _start_worker(env: dict[str, str], client: redis.Redis) -> tuple[Proc, str]:
    """A worker, ready once its monitor's first heartbeat is in Redis (at WARNING it never
    logs the "ready." that tests.procs.start_worker waits for); (process, metrics URL)."""
    before = client.hlen(keys.workers())
    bind = f"127.0.0.1:{free_port()}"
    proc = Proc("worker", ["worker"], {**env, "CHATQ_WORKER_METRICS_BIND": bind}).start()
    wait_until(lambda: client.hlen(keys.workers()) > before, 30, "worker heartbeat")
    return proc, f"http://{bind}/metrics"


def _start(args: argparse.Namespace, job_s: float) -> Stack:
    server = LocalRedis().start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    fakellm, upstream = start_fakellm()
    slots = math.ceil(args.rate * job_s * 1.3 / args.workers) + 20
    # WARNING: one INFO line per request and per job transition would be GiBs in 30 min.
    env = base_env(
        server.url,
        upstream,
        CHATQ_JOB_TTL=str(args.ttl),
        CHATQ_WORKER_CONCURRENCY=str(slots),
        CHATQ_LOG_LEVEL="WARNING",
        CHATQ_MAX_QUEUE_DEPTH="0",
    )
    workers = [_start_worker(env, client) for _ in range(args.workers)]
    web, url = start_web(env)
    return Stack(server, fakellm, web, [w for w, _ in workers], url, [m for _, m in workers])


async def _run(args: argparse.Namespace) -> int:
    stack = _start(args, args.waiters / args.rate)
    try:
        result = await _measure(args, stack)
    finally:
        for proc in [stack.web, *stack.workers, stack.fakellm]:
            proc.stop()
        stack.server.stop()
    out = args.out or ROOT / ".run" / "soak" / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    _print_summary(result["summary"], out)
    return 0 if result["summary"]["passed"] else 1


async def _measure(args: argparse.Namespace, stack: Stack) -> dict[str, Any]:
    """The load, the samples taken during it, the drain after it, and the verdicts."""
    job_s, load_s = args.waiters / args.rate, args.minutes * 60
    client = redis.Redis.from_url(stack.server.url, decode_responses=True)
    samples: list[dict[str, Any]] = []
    drain: list[dict[str, Any]] = []
    load = Load()
    await asyncio.sleep(2)
    baseline = redis_memory(client)
    print(
        f"soak: {args.rate:g} jobs/s for {args.minutes:g} min, jobs of {job_s:g} s "
        f"(~{args.waiters} waiters), {len(stack.workers)} workers; Redis baseline "
        f"{baseline['used_memory'] / MiB:.1f} MiB",
        flush=True,
    )
    stop, t0 = asyncio.Event(), time.monotonic()
    sampling = asyncio.create_task(
        sampler(t0, args.sample_seconds, stack, client, load, samples, stop)
    )
    model = f"fake:ttft={job_s:g},tokens=20"
    gc_before = await asyncio.to_thread(stack.gc_buckets)
    await drive(stack.url, args.rate, load_s, model, max(2 * args.waiters, 100), load)
    gc_after = await asyncio.to_thread(stack.gc_buckets)
    stop.set()
    await sampling
    print(f"load done; waiting {args.ttl + 30} s for the job TTL to pass", flush=True)
    drained = await _drain(client, args.ttl + 30, t0, drain)
    summary = verdicts(samples, load_s, load_s * args.warmup_fraction, baseline, drained, load)
    summary.update(
        rates(samples, load_s * args.warmup_fraction, load_s),
        gc_pause_longest=gc_longest(gc_before[gcpauses.METRIC], gc_after[gcpauses.METRIC]),
        gc_pause_cpu_longest=gc_longest(
            gc_before[gcpauses.CPU_METRIC], gc_after[gcpauses.CPU_METRIC]
        ),
        commit=meta.describe("python -m scripts.soak")["commit"],
    )
    return {
        "config": {**vars(args), "out": str(args.out), "job_s": job_s, "url": stack.url},
        "baseline": baseline,
        "samples": samples,
        "drain": drain,
        "summary": summary,
        "alive": {"web": stack.web.alive(), "workers": [w.alive() for w in stack.workers]},
    }


async def _drain(
    client: redis.Redis, seconds: float, t0: float, drain: list[dict[str, Any]]
) -> dict[str, int]:
    end = time.monotonic() + seconds
    memory = redis_memory(client)
    while time.monotonic() < end:
        await asyncio.sleep(min(5.0, max(0.0, end - time.monotonic())))
        memory = await asyncio.to_thread(redis_memory, client)
        drain.append({"t_s": round(time.monotonic() - t0, 1), **memory})
    return memory


def _print_summary(summary: dict[str, Any], out: Path) -> None:
    print("\n=== soak summary ===")
    for name, ok in summary["checks"].items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    for key, value in summary.items():
        if key not in ("checks", "passed"):
            print(f"  {key}: {json.dumps(value)}")
    print(f"  -> {out}")


def main(argv: list[str] | None = None) -> int:
    """Run the soak; 0 when every verdict passed."""
    args = _parse(argv)
    return asyncio.run(_run(args))


if __name__ == "__main__":
    sys.exit(main())
