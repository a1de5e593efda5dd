"""The soak's clients: jobs started at a steady rate, each long-polled to its end."""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tests.procs import ALICE_KEY

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
        """What the clients saw since the last call; a new interval starts."""
        taken, self.interval = self.interval, Interval()
        return taken


def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile (0-1, nearest rank) of `values`; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def ms(value: float | None) -> float | None:
    """Seconds as milliseconds, one decimal."""
    return None if value is None else round(value * 1000, 1)


async def _one_job(http: aiohttp.ClientSession, url: str, body: dict[str, Any], load: Load) -> None:
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
            async with http.get(
                f"{url}/v1/jobs/{job['id']}", headers=headers, params={"wait": str(POLL_WAIT_S)}
            ) as r:
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


async def drive(
    url: str, rate: float, seconds: float, model: str, max_in_flight: int, load: Load
) -> None:
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
