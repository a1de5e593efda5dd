"""Admission control: per-key rate limits kept in Redis, and a cap on queue depth."""

from __future__ import annotations

import contextlib
import math
import time

import redis
from limits import RateLimitItem, parse_many
from limits.storage import RedisStorage
from limits.strategies import SlidingWindowCounterRateLimiter

from chatq import queue_stats
from chatq.broker import Broker, RedisBroker
from chatq.config import ConfigError, Settings
from chatq.errors import ApiError
from chatq.rabbit import BrokerUnavailable
from chatq.redis_conn import tls_options
from web import metrics

MAX_RETRY_AFTER_S = 60
# Queue depth is read at most this often per process: a submit costs no round trip for it.
DEPTH_MAX_AGE_S = 0.1


def _parse(limit: str, name: str) -> list[RateLimitItem]:
    try:
        return list(parse_many(limit))
    except ValueError as exc:
        raise ConfigError(f"{name}: {limit!r} is not a rate limit like 600/minute") from exc


class Admission:
    """Says "not now, retry in N s" before a request adds load the system cannot take."""

    def __init__(self, settings: Settings, client: redis.Redis,
                 broker: Broker | None = None) -> None:
        self.redis = client
        self.broker = broker or RedisBroker(client)
        self.max_queue_depth = settings.max_queue_depth
        limit = settings.rate_limit
        self.default = _parse(limit, "CHATQ_RATE_LIMIT") if limit else []
        self.overrides = {
            name: _parse(limit, "CHATQ_RATE_LIMIT_OVERRIDES")
            for name, limit in settings.rate_limit_overrides
        }
        self._depth = 0
        self._depth_read_at = -math.inf
        self.limiter: SlidingWindowCounterRateLimiter | None = None
        if self.default or self.overrides:
            tls = tls_options(settings.redis_url, settings.redis_ca_file)
            storage = RedisStorage(settings.redis_url, key_prefix="chatq:ratelimit",
                                   socket_timeout=5.0, socket_connect_timeout=1.0, **tls)
            self.limiter = SlidingWindowCounterRateLimiter(storage)

    def check_rate(self, owner: str) -> None:
        """429 with Retry-After when `owner` is over its request rate."""
        if self.limiter is None:
            return
        for item in self.overrides.get(owner, self.default):
            if not self.limiter.hit(item, owner):
                reset_at = self.limiter.get_window_stats(item, owner).reset_time
                metrics.ADMISSION_REJECTIONS.labels("rate_limited").inc()
                raise ApiError(
                    429, "rate_limit_exceeded",
                    f"Rate limit of {item} exceeded for this key.", type_="requests",
                    retry_after_s=max(1, math.ceil(reset_at - time.time())),
                )

    def check_queue(self) -> None:
        """503 queue_full with a Retry-After from the drain rate when the queue is too deep."""
        if self.max_queue_depth <= 0:
            return
        depth = self.queue_depth()
        if depth < self.max_queue_depth:
            return
        drain = queue_stats.window(self.redis).done_rate_per_s
        excess = depth - self.max_queue_depth + 1
        wait_s = math.ceil(excess / drain) if drain > 0 else MAX_RETRY_AFTER_S
        metrics.ADMISSION_REJECTIONS.labels("queue_full").inc()
        raise ApiError(
            503, "queue_full", f"The queue holds {depth} jobs; retry later.",
            type_="server_error", retry_after_s=min(MAX_RETRY_AFTER_S, max(1, wait_s)),
        )

    def queue_depth(self) -> int:
        """Jobs waiting in the broker, as read at most DEPTH_MAX_AGE_S ago."""
        now = time.monotonic()
        if now - self._depth_read_at >= DEPTH_MAX_AGE_S:
            # A broker of its own (RabbitMQ) away while the job store is not: the job is kept
            # and sent once the broker is back (the sweeper), so admit it on the depth last
            # read rather than refuse it.
            with contextlib.suppress(BrokerUnavailable):
                self._depth = self.broker.total_depth()
            self._depth_read_at = now
        return self._depth
