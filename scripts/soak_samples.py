"""What `make soak` samples while it runs: memory, CPU time by role and the latencies of the
last interval, of the processes under test."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

import psutil
import redis

from bench import gcpauses
from scripts.localredis import LocalRedis
from scripts.soak_load import Interval, Load, ms, percentile
from scripts.soak_verdicts import MiB
from tests.procs import Proc


@dataclass
class Stack:
    """The processes under test and their helpers."""

    server: LocalRedis
    fakellm: Proc
    web: Proc
    workers: list[Proc]
    url: str
    worker_metrics: list[str] = field(default_factory=list)

    def gc_buckets(self) -> dict[str, dict[str, Any]]:
        """By metric (the pauses, their CPU time), each process's buckets now: the web's (all
        its processes), each worker's; one scrape a process."""
        web = gcpauses.fetch(self.url + "/metrics")
        workers = [gcpauses.fetch(url) for url in self.worker_metrics]

        def of(text: str | None, metric: str) -> gcpauses.Buckets | None:
            return None if text is None else gcpauses.parse(text, metric)

        return {
            metric: {"web": of(web, metric), "workers": [of(text, metric) for text in workers]}
            for metric in gcpauses.METRICS
        }

    def cpu_pids(self) -> dict[str, list[int]]:
        """The processes whose CPU time is recorded, by role."""
        assert self.server.process is not None
        web = [self.web.pid]  # the gunicorn master, and its workers below
        with contextlib.suppress(psutil.NoSuchProcess):
            web += [c.pid for c in psutil.Process(self.web.pid).children()]
        return {
            "web": web,
            "workers": [w.pid for w in self.workers],
            "redis": [self.server.process.pid],
            "fakellm": [self.fakellm.pid],
            "load_generator": [os.getpid()],
        }


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


def redis_memory(client: redis.Redis) -> dict[str, int]:
    info = client.info("memory")
    return {
        "used_memory": int(info["used_memory"]),
        "used_memory_rss": int(info["used_memory_rss"]),
        "keys": int(client.dbsize()),
    }


def _sample(
    t0: float, stack: Stack, client: redis.Redis, load: Load, interval: Interval
) -> dict[str, Any]:
    web_master, web_serving = _rss(stack.web.pid)
    return {
        "t_s": round(time.monotonic() - t0, 1),
        "web_rss": web_serving,
        "web_master_rss": web_master,
        "worker_rss": [_rss(w.pid)[1] for w in stack.workers],
        "redis": redis_memory(client),
        "cpu_s": {role: round(_cpu_s(pids), 2) for role, pids in stack.cpu_pids().items()},
        "submitted": load.submitted,
        "completed": load.completed,
        "in_flight": load.in_flight,
        "skipped": load.skipped,
        "errors": sum(load.errors.values()),
        "finished_in_interval": len(interval.e2e_s),
        "submit_p50_ms": ms(percentile(interval.submit_s, 0.50)),
        "submit_p99_ms": ms(percentile(interval.submit_s, 0.99)),
        "e2e_p50_s": percentile(interval.e2e_s, 0.50),
        "e2e_p99_s": percentile(interval.e2e_s, 0.99),
        "wake_p50_ms": ms(percentile(interval.wake_s, 0.50)),
        "wake_p99_ms": ms(percentile(interval.wake_s, 0.99)),
    }


async def sampler(
    t0: float,
    every_s: float,
    stack: Stack,
    client: redis.Redis,
    load: Load,
    samples: list[dict[str, Any]],
    stop: asyncio.Event,
) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
        sample = await asyncio.to_thread(_sample, t0, stack, client, load, load.take())
        samples.append(sample)
        _progress(sample)


def _progress(s: dict[str, Any]) -> None:
    print(
        f"[{s['t_s']:7.1f}s] submitted {s['submitted']:7d} completed {s['completed']:7d} "
        f"waiting {s['in_flight']:5d} errors {s['errors']:4d} | web {s['web_rss'] / MiB:6.1f} "
        f"MiB workers {'/'.join(f'{r / MiB:.1f}' for r in s['worker_rss'])} MiB redis "
        f"{s['redis']['used_memory'] / MiB:6.1f} MiB | submit p99 {s['submit_p99_ms']} ms "
        f"e2e p99 {s['e2e_p99_s'] and round(s['e2e_p99_s'], 2)} s "
        f"wake p99 {s['wake_p99_ms']} ms",
        flush=True,
    )
