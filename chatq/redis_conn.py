"""Redis clients with the timeouts chatq relies on."""

from __future__ import annotations

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

SOCKET_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 1.0


def connect(url: str, max_connections: int = 1000) -> redis.Redis:
    """A client for `url` that fails fast when Redis is down and recovers by itself."""
    pool = redis.BlockingConnectionPool.from_url(
        url,
        decode_responses=True,
        max_connections=max_connections,
        timeout=CONNECT_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_keepalive=True,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), retries=1),
    )
    return redis.Redis(connection_pool=pool)


BACKEND_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    ConnectionError,
    TimeoutError,
)

