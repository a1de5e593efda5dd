"""`make soak`: a long steady load on a whole chatq, watching for leaks and drift.

    .venv/bin/python -m scripts.soak                      # 30 min, 100 jobs/s, 1,000 waiters
    .venv/bin/python -m scripts.soak --minutes 2 --rate 20 --waiters 200

It starts its own Redis, fakellm, workers and web (all on 127.0.0.1), then submits jobs at a
steady rate; the client of each job long-polls it until it ends, so that about `waiters`
long-polls are parked at any time (each job takes waiters / rate seconds upstream). Every
`--sample-seconds` it records the RSS of the web and of each worker, Redis's memory, the CPU
time of every process (reported as CPU milliseconds per job, by role), and the latencies of
the last interval (submit, submit to end as the client saw it, and how late the
waiter was woken after the job ended). After the load it waits for the job TTL to pass and
records Redis's memory again.

Verdicts (the script exits 1 if one fails): RSS of web and workers flat within 10 % after the
warm-up; Redis memory back to its baseline once the job TTLs passed; p99 latency steady (the
last tenth's p99 within 1.5x the first tenth's after warm-up); no errors. Everything goes to a
JSON file (`--out`), and a summary is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import redis

from chatq import keys
from scripts.localredis import LocalRedis, free_port
from tests.procs import ALICE_KEY, Proc, base_env, start_fakellm, start_web, wait_until

ROOT = Path(__file__).resolve().parents[1]
MiB = 1024 * 1024
RSS_TOLERANCE = 0.10
P99_TOLERANCE = 1.5
REDIS_SLACK_BYTES = 2 * MiB  # per-second stats hashes (300 s) and allocator noise
POLL_WAIT_S = 25


@dataclass
class Interval:
    """What the clients saw since the last sample."""

    submit_s: list[float] = field(default_factory=list)
    e2e_s: list[float] = field(default_factory=list)
    wake_s: list[float] = field(default_factory=list)


@dataclass
class Load:
    """The load generator's counters."""

    submitted: int = 0
    completed: int = 0
    in_flight: int = 0
    skipped: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    interval: Interval = field(default_factory=Interval)

    def take(self) -> Interval:
        taken, self.interval = self.interval, Interval()
        return taken


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 1)


# --- the load ----------------------------------------------------------------------------


async def _one_job(http: aiohttp.ClientSession, url: str, body: dict[str, Any],
                   load: Load) -> None:
    """Submit a job, then long-poll it until it ends, as a simple client would."""
    headers = {"Authorization": f"Bearer {ALICE_KEY}"}
    load.in_flight += 1
    t0 = time.monotonic()
    try:
        async with http.post(f"{url}/v1/jobs", json=body, headers=headers) as r:
            job = await r.json(content_type=None)
            if r.status not in (200, 202):
                load.errors[f"submit {r.status}"] += 1
                return
        load.interval.submit_s.append(time.monotonic() - t0)
        for _ in range(1000):
            if job.get("status") in ("completed", "failed", "cancelled"):
                break
            async with http.get(f"{url}/v1/jobs/{job['id']}", headers=headers,
                                params={"wait": str(POLL_WAIT_S)}) as r:
                job = await r.json(content_type=None)
                if r.status not in (200, 202):
                    load.errors[f"poll {r.status}"] += 1
                    return
        seen_at = time.time()
        load.interval.e2e_s.append(time.monotonic() - t0)
        if job.get("completed_at"):
            load.interval.wake_s.append(max(0.0, seen_at - float(job["completed_at"])))
        if job.get("status") == "completed":
            load.completed += 1
        else:
            load.errors[f"job {job.get('status')}"] += 1
    except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
        load.errors[type(exc).__name__] += 1
    finally:
        load.in_flight -= 1


async def _drive(url: str, rate: float, seconds: float, model: str, max_in_flight: int,
                 load: Load) -> None:
    """Start jobs at a steady `rate` (open loop) for `seconds`."""
    connector = aiohttp.TCPConnector(limit=max_in_flight + 100)
    timeout = aiohttp.ClientTimeout(total=POLL_WAIT_S + 60)
    tasks: set[asyncio.Task[None]] = set()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        start = time.monotonic()
        n = 0
        while (due := start + n / rate) < start + seconds:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            n += 1
            if load.in_flight >= max_in_flight:
                load.skipped += 1  # the system fell behind: counted, never queued up here
                continue
            body = {"model": model, "messages": [{"role": "user", "content": f"soak {n}"}]}
            task = asyncio.create_task(_one_job(http, url, body, load))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            load.submitted += 1
        if tasks:
            await asyncio.wait(tasks, timeout=POLL_WAIT_S + 60)


# --- the measurements --------------------------------------------------------------------


@dataclass
class Stack:
    """The processes under test and their helpers."""

    server: LocalRedis
    fakellm: Proc
    web: Proc
    workers: list[Proc]
    url: str

    def cpu_pids(self) -> dict[str, list[int]]:
        """The processes whose CPU time is recorded, by role."""
        assert self.server.process is not None
        web = [self.web.pid]  # the gunicorn master, and its workers below
        with contextlib.suppress(psutil.NoSuchProcess):
            web += [c.pid for c in psutil.Process(self.web.pid).children()]
        return {"web": web, "workers": [w.pid for w in self.workers],
                "redis": [self.server.process.pid], "fakellm": [self.fakellm.pid],
                "load_generator": [os.getpid()]}


def _rss(pid: int) -> tuple[int, int]:
    """(RSS of the process, largest RSS of its children or itself): a gunicorn master and
    its serving worker, or a worker alone."""
    try:
        proc = psutil.Process(pid)
        own = proc.memory_info().rss
        children = [c.memory_info().rss for c in proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0
    return own, max([own, *children])


def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of these processes (not of their children)."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
    return total


def _redis_memory(client: redis.Redis) -> dict[str, int]:
    info = client.info("memory")
    return {"used_memory": int(info["used_memory"]), "used_memory_rss":
            int(info["used_memory_rss"]), "keys": int(client.dbsize())}


def _sample(t0: float, stack: Stack, client: redis.Redis, load: Load,
            interval: Interval) -> dict[str, Any]:
    web_master, web_serving = _rss(stack.web.pid)
    return {
        "t_s": round(time.monotonic() - t0, 1),
        "web_rss": web_serving,
        "web_master_rss": web_master,
        "worker_rss": [_rss(w.pid)[1] for w in stack.workers],
        "redis": _redis_memory(client),
        "cpu_s": {role: round(_cpu_s(pids), 2) for role, pids in stack.cpu_pids().items()},
        "submitted": load.submitted,
        "completed": load.completed,
        "in_flight": load.in_flight,
        "skipped": load.skipped,
        "errors": sum(load.errors.values()),
        "finished_in_interval": len(interval.e2e_s),
        "submit_p50_ms": _ms(_percentile(interval.submit_s, 0.50)),
        "submit_p99_ms": _ms(_percentile(interval.submit_s, 0.99)),
        "e2e_p50_s": _percentile(interval.e2e_s, 0.50),
        "e2e_p99_s": _percentile(interval.e2e_s, 0.99),
        "wake_p50_ms": _ms(_percentile(interval.wake_s, 0.50)),
        "wake_p99_ms": _ms(_percentile(interval.wake_s, 0.99)),
    }


async def _sampler(t0: float, every_s: float, stack: Stack, client: redis.Redis, load: Load,
                   samples: list[dict[str, Any]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
        sample = await asyncio.to_thread(_sample, t0, stack, client, load, load.take())
        samples.append(sample)
        _progress(sample)


def _progress(s: dict[str, Any]) -> None:
    print(f"[{s['t_s']:7.1f}s] submitted {s['submitted']:7d} completed {s['completed']:7d} "
          f"waiting {s['in_flight']:5d} errors {s['errors']:4d} | web {s['web_rss'] / MiB:6.1f} "
          f"MiB workers {'/'.join(f'{r / MiB:.1f}' for r in s['worker_rss'])} MiB redis "
          f"{s['redis']['used_memory'] / MiB:6.1f} MiB | submit p99 {s['submit_p99_ms']} ms "
          f"e2e p99 {s['e2e_p99_s'] and round(s['e2e_p99_s'], 2)} s "
          f"wake p99 {s['wake_p99_ms']} ms", flush=True)


# --- the verdicts ------------------------------------------------------------------------


def _window(samples: list[dict[str, Any]], start_s: float, end_s: float) -> list[dict[str, Any]]:
    return [s for s in samples if start_s <= s["t_s"] <= end_s]


def _cpu_ms_per_job(steady: list[dict[str, Any]]) -> dict[str, float] | None:
    """CPU milliseconds per completed job, by role, over the steady samples."""
    if len(steady) < 2 or steady[-1]["completed"] == steady[0]["completed"]:
        return None
    jobs_done = steady[-1]["completed"] - steady[0]["completed"]
    per_job = {role: round((steady[-1]["cpu_s"][role] - cpu_s) * 1000 / jobs_done, 2)
               for role, cpu_s in steady[0]["cpu_s"].items()}
    return per_job | {"total": round(sum(per_job.values()), 2)}


def _growth(first: list[float], last: list[float]) -> float | None:
    if not first or not last or statistics.median(first) == 0:
        return None
    return statistics.median(last) / statistics.median(first) - 1


def _verdicts(samples: list[dict[str, Any]], load_s: float, warmup_s: float,
              baseline: dict[str, int], drained: dict[str, int], load: Load) -> dict[str, Any]:
    steady = load_s - warmup_s
    tenth = max(steady / 10, 1.0)
    first = _window(samples, warmup_s, warmup_s + tenth)
    last = _window(samples, load_s - tenth, load_s + 1)
    rss: dict[str, float | None] = {"web": _growth([s["web_rss"] for s in first],
                                                   [s["web_rss"] for s in last])}
    for i in range(len(samples[0]["worker_rss"]) if samples else 0):
        rss[f"worker{i}"] = _growth([s["worker_rss"][i] for s in first],
                                    [s["worker_rss"][i] for s in last])
    p99_first = [s["e2e_p99_s"] for s in first if s["e2e_p99_s"] is not None]
    p99_last = [s["e2e_p99_s"] for s in last if s["e2e_p99_s"] is not None]
    p99_ratio = (max(p99_last) / max(p99_first)) if p99_first and p99_last else None
    redis_excess = drained["used_memory"] - baseline["used_memory"]
    checks = {
        "rss_flat_within_10_percent": all(g is not None and g <= RSS_TOLERANCE
                                          for g in rss.values()),
        "redis_memory_back_to_baseline": redis_excess <= max(REDIS_SLACK_BYTES,
                                                             0.1 * baseline["used_memory"]),
        "p99_latency_steady": p99_ratio is not None and p99_ratio <= P99_TOLERANCE,
        "no_errors": not load.errors and load.skipped == 0,
    }
    steady_samples = _window(samples, warmup_s, load_s + 1)
    return {
        "passed": all(checks.values()),
        "checks": checks,
        "rss_growth_after_warmup": {k: None if v is None else round(v, 4) for k, v in rss.items()},
        "rss_mib_end": {"web": last[-1]["web_rss"] / MiB if last else None,
                        "workers": [r / MiB for r in last[-1]["worker_rss"]] if last else None},
        "redis_used_memory_baseline": baseline["used_memory"],
        "redis_used_memory_peak": max((s["redis"]["used_memory"] for s in samples), default=0),
        "redis_used_memory_drained": drained["used_memory"],
        "redis_keys_drained": drained["keys"],
        "e2e_p99_s_first_tenth": max(p99_first) if p99_first else None,
        "e2e_p99_s_last_tenth": max(p99_last) if p99_last else None,
        "e2e_p99_s_worst_interval": max((s["e2e_p99_s"] for s in steady_samples
                                         if s["e2e_p99_s"] is not None), default=None),
        "submit_p99_ms_worst_interval": max((s["submit_p99_ms"] for s in steady_samples
                                             if s["submit_p99_ms"] is not None), default=None),
        "wake_p99_ms_worst_interval": max((s["wake_p99_ms"] for s in steady_samples
                                           if s["wake_p99_ms"] is not None), default=None),
        "max_waiting": max((s["in_flight"] for s in samples), default=0),
        "cpu_ms_per_job": _cpu_ms_per_job(steady_samples),
        "submitted": load.submitted,
        "completed": load.completed,
        "skipped": load.skipped,
        "errors": dict(load.errors),
    }


# --- the run -----------------------------------------------------------------------------


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="load duration (default 30)")
    p.add_argument("--rate", type=float, default=100.0, help="jobs per second (default 100)")
    p.add_argument("--waiters", type=int, default=1000,
                   help="long-polls parked at once; each job lasts waiters/rate s (default 1000)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--ttl", type=int, default=120, help="CHATQ_JOB_TTL in s (default 120)")
    p.add_argument("--warmup-fraction", type=float, default=0.2,
                   help="share of the load ignored by the verdicts (default 0.2)")
    p.add_argument("--sample-seconds", type=float, default=5.0, help="sampling interval")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON file (default .run/soak/soak-<time>.json)")
    args = p.parse_args(argv)
    if args.minutes <= 0 or args.rate <= 0 or args.waiters < 1 or args.workers < 1:
        p.error("--minutes, --rate, --waiters and --workers must be positive")
    return args


def _start_worker(env: dict[str, str], client: redis.Redis) -> Proc:
    """A worker, ready once its monitor's first heartbeat is in Redis (at WARNING it never
    logs the "ready." that tests.procs.start_worker waits for)."""
    before = client.hlen(keys.workers())
    env = {**env, "CHATQ_WORKER_METRICS_BIND": f"127.0.0.1:{free_port()}"}
    proc = Proc("worker", ["worker"], env).start()
    wait_until(lambda: client.hlen(keys.workers()) > before, 30, "worker heartbeat")
    return proc


def _start(args: argparse.Namespace, job_s: float) -> Stack:
    server = LocalRedis().start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    fakellm, upstream = start_fakellm()
    slots = math.ceil(args.rate * job_s * 1.3 / args.workers) + 20
    # WARNING: one INFO line per request and per job transition would be GiBs in 30 min.
    env = base_env(server.url, upstream, CHATQ_JOB_TTL=str(args.ttl),
                   CHATQ_WORKER_CONCURRENCY=str(slots), CHATQ_LOG_LEVEL="WARNING",
                   CHATQ_MAX_QUEUE_DEPTH="0")
    workers = [_start_worker(env, client) for _ in range(args.workers)]
    web, url = start_web(env)
    return Stack(server, fakellm, web, workers, url)


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
    baseline = _redis_memory(client)
    print(f"soak: {args.rate:g} jobs/s for {args.minutes:g} min, jobs of {job_s:g} s "
          f"(~{args.waiters} waiters), {len(stack.workers)} workers; Redis baseline "
          f"{baseline['used_memory'] / MiB:.1f} MiB", flush=True)
    stop, t0 = asyncio.Event(), time.monotonic()
    sampler = asyncio.create_task(_sampler(t0, args.sample_seconds, stack, client, load,
                                           samples, stop))
    model = f"fake:ttft={job_s:g},tokens=20"
    await _drive(stack.url, args.rate, load_s, model, max(2 * args.waiters, 100), load)
    stop.set()
    await sampler
    print(f"load done; waiting {args.ttl + 30} s for the job TTL to pass", flush=True)
    drained = await _drain(client, args.ttl + 30, t0, drain)
    summary = _verdicts(samples, load_s, load_s * args.warmup_fraction, baseline, drained, load)
    return {"config": {**vars(args), "out": str(args.out), "job_s": job_s, "url": stack.url},
            "baseline": baseline, "samples": samples, "drain": drain, "summary": summary,
            "alive": {"web": stack.web.alive(), "workers": [w.alive() for w in stack.workers]}}


async def _drain(client: redis.Redis, seconds: float, t0: float,
                 drain: list[dict[str, Any]]) -> dict[str, int]:
    end = time.monotonic() + seconds
    memory = _redis_memory(client)
    while time.monotonic() < end:
        await asyncio.sleep(min(5.0, max(0.0, end - time.monotonic())))
        memory = await asyncio.to_thread(_redis_memory, client)
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

