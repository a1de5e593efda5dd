"""RabbitMQ as Celery's broker: the job queue, how deep it is, which jobs' messages it holds.

Both lanes share one durable priority queue. With a queue per lane a worker would not take
`interactive` first: when a slot frees up, RabbitMQ's channel limiter offers it to the
channel's queues in a random order (rabbit_limiter.erl, notify_queues), so under a backlog a
worker takes `batch` as often as `interactive`. Inside one queue the higher priority is always
delivered first. A lane's depth is then the length of its priority: the management API tells
it (`backing_queue_status.priority_lengths`); AMQP tells only the queue's total, live.
"""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import amqp.exceptions
import redis
import requests
from celery import Celery
from kombu import Connection, Exchange, Queue
from kombu.exceptions import LimitExceeded, OperationalError

from chatq import keys
from chatq.config import is_amqp as is_amqp
from chatq.scripting import BoundScript, LuaScript

log = logging.getLogger(__name__)

JOBS_QUEUE = "jobs"
# Message priority of each lane: higher is delivered first. Two levels: RabbitMQ keeps a
# sub-queue per level, so the fewer the cheaper.
LANE_PRIORITY = {"interactive": 1, "batch": 0}
MAX_PRIORITY = max(LANE_PRIORITY.values())
API_PORTS = {"amqp": ("http", 15672), "amqps": ("https", 15671)}
API_TIMEOUT_S = 2.0
POOL_TIMEOUT_S = 2.0
# A publish waits this long for the broker's confirm; past it the send counts as failed.
CONFIRM_TIMEOUT_S = 5.0
SENT_FIELD = "broker_sent"
_RECOVERABLE = (OSError, amqp.exceptions.AMQPError, OperationalError)


class BrokerUnavailable(ConnectionError):
    """RabbitMQ, or its management API, cannot answer now (a 503, as when Redis is away)."""


def jobs_queue() -> Queue:
    """The durable priority queue of both lanes (declared alike by every process)."""
    return Queue(
        JOBS_QUEUE,
        Exchange(JOBS_QUEUE),
        routing_key=JOBS_QUEUE,
        queue_arguments={"x-max-priority": MAX_PRIORITY},
    )


@dataclass(frozen=True)
class ManagementApi:
    """Where RabbitMQ's management HTTP API is, and the vhost chatq's queues are in."""

    base_url: str
    vhost: str
    user: str = ""
    password: str = field(default="", repr=False)

    def queue_url(self, queue: str) -> str:
        """The API resource of `queue` in our vhost."""
        vhost = urllib.parse.quote(self.vhost, safe="")
        return f"{self.base_url}/api/queues/{vhost}/{urllib.parse.quote(queue, safe='')}"


def _host(parts: urllib.parse.SplitResult) -> str:
    host = parts.hostname or "localhost"
    return f"[{host}]" if ":" in host else host


def management_api(broker_url: str, api_url: str = "") -> ManagementApi:
    """The management API of the broker at `broker_url`: `api_url` if given (its own user and
    password if it carries them), else the broker's host on the API's default port."""
    broker = urllib.parse.urlsplit(broker_url)
    vhost = urllib.parse.unquote(broker.path[1:]) or "/"
    user = urllib.parse.unquote(broker.username or "guest")
    password = urllib.parse.unquote(broker.password or "guest")
    if not api_url:
        scheme, port = API_PORTS.get(broker.scheme.lower(), API_PORTS["amqp"])
        return ManagementApi(f"{scheme}://{_host(broker)}:{port}", vhost, user, password)
    api = urllib.parse.urlsplit(api_url)
    netloc = _host(api) + (f":{api.port}" if api.port else "")
    base = urllib.parse.urlunsplit((api.scheme, netloc, api.path.rstrip("/"), "", ""))
    if api.username:
        user, password = (
            urllib.parse.unquote(api.username),
            urllib.parse.unquote(api.password or ""),
        )
    return ManagementApi(base, vhost, user, password)


def lane_depths(api: ManagementApi, session: requests.Session) -> dict[str, int]:
    """Ready messages of each lane, as of the broker's last statistics (a few seconds old:
    measured here, up to about 5 s); reserved ones are not counted."""
    try:
        answer = session.get(
            api.queue_url(JOBS_QUEUE),
            auth=(api.user, api.password),
            params={"columns": "backing_queue_status.priority_lengths"},
            timeout=API_TIMEOUT_S,
        )
    except requests.RequestException as exc:
        raise BrokerUnavailable(f"RabbitMQ's management API: {type(exc).__name__}") from None
    if answer.status_code == 404:
        return dict.fromkeys(LANE_PRIORITY, 0)  # not declared yet: nothing waits in it
    if answer.status_code != 200:
        log.warning(
            "RabbitMQ's management API answered %d for the queue %r (the user needs "
            "the `monitoring` tag)",
            answer.status_code,
            JOBS_QUEUE,
        )
        raise BrokerUnavailable(f"RabbitMQ's management API answered {answer.status_code}")
    # A queue without statistics yet (its first seconds) answers an empty list.
    body: Any = answer.json()
    status = body.get("backing_queue_status") if isinstance(body, dict) else None
    lengths = (status or {}).get("priority_lengths") or {}
    return {lane: int(lengths.get(str(p), 0)) for lane, p in LANE_PRIORITY.items()}


def _declare(conn: Connection) -> int:
    # Declared, not passively: the same arguments as every process's, so never a 404.
    answer: Any = jobs_queue()(conn.default_channel).queue_declare()
    return int(answer.message_count)


def ready_messages(app: Celery) -> int:
    """The messages waiting in the jobs queue now (AMQP's queue.declare-ok, which counts
    neither the ones reserved by workers nor unconfirmed ones)."""
    try:
        # The app's pool of publishing connections (the stubs say producers: it is not).
        with app.pool.acquire(block=True, timeout=POOL_TIMEOUT_S) as pooled:
            conn = cast(Connection, pooled)
            try:
                return _declare(conn)
            except _RECOVERABLE:
                conn.collect()  # a connection the broker dropped: once more on a new one
                return _declare(conn)
    except (*_RECOVERABLE, LimitExceeded) as exc:  # unreachable, or every connection busy
        raise BrokerUnavailable(f"RabbitMQ: {type(exc).__name__}") from None


class BrokerSentArgs(NamedTuple):
    """broker_sent.lua: a job's message of its current generation is confirmed."""

    job: str  # key: the job's record


BROKER_SENT = LuaScript("broker_sent.lua", BrokerSentArgs, bool, keys=("job",))


class SentMarks:
    """Which queued jobs' messages RabbitMQ has confirmed (see lua/broker_sent.lua).

    A confirmed message sits in a durable queue until a worker acknowledges it at the job's
    end, across worker losses and broker restarts; only a job whose message was never
    confirmed (the web died before sending it, or the broker refused it) needs sending again.
    """

    _script: BoundScript[..., BrokerSentArgs, bool] | None = None

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client

    def mark(self, job_id: str) -> None:
        """The message of `job_id`'s current generation is confirmed (one round trip)."""
        if SentMarks._script is None:
            SentMarks._script = BROKER_SENT.on(self.redis)
        SentMarks._script.send(self.redis, BrokerSentArgs(job=keys.job(job_id)))

    def missing(self, job_ids: list[str]) -> list[str]:
        """The ids among `job_ids` whose current message was never confirmed."""
        pipe = self.redis.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.hmget(keys.job(job_id), SENT_FIELD, "takeovers")
        return [
            job_id
            for job_id, (sent, takeovers) in zip(job_ids, pipe.execute(), strict=True)
            if sent is None or sent != (takeovers or "0")
        ]
