"""One job as each kind of client runs it; each answers an Outcome with its timing."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

JSON = dict[str, Any]


@dataclass
class Target:
    """Where a flow sends its requests and with what."""

    base: str
    key: str
    body: JSON
    wait_s: float = 30.0
    poll_s: float = 1.0
    hold_s: float = 1.0  # how long the flask_view flow's view waits


@dataclass
class Outcome:
    """How one job went, seen from the client (times are time.monotonic())."""

    t0: float
    t1: float = 0.0
    requests: int = 0
    ok: bool = False
    code: int = 0
    t0_wall: float = field(default_factory=time.time)
    created: float | None = None
    started: float | None = None
    completed: float | None = None
    t1_wall: float = 0.0
    error: str = ""

    def as_dict(self) -> JSON:
        """A JSON-ready copy."""
        return asdict(self)


Flow = Callable[[aiohttp.ClientSession, Target], Awaitable[Outcome]]


def _auth(target: Target) -> dict[str, str]:
    return {"Authorization": f"Bearer {target.key}"}


def _finish(out: Outcome, code: int, body: JSON | None, ok: bool) -> Outcome:
    out.t1, out.t1_wall, out.code, out.ok = time.monotonic(), time.time(), code, ok
    if body and "started_at" in body:
        out.created, out.started = body.get("created_at"), body.get("started_at")
        out.completed = body.get("completed_at")
    return out


async def _json(resp: aiohttp.ClientResponse) -> JSON:
    return dict(await resp.json(content_type=None))


async def chatq_longpoll(s: aiohttp.ClientSession, t: Target) -> Outcome:
    """POST /v1/jobs?wait=N, then GET ?wait=N while 202: chatq's long-poll."""
    out = Outcome(time.monotonic(), requests=1)
    url = f"{t.base}/v1/jobs"
    async with s.post(url, params={"wait": t.wait_s}, json=t.body, headers=_auth(t)) as r:
        code, body = r.status, await _json(r)
    while code == 202:
        out.requests += 1
        get_url = f"{t.base}/v1/jobs/{body['id']}"
        async with s.get(get_url, params={"wait": t.wait_s}, headers=_auth(t)) as r:
            code, body = r.status, await _json(r)
    return _finish(out, code, body, code == 200 and body.get("status") == "completed")


# A client that gets its answer in the end: it submits a failed job again, backing off as the
# OpenAI SDKs do between their retries (0.5 s doubling to 8 s, less up to a quarter).
RESUBMITS = 30
RESUBMIT_FIRST_S, RESUBMIT_MAX_S = 0.5, 8.0


async def chatq_resubmit(s: aiohttp.ClientSession, t: Target) -> Outcome:
    """chatq's long-poll, the job submitted again after each failure until one completes;
    the outcome's time runs from the first submit and counts every request."""
    first = out = await chatq_longpoll(s, t)
    for n in range(RESUBMITS):
        if out.ok:
            break
        backoff_s = min(RESUBMIT_MAX_S, RESUBMIT_FIRST_S * 2**n)
        await asyncio.sleep(backoff_s * (1 - 0.25 * random.random()))
        again = await chatq_longpoll(s, t)
        again.t0, again.t0_wall = first.t0, first.t0_wall
        again.requests += out.requests
        out = again
    return out


async def short_poll(s: aiohttp.ClientSession, t: Target) -> Outcome:
    """POST /v1/jobs, then GET /v1/jobs/{id} (no wait) every `poll_s` until it is done.

    The first poll comes after a random fraction of `poll_s`: a client's polling phase is
    not tied to when its job ends, so on average half an interval is added, not a whole one.
    """
    out = Outcome(time.monotonic(), requests=1)
    async with s.post(f"{t.base}/v1/jobs", json=t.body, headers=_auth(t)) as r:
        code, body = r.status, await _json(r)
    delay_s = random.uniform(0, t.poll_s)
    while code == 202:
        await asyncio.sleep(delay_s)
        delay_s = t.poll_s
        out.requests += 1
        async with s.get(f"{t.base}/v1/jobs/{body['id']}", headers=_auth(t)) as r:
            code, body = r.status, await _json(r)
    return _finish(out, code, body, code == 200 and body.get("status") == "completed")


async def flask_celery(s: aiohttp.ClientSession, t: Target) -> Outcome:
    """POST /chat to the Flask + Celery app, whose view blocks on AsyncResult.get()."""
    out = Outcome(time.monotonic(), requests=1)
    async with s.post(f"{t.base}/chat", json=t.body) as r:
        code, body = r.status, await _json(r)
    return _finish(out, code, None, code == 200 and "choices" in body)


async def flask_view(s: aiohttp.ClientSession, t: Target) -> Outcome:
    """POST /hold to the Flask app: a view that waits `hold_s`, as long as the upstream would,
    with no queue behind it."""
    out = Outcome(time.monotonic(), requests=1)
    async with s.post(f"{t.base}/hold", params={"seconds": t.hold_s}, json=t.body) as r:
        code, body = r.status, await _json(r)
    return _finish(out, code, None, code == 200 and body.get("held") is True)


async def front_door(s: aiohttp.ClientSession, t: Target) -> Outcome:
    """POST /v1/chat/completions (stream false) to chatq or, with the upstream key, fakellm."""
    out = Outcome(time.monotonic(), requests=1)
    async with s.post(f"{t.base}/v1/chat/completions", json=t.body, headers=_auth(t)) as r:
        code, body = r.status, await _json(r)
    return _finish(out, code, None, code == 200 and "choices" in body)


FLOWS: dict[str, Flow] = {
    "chatq": chatq_longpoll,
    "chatq_resubmit": chatq_resubmit,
    "short_poll": short_poll,
    "flask": flask_celery,
    "flask_view": flask_view,
    "front_door": front_door,
}


async def guarded(flow: Flow, s: aiohttp.ClientSession, t: Target) -> Outcome:
    """Run a flow; a network error or timeout becomes a failed Outcome, never an exception."""
    t0 = time.monotonic()
    try:
        return await flow(s, t)
    except (TimeoutError, aiohttp.ClientError, ValueError, KeyError) as exc:
        return Outcome(t0, time.monotonic(), 1, False, 0, error=type(exc).__name__)
