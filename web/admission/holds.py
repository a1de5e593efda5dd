"""Requests held open, counted per key name in each web process: long-polls (`wait`), held
completions and responses, and Server-Sent Events streams. At most
CHATQ_MAX_HELD_REQUESTS_PER_KEY of one key at once, so that no key takes every connection slot
of a process (CHATQ_WEB_WORKER_CONNECTIONS): over it a long-poll is answered at once with what
it asks for as it is, and a request that only holds (a completion, a stream) gets `429`."""

from __future__ import annotations

import threading
from functools import partial

from flask import Response, g

from chatq.errors import ApiError
from web import http, metrics

# What an answer over the cap tells the client to wait: a slot frees as soon as one of the
# key's held requests ends, which may be any moment.
RETRY_AFTER_S = 1


class HeldCounts:
    """How many requests each key name holds open in this process, and the cap (0: none)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, owner: str) -> bool:
        """Count one more request of `owner`; False (nothing counted) when it is at the cap."""
        with self._lock:
            held = self._counts.get(owner, 0)
            if self.cap and held >= self.cap:
                return False
            self._counts[owner] = held + 1
            return True

    def give(self, owner: str) -> None:
        """One request of `owner` is no longer held."""
        with self._lock:
            held = self._counts.get(owner, 0) - 1
            if held > 0:
                self._counts[owner] = held
            else:
                self._counts.pop(owner, None)

    def release_when_closed(self, response: Response) -> Response:
        """After each request (an app's hook): what it counted is given back when its response
        is closed. One hook for the app rather than one per held request, which would keep a
        closure, a partial and a cell for as long as the request is parked."""
        owner = g.get("chatq_held")
        if owner is not None:
            response.call_on_close(partial(self.give, owner))
        return response

    def count(self, owner: str) -> int:
        """How many requests `owner` holds open now."""
        with self._lock:
            return self._counts.get(owner, 0)


def _take(held: HeldCounts, owner: str) -> bool:
    """Count the current request against `owner`'s cap until its response is closed (a
    stream's too: HeldCounts.release_when_closed); once per request."""
    if g.get("chatq_held"):
        return True
    if not held.take(owner):
        return False
    g.chatq_held = owner
    return True


def poll_wait(held: HeldCounts, owner: str, wait_s: float) -> float:
    """The wait a long-poll of `owner` may have: `wait_s`, or 0 (answered at once, as it is)
    when the key holds its cap of requests open in this process."""
    if wait_s <= 0 or _take(held, owner):
        return wait_s
    g.chatq_unheld = True
    metrics.HELD_OVER_CAP.labels("at_once").inc()
    return 0.0


def hold(held: HeldCounts, owner: str) -> None:
    """Count a request that holds until its job ends (or streams it): `429
    too_many_held_requests` when `owner` holds its cap of requests open in this process."""
    if _take(held, owner):
        return
    metrics.HELD_OVER_CAP.labels("refused").inc()
    raise ApiError(
        429,
        "too_many_held_requests",
        f"This key holds {held.cap} requests open on this server (long-polls, held "
        "completions, streams): let one end, or poll without waiting.",
        type_="requests",
        retry_after_s=RETRY_AFTER_S,
    )


def holds_open(stream: bool, max_wait_s: float) -> bool:
    """Whether a completion or response request holds its connection: a stream does, and so
    does a held one, unless `Prefer` asks it to answer at once (`respond-async`, `wait=0`)."""
    if stream:
        return True
    asked_s, respond_async = http.prefer_wait(), http.prefers_async()
    if asked_s is None and not respond_async:
        return True
    return min(asked_s or 0.0, max_wait_s) > 0


def mark_unheld(response: Response) -> Response:
    """A long-poll answered at once over the cap: its wait was not applied (no
    `Preference-Applied: wait`), and `Retry-After` says when to poll again."""
    if not g.get("chatq_unheld"):
        return response
    applied = response.headers.get(http.PREFERENCE_APPLIED.name, "")
    kept = [p.strip() for p in applied.split(",") if p.strip() and not p.strip().startswith("wait")]
    if kept:
        response.headers[http.PREFERENCE_APPLIED.name] = ", ".join(kept)
    else:
        response.headers.pop(http.PREFERENCE_APPLIED.name, None)
    response.headers[http.RETRY_AFTER.name] = str(RETRY_AFTER_S)
    return response
