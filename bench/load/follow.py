"""Clients submitting jobs and following them, through the events long-poll or its SSE view,
noting when each word arrives."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import aiohttp

WORD = re.compile(r"s\d{3}w\d{3}")


def _note(event: dict[str, Any], seen: dict[str, float], now: float) -> None:
    for word in WORD.findall(event.get("delta", "")):
        seen.setdefault(word, now)


async def _submit(
    s: aiohttp.ClientSession, spec: dict[str, Any], request: dict[str, Any], headers: dict[str, str]
) -> str:
    async with s.post(f"{spec['base']}/v1/jobs", json=request, headers=headers) as resp:
        return str((await resp.json(content_type=None))["id"])


async def _by_long_poll(
    s: aiohttp.ClientSession,
    url: str,
    headers: dict[str, str],
    seen: dict[str, float],
    pages: list[int],
) -> None:
    """GET …/events?cursor=C&wait=30 again and again until `done`."""
    cursor, done = "", False
    while not done:
        params = {"wait": "30", **({"cursor": cursor} if cursor else {})}
        async with s.get(url, params=params, headers=headers) as resp:
            page = await resp.json(content_type=None)
        now = time.monotonic()
        pages[0] += 1
        for event in page.get("events", []):
            _note(event, seen, now)
        cursor, done = page.get("cursor", cursor), bool(page.get("done", True))


async def _by_sse(
    s: aiohttp.ClientSession,
    url: str,
    headers: dict[str, str],
    seen: dict[str, float],
    pages: list[int],
) -> None:
    """One GET …/events with `Accept: text/event-stream`, read line by line to its end."""
    pages[0] += 1
    async with s.get(url, headers={**headers, "Accept": "text/event-stream"}) as resp:
        async for raw in resp.content:
            line = raw.decode().rstrip("\r\n")
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            _note(event, seen, time.monotonic())
            if event.get("type") == "end":
                return


async def _follow(
    s: aiohttp.ClientSession,
    spec: dict[str, Any],
    request: dict[str, Any],
    seen: dict[str, float],
    pages: list[int],
) -> None:
    headers = {"Authorization": f"Bearer {spec['key']}"}
    job_id = await _submit(s, spec, request, headers)
    url = f"{spec['base']}/v1/jobs/{job_id}/events"
    reader = _by_sse if spec.get("via") == "sse" else _by_long_poll
    await reader(s, url, headers, seen, pages)


async def follow(s: aiohttp.ClientSession, spec: dict[str, Any]) -> dict[str, Any]:
    """Submit each of `requests` and follow it to its end; answer word -> arrival time."""
    seen: dict[str, float] = {}
    pages = [0]
    await asyncio.gather(*(_follow(s, spec, r, seen, pages) for r in spec["requests"]))
    return {"arrivals": seen, "pages": pages[0]}
