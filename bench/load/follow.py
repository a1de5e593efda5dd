"""Clients submitting jobs and following them through the events long-poll, noting when
each word arrives."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import aiohttp

WORD = re.compile(r"s\d{3}w\d{3}")


async def _follow(s: aiohttp.ClientSession, spec: dict[str, Any], request: dict[str, Any],
                  seen: dict[str, float], pages: list[int]) -> None:
    headers = {"Authorization": f"Bearer {spec['key']}"}
    async with s.post(f"{spec['base']}/v1/jobs", json=request, headers=headers) as resp:
        job_id = (await resp.json(content_type=None))["id"]
    url = f"{spec['base']}/v1/jobs/{job_id}/events"
    cursor, done = "", False
    while not done:
        params = {"wait": "30", **({"cursor": cursor} if cursor else {})}
        async with s.get(url, params=params, headers=headers) as resp:
            page = await resp.json(content_type=None)
        now = time.monotonic()
        pages[0] += 1
        for event in page.get("events", []):
            for word in WORD.findall(event.get("delta", "")):
                seen.setdefault(word, now)
        cursor, done = page.get("cursor", cursor), bool(page.get("done", True))


async def follow(s: aiohttp.ClientSession, spec: dict[str, Any]) -> dict[str, Any]:
    """Submit each of `requests` and follow it to its end; answer word -> arrival time."""
    seen: dict[str, float] = {}
    pages = [0]
    await asyncio.gather(*(_follow(s, spec, r, seen, pages) for r in spec["requests"]))
    return {"arrivals": seen, "pages": pages[0]}
