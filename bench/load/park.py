"""Many idle long-polls held at once; each answer's arrival time is recorded per job (with
`wall`, also the wall-clock receive time and the job's `completed_at`)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp

from bench.load.progress import say


def _url(spec: dict[str, Any], job_id: str) -> str:
    if spec["kind"] == "chatq":
        return f"{spec['base']}/v1/jobs/{job_id}?wait={spec['wait_s']}"
    return f"{spec['base']}/wait/{job_id}?timeout={spec['wait_s']}"


def _ended_at(body: bytes) -> float | None:
    """The job's `completed_at` (Unix seconds, Redis's clock) from a chatq job object."""
    try:
        value = json.loads(body).get("completed_at")
    except (ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) else None


async def _one(
    s: aiohttp.ClientSession, spec: dict[str, Any], job_id: str, got: dict[str, list[Any]]
) -> None:
    headers = {"Authorization": f"Bearer {spec['key']}"}
    try:
        async with s.get(_url(spec, job_id), headers=headers) as resp:
            body = await resp.read()
            got[job_id] = [time.monotonic(), resp.status, b'"completed"' in body or b'"ok"' in body]
            if spec.get("wall"):  # the receive time on the clock `completed_at` is on
                got[job_id] += [time.time(), _ended_at(body)]
    except (TimeoutError, aiohttp.ClientError) as exc:
        got[job_id] = [time.monotonic(), 0, False, type(exc).__name__]


async def park(s: aiohttp.ClientSession, spec: dict[str, Any], sent: list[int]) -> dict[str, Any]:
    """Open one request per job id, `ramp_per_s` at most, say SENT when all are out, collect."""
    got: dict[str, list[Any]] = {}
    ids: list[str] = spec["ids"]
    batch = max(1, int(spec.get("ramp_per_s", 2000) / 20))
    tasks = []
    for i in range(0, len(ids), batch):
        tasks += [asyncio.ensure_future(_one(s, spec, j, got)) for j in ids[i : i + batch]]
        await asyncio.sleep(0.05)
    deadline = time.monotonic() + 60
    while sent[0] < len(ids) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    say(f"SENT {sent[0]}")
    await asyncio.gather(*tasks)
    return {"answers": got}


def counting_trace(sent: list[int]) -> aiohttp.TraceConfig:
    """A trace that counts requests whose headers have gone out."""
    trace = aiohttp.TraceConfig()

    async def on_sent(*_: Any) -> None:
        sent[0] += 1

    trace.on_request_headers_sent.append(on_sent)
    return trace
