"""The settings of Redis and the broker: where the job store and Celery's broker are, through
Sentinel or not, and how safe a write must be."""

from __future__ import annotations

from dataclasses import dataclass

from chatq.config.env import (
    file_path,
    flag,
    from_text,
    parse_sentinels,
    read_broker_url,
    text,
    whole,
)
from chatq.config.fields import setting

# WAIT blocks the connection: it must end well before a Redis reply times out (5 s).
MAX_WAIT_TIMEOUT_MS = 4000


@dataclass(frozen=True, repr=False)
class RedisSettings:
    """Redis and the broker."""

    redis_url: str = setting(
        "CHATQ_REDIS_URL",
        "redis://127.0.0.1:6379/0",
        text,
        unit="URL",
        doc="job store, broker and pub/sub (one Redis, `maxmemory-policy noeviction`)",
    )

    redis_ca_file: str = setting(
        "CHATQ_REDIS_CA_FILE",
        "",
        file_path,
        unit="path",
        note="the system's CAs",
        doc=(
            "PEM file of the CA that signed Redis's certificate, for a `rediss://` URL with a "
            "private CA; every Redis client checks the certificate and the host name"
        ),
    )

    state_url: str = setting(
        "CHATQ_STATE_URL",
        "",
        text,
        unit="`redis://`, `rediss://` URL (`redis+cluster://` to say it is a Cluster)",
        note="the Redis URL",
        doc=(
            "the job store (records, events, notifications, indexes, webhooks, batches): one "
            "Redis, or a node of a Redis Cluster (found by `cluster_enabled:1`); the broker stays"
            ' on `CHATQ_BROKER_URL` or the Redis URL (see "State on a Redis Cluster")'
        ),
    )

    broker_url: str = setting(
        "CHATQ_BROKER_URL",
        "",
        read_broker_url,
        unit="`redis://`, `rediss://`, `amqp://` or `amqps://` URL",
        note="the Redis URL",
        doc=(
            "Celery's broker, when it is not the Redis of `CHATQ_REDIS_URL`: another Redis, or "
            'RabbitMQ (see "RabbitMQ as the broker"); job records, events and notifications stay '
            "in Redis"
        ),
    )

    broker_api_url: str = setting(
        "CHATQ_BROKER_API_URL",
        "",
        text,
        unit="URL",
        note="`http://` the broker's host `:15672`; `https://…:15671` for `amqps://`",
        doc=(
            "RabbitMQ only: its management API, where `GET /v1/queue` and the metrics read each "
            "lane's depth; the broker URL's user and password unless this URL carries its own"
        ),
    )

    redis_sentinels: tuple[tuple[str, int], ...] = setting(
        "CHATQ_REDIS_SENTINELS",
        (),
        from_text(parse_sentinels),
        unit="`host:port,…` (port defaults to `26379`; `[v6]:port`)",
        note="no Sentinel: `CHATQ_REDIS_URL`'s host",
        doc=(
            "the Sentinels that name the Redis primary; the state and the broker (unless "
            "`CHATQ_STATE_URL` / `CHATQ_BROKER_URL` put them elsewhere) follow a failover without"
            " a restart; `CHATQ_REDIS_URL` still gives the database, user, password and TLS (see "
            '"Redis Sentinel")'
        ),
    )

    redis_master_name: str = setting(
        "CHATQ_REDIS_MASTER_NAME",
        "mymaster",
        text,
        unit="name",
        doc="the name the Sentinels `monitor` the primary under",
    )

    redis_sentinel_password: str = setting(
        "CHATQ_REDIS_SENTINEL_PASSWORD",
        "",
        text,
        unit="secret",
        note="the Sentinels ask for none",
        doc=(
            "the Sentinels' own `requirepass` (a Sentinel's password is separate from the "
            "primary's); TLS to the Sentinels when `CHATQ_REDIS_URL` is `rediss://`"
        ),
    )

    redis_min_replicas: int = setting(
        "CHATQ_REDIS_MIN_REPLICAS",
        0,
        whole,
        unit="replicas",
        note="off",
        doc=(
            "every accept (create), cancel and end of a job is followed by `WAIT n` on the same "
            "connection; an accept or cancel that fewer replicas acknowledge in time answers `503"
            ' backend_unavailable` (the job may still run, see "Redis Sentinel"); one Redis or '
            "Sentinel, not a Cluster"
        ),
    )

    redis_wait_timeout_ms: int = setting(
        "CHATQ_REDIS_WAIT_TIMEOUT_MS",
        500,
        whole,
        unit="ms",
        minimum=1,
        maximum=MAX_WAIT_TIMEOUT_MS,
        doc="how long `WAIT` waits for those replicas",
    )

    redis_require_safe: bool = setting(
        "CHATQ_REDIS_REQUIRE_SAFE",
        False,
        flag,
        doc=(
            "refuse to start (and `/readyz` 503) unless Redis is known to keep jobs: "
            '`maxmemory-policy noeviction` and AOF or RDB persistence (see "Redis: what chatq '
            'needs")'
        ),
    )
