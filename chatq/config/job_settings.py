"""The settings of jobs and of the workers that run them: lifetimes, slots, lanes, leases, and
how often a worker writes what it has streamed."""

from __future__ import annotations

from dataclasses import dataclass

from chatq.config.env import (
    LANES,
    Choice,
    ConfigError,
    Reading,
    is_amqp,
    number,
    parse_lanes,
    text,
    whole,
)
from chatq.config.fields import setting


def read_lanes(r: Reading) -> tuple[str, ...]:
    """The lanes this worker runs; a lane of its own needs the Redis broker (on RabbitMQ both
    lanes are priorities of one queue, which a consumer cannot split)."""
    lanes = parse_lanes(r.text)
    broker_url = r.earlier["broker_url"]
    if lanes != LANES and isinstance(broker_url, str) and is_amqp(broker_url):
        raise ConfigError(f"{r.name} needs the Redis broker (RabbitMQ: both lanes)")
    return lanes


@dataclass(frozen=True, repr=False)
class JobSettings:
    """Jobs and the workers that run them."""

    job_ttl_s: int = setting(
        "CHATQ_JOB_TTL",
        86400,
        whole,
        unit="s",
        minimum=1,
        doc="a job and its events expire this long after they end (then `404`)",
    )

    job_timeout_s: float = setting(
        "CHATQ_JOB_TIMEOUT",
        600.0,
        number,
        unit="s",
        minimum=0.1,
        doc="deadline of one job, retries included; also how long `/v1/chat/completions` holds",
    )

    worker_concurrency: int = setting(
        "CHATQ_WORKER_CONCURRENCY",
        100,
        whole,
        unit="slots",
        minimum=1,
        doc="jobs one worker process runs at once = its upstream connection pool (see below)",
    )

    worker_pool: str = setting(
        "CHATQ_WORKER_POOL",
        "gevent",
        Choice(("gevent", "threads")),
        doc="Celery pool of `python -m worker`",
    )

    worker_lanes: tuple[str, ...] = setting(
        "CHATQ_WORKER_LANES",
        LANES,
        read_lanes,
        unit="lanes",
        doc=(
            "the lanes whose jobs this worker runs: `interactive`, `batch` or both; a worker "
            "without `batch` runs no batch loop either ([a worker pool per "
            "lane](#a-worker-pool-per-lane)); Redis broker only"
        ),
    )

    worker_metrics_bind: str = setting(
        "CHATQ_WORKER_METRICS_BIND",
        "127.0.0.1:9101",
        text,
        unit="host:port, empty = off",
        keep_empty=True,
        doc=(
            "each worker process's own `/metrics`; a taken port stops the worker at start, with "
            "one line"
        ),
    )

    lease_s: float = setting(
        "CHATQ_LEASE",
        10.0,
        number,
        unit="s",
        minimum=0.5,
        doc="a running job's lease; a worker that stops renewing it loses the job to another",
    )

    max_takeovers: int = setting(
        "CHATQ_MAX_TAKEOVERS",
        3,
        whole,
        unit="count",
        doc="lost-worker takeovers before a job fails with `worker_lost`",
    )

    queue_resend_s: float = setting(
        "CHATQ_QUEUE_RESEND",
        300.0,
        number,
        unit="s",
        minimum=1.0,
        doc=(
            "how often a job still waiting in the queue is checked for a lost message (one found "
            "missing in the broker is sent again)"
        ),
    )

    flush_interval_s: float = setting(
        "CHATQ_FLUSH_INTERVAL",
        0.025,
        number,
        unit="s",
        doc=(
            "each worker process writes the new text of all its running jobs in one round trip "
            "(and one notification) per interval"
        ),
    )

    flush_max_chars: int = setting(
        "CHATQ_FLUSH_MAX_CHARS",
        4096,
        whole,
        unit="characters",
        minimum=1,
        doc="… or per this much text",
    )
