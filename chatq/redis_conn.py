"""Redis clients with the timeouts and TLS checks chatq relies on, and what counts as Redis down."""

from __future__ import annotations

import re
import ssl
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

SOCKET_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 1.0


def tls_options(url: str, ca_file: str = "") -> dict[str, Any]:
    """redis-py's TLS options for `url`: certificate and host name verified; {} for redis://.

    Both redis-py and kombu (Celery's broker) accept these keys; kombu alone would otherwise
    fall back to CERT_NONE for a rediss:// URL.
    """
    if not url.lower().startswith("rediss://"):
        return {}
    return {
        "ssl_cert_reqs": ssl.CERT_REQUIRED,
        "ssl_check_hostname": True,
        # None: the system's CAs; a file adds a private CA to them.
        "ssl_ca_certs": ca_file or None,
    }


def connect(url: str, max_connections: int = 1000, ca_file: str = "") -> redis.Redis:
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
        **tls_options(url, ca_file),
    )
    return redis.Redis(connection_pool=pool)


# Redis cannot serve us now but will again without anyone changing chatq: unreachable, out of
# memory (noeviction), a replica after a failover, loading its data, or cut from its primary.
BACKEND_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    redis.exceptions.OutOfMemoryError,
    redis.ReadOnlyError,
    redis.exceptions.MasterDownError,
    ConnectionError,
    TimeoutError,
)

# The same states when they arrive as a plain error reply: Redis 6 wraps an error raised
# inside a Lua script ("Error running script ...: -OOM command not allowed ..."), and older
# redis-py versions have no class for MASTERDOWN.
_BACKEND_REPLY = re.compile(r"(?:\A|: -)(?:OOM|READONLY|LOADING|MASTERDOWN) ")


def is_backend_error(exc: BaseException) -> bool:
    """Whether `exc` means "Redis cannot serve this now": answer 503, or retry the step."""
    if isinstance(exc, BACKEND_ERRORS):
        return True
    return isinstance(exc, redis.ResponseError) and bool(_BACKEND_REPLY.search(str(exc)))
