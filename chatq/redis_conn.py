"""Redis clients with the timeouts and TLS checks chatq relies on, and what counts as Redis down."""

from __future__ import annotations

import re
import ssl
from typing import Any, cast

import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster
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


CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")


def state_url(settings: Any) -> str:
    """Where the job store lives: CHATQ_STATE_URL, else the Redis URL."""
    return str(settings.state_url or settings.redis_url)


def is_cluster_url(url: str, ca_file: str = "") -> bool:
    """Whether `url` names a Redis Cluster: its scheme says so (`redis+cluster://`), or the
    node answers `cluster_enabled:1` (a node that does not answer is taken for a plain one)."""
    if url.lower().startswith(CLUSTER_SCHEMES):
        return True
    probe = redis.Redis.from_url(
        url,
        socket_timeout=CONNECT_TIMEOUT_S,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        **tls_options(url, ca_file),
    )
    try:
        return int(probe.info("cluster").get("cluster_enabled", 0)) == 1
    except redis.RedisError:
        return False
    finally:
        probe.close()


def connect_state(settings: Any, max_connections: int = 1000) -> redis.Redis:
    """The job store's client: a Cluster client when its URL names a Redis Cluster."""
    url, ca_file = state_url(settings), settings.redis_ca_file
    if not is_cluster_url(url, ca_file):
        return connect(url, max_connections, ca_file)
    plain = url.replace("+cluster://", "://", 1)
    cluster = RedisCluster.from_url(
        plain,
        decode_responses=True,
        max_connections=max_connections,
        socket_timeout=SOCKET_TIMEOUT_S,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_keepalive=True,
        **tls_options(plain, ca_file),
    )
    return cast(redis.Redis, cluster)


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
