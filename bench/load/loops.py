"""Closed-loop and open-loop (Poisson arrivals) load, over any flow."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import aiohttp

from bench.load.flows import FLOWS, Outcome, Target, guarded


async def _client(
    s: aiohttp.ClientSession,
    flow: str,
    t: Target,
    start: float,
    end: float,
    out: list[Outcome],
    budget: list[int],
) -> None:
    await asyncio.sleep(max(0.0, start - time.monotonic()))
    while time.monotonic() < end and budget[0] > 0:
        budget[0] -= 1
        out.append(await guarded(FLOWS[flow], s, t))


async def closed_loop(s: aiohttp.ClientSession, spec: dict[str, Any]) -> dict[str, Any]:
    """`clients` clients each running jobs back to back for `duration_s` (starts staggered),
    or until `max_jobs` jobs have been started in all."""
    t = Target(**spec["target"])
    now = time.monotonic()
    stagger_s = float(spec.get("stagger_s", 0.5))
    end = now + stagger_s + float(spec["duration_s"])
    budget = [int(spec.get("max_jobs") or 10**9)]
    rng = random.Random(7)
    out: list[Outcome] = []
    tasks = [
        _client(s, spec["flow"], t, now + rng.uniform(0, stagger_s), end, out, budget)
        for _ in range(int(spec["clients"]))
    ]
    await asyncio.gather(*tasks)
    return {"outcomes": [o.as_dict() for o in out], "window": [now + stagger_s, end]}


async def open_loop(s: aiohttp.ClientSession, spec: dict[str, Any]) -> dict[str, Any]:
    """Jobs arriving at `rate_per_s` (Poisson) for `duration_s`; each records its send lag."""
    t = Target(**spec["target"])
    rate, duration_s = float(spec["rate_per_s"]), float(spec["duration_s"])
    rng = random.Random(11)
    start = time.monotonic()
    due, lags, tasks = start, [], []
    while due < start + duration_s:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        lags.append(time.monotonic() - due)
        tasks.append(asyncio.ensure_future(guarded(FLOWS[spec["flow"]], s, t)))
        due += rng.expovariate(rate)
    outcomes = await asyncio.gather(*tasks)
    return {
        "outcomes": [o.as_dict() for o in outcomes],
        "window": [start, start + duration_s],
        "send_lag_max_s": max(lags, default=0.0),
    }
