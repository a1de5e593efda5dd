"""Choosing an upstream endpoint: by health and a decaying average of its latency.

Cooldowns are kept in Redis, so every worker process agrees on which endpoint is failing;
the latency averages are each process's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import redis

from chatq import keys
from chatq.topology import BACKEND_ERRORS
from worker import metrics

EWMA_WEIGHT = 0.2
COOLDOWN_CACHE_S = 1.0
FAILURE_WINDOW_S = 60


def endpoint_id(url: str) -> str:
    """A short stable id for an endpoint URL (keys never hold the URL itself)."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def endpoint_label(url: str) -> str:
    """The metrics label of an endpoint: its host and port, never credentials or path."""
    parts = urlsplit(url)
    return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else "?"


class Endpoints:
    """The configured upstream endpoints, with this process's view of their latency."""

    def __init__(
        self, urls: tuple[str, ...], client: redis.Redis, cooldown_s: float, cooldown_after: int
    ) -> None:
        self.urls = urls
        self.redis = client
        self.cooldown_s = cooldown_s
        self.cooldown_after = cooldown_after
        self._latency_s: dict[str, float] = {}
        self._failing: set[str] = set()
        self._cooling: tuple[float, frozenset[str]] = (0.0, frozenset())
        self._lock = threading.Lock()

    def choose(self, avoid: set[str]) -> str:
        """The healthy endpoint with the lowest latency average, not in `avoid` if possible."""
        if len(self.urls) == 1:
            return self.urls[0]
        cooling = self._cooling_now()
        for excluded in (cooling | avoid, cooling, avoid, frozenset()):
            candidates = [u for u in self.urls if u not in excluded]
            if candidates:
                break
        random.shuffle(candidates)
        return min(candidates, key=lambda u: self._latency_s.get(u, 0.0))

    def observe(self, url: str, latency_s: float) -> None:
        """Fold one successful call's time to first token into the average."""
        with self._lock:
            old = self._latency_s.get(url)
            self._latency_s[url] = (
                latency_s if old is None else (EWMA_WEIGHT * latency_s + (1 - EWMA_WEIGHT) * old)
            )
        if url in self._failing:
            self._failing.discard(url)
            self._guard(lambda: self.redis.delete(keys.upstream_failures(endpoint_id(url))))

    def failed(self, url: str) -> None:
        """Count a connection error or 5xx; enough in a row start the endpoint's cooldown."""
        self._failing.add(url)
        ep = endpoint_id(url)

        def record() -> None:
            pipe = self.redis.pipeline(transaction=False)
            pipe.incr(keys.upstream_failures(ep))
            pipe.expire(keys.upstream_failures(ep), FAILURE_WINDOW_S)
            count = int(pipe.execute()[0])
            if count >= self.cooldown_after:
                started = self.redis.set(
                    keys.cooldown(ep), "1", nx=True, px=int(self.cooldown_s * 1000)
                )
                self.redis.delete(keys.upstream_failures(ep))
                if started:
                    metrics.UPSTREAM_COOLDOWNS.labels(endpoint_label(url)).inc()
                self._cooling = (0.0, frozenset())

        self._guard(record)

    def _cooling_now(self) -> frozenset[str]:
        checked_at, cooling = self._cooling
        if time.monotonic() - checked_at < COOLDOWN_CACHE_S:
            return cooling
        found: list[object] = []
        self._guard(
            lambda: found.extend(
                self.redis.mget([keys.cooldown(endpoint_id(u)) for u in self.urls])
            )
        )
        cooling = frozenset(u for u, flag in zip(self.urls, found, strict=False) if flag)
        self._cooling = (time.monotonic(), cooling)
        return cooling

    @staticmethod
    def _guard(action: Callable[[], object]) -> None:
        # Endpoint health is advice: without Redis, calls go on with what we know.
        with contextlib.suppress(*BACKEND_ERRORS):
            action()
