"""Redis clients with the timeouts and TLS checks chatq relies on, and what counts as Redis down."""

from __future__ import annotations

import re
import ssl
from typing import Any, cast

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.cluster import RedisCluster
from redis.connection import parse_url
from redis.driver_info import DriverInfo
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool

from chatq.topology.replicas import ReplicasBehind

SOCKET_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 1.0
# Without it each new connection reads redis-py's version from the package metadata
# (importlib.metadata, ~0.6 ms), inside whatever request grew the pool.
DRIVER_INFO = DriverInfo(lib_version=redis.__version__)


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


def _pool_options(max_connections: int) -> dict[str, Any]:
    """What every pool of ours sets: a bounded wait for a connection, short timeouts."""
    return {
        "decode_responses": True,
        "max_connections": max_connections,
        "timeout": CONNECT_TIMEOUT_S,
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_keepalive": True,
        "health_check_interval": 30,
        "retry": Retry(ExponentialBackoff(cap=0.2, base=0.02), retries=1),
        "driver_info": DRIVER_INFO,
    }


def connect(url: str, max_connections: int = 1000, ca_file: str = "") -> redis.Redis:
    """A client for `url` that fails fast when Redis is down and recovers by itself."""
    pool = redis.BlockingConnectionPool.from_url(
        url, **_pool_options(max_connections), **tls_options(url, ca_file)
    )
    return redis.Redis(connection_pool=pool)


class BlockingSentinelPool(SentinelConnectionPool, redis.BlockingConnectionPool):
    """Connections to whichever server the Sentinels name primary, waiting (not failing) for
    a free one like `connect`'s pool; a connection made after a failover finds the new one."""


def sentinel_options(settings: Any) -> dict[str, Any]:
    """How to reach the Sentinels: TLS like CHATQ_REDIS_URL, their own password."""
    url = str(settings.redis_url)
    options: dict[str, Any] = {
        "socket_timeout": CONNECT_TIMEOUT_S,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        # redis-py's default retries a Sentinel that does not answer for seconds: ask the next.
        "retry": Retry(NoBackoff(), retries=0),
        **tls_options(url, settings.redis_ca_file),
    }
    if options.get("ssl_cert_reqs") is not None:
        options["ssl"] = True
    if settings.redis_sentinel_password:
        options["password"] = settings.redis_sentinel_password
    return options


def connect_sentinel(settings: Any, max_connections: int = 1000) -> redis.Redis:
    """A client of the primary the Sentinels name: database, user, password and TLS from
    CHATQ_REDIS_URL, host and port from CHATQ_REDIS_SENTINELS."""
    url = str(settings.redis_url)
    parsed: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
    from_url = {k: v for k, v in parsed.items() if k in ("db", "username", "password")}
    tls = tls_options(url, settings.redis_ca_file)
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(settings.redis_sentinels), sentinel_kwargs=sentinel_options(settings)
    )
    pool = BlockingSentinelPool(  # type: ignore[no-untyped-call]
        settings.redis_master_name,
        sentinel,
        is_master=True,
        ssl=bool(tls),
        **_pool_options(max_connections),
        **from_url,
        **tls,
    )
    return redis.Redis(connection_pool=pool)


def connect_main(settings: Any, max_connections: int = 1000) -> redis.Redis:
    """The Redis of CHATQ_REDIS_URL: through its Sentinels when CHATQ_REDIS_SENTINELS names
    them, else directly."""
    if settings.redis_sentinels:
        return connect_sentinel(settings, max_connections)
    return connect(settings.redis_url, max_connections, settings.redis_ca_file)


def primary_address(client: Any) -> str | None:
    """host:port of the primary a Sentinel-managed `client` last connected to; None for
    any other client (or before its first connection)."""
    pool = getattr(client, "connection_pool", None)
    if not isinstance(pool, SentinelConnectionPool) or pool.master_address is None:
        return None
    host, port = pool.master_address
    return f"{host}:{port}"


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
    """The job store's client: through the Sentinels when they serve it, a Cluster client when
    its URL names a Redis Cluster."""
    if settings.redis_sentinels and not settings.state_url:
        return connect_sentinel(settings, max_connections)
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
        driver_info=DRIVER_INFO,
        **tls_options(plain, ca_file),
    )
    return cast(redis.Redis, cluster)


# Redis cannot serve us now but will again without anyone changing chatq: unreachable, out of
# memory (noeviction), a replica after a failover, loading its data, cut from its primary, or
# without the replicas CHATQ_REDIS_MIN_REPLICAS asks for.
BACKEND_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    redis.exceptions.OutOfMemoryError,
    redis.ReadOnlyError,
    redis.exceptions.MasterDownError,
    ReplicasBehind,
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
