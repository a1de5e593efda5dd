"""The Celery app both sides share: broker settings, queue names, task names."""

from __future__ import annotations

import base64
import functools
import json
import ssl
import urllib.parse
import uuid
from typing import Any

import redis
from celery import Celery
from kombu import Exchange, Queue, serialization

from chatq import admission, topology
from chatq.broker import kombu_clients
from chatq.broker import rabbitmq as rabbit
from chatq.config import Settings
from chatq.topology import sentinel_options, tls_options

RUN_JOB_TASK = "chatq.run_job"
# The job lanes. On Redis each is a queue per tenant (kombu's lists, chatq/admission/fairness.py)
# and one of its own; on RabbitMQ both are priorities of one queue (chatq/broker/rabbitmq.py).
# Webhook deliveries are no Celery tasks: each worker's delivery pool takes them from Redis (worker/
# webhooks_pool.py), so that they never hold a job's slot.
QUEUES = admission.LANES


def broker_url(settings: Settings) -> str:
    """CHATQ_BROKER_URL, else the Redis URL."""
    return settings.broker_url or settings.redis_url


def is_amqp(app: Celery) -> bool:
    """Whether `app` sends to RabbitMQ."""
    return rabbit.is_amqp(str(app.conf.broker_url))


def consumed_queues(app: Celery) -> tuple[str, ...]:
    """The queues a worker consumes: every job queue."""
    return tuple(str(q.name) for q in app.conf.task_queues)


def worker_queues(app: Celery, lanes: tuple[str, ...]) -> tuple[str, ...]:
    """The queues a worker running only `lanes` consumes: theirs (a lane's own queue and its
    tenants', `interactive.alpha`), and any of no lane (RabbitMQ's one jobs queue)."""
    return tuple(q for q in consumed_queues(app) if _lane_of(q) in (*lanes, None))


def _lane_of(queue: str) -> str | None:
    """The job lane a queue belongs to (`interactive.alpha`: `interactive`), or None."""
    lane = queue.partition(".")[0]
    return lane if lane in QUEUES else None


def _queue_of(app: Celery, lane: str, owner: str) -> str:
    """The Redis broker's queue for a job of `owner` in `lane` (its tenant's, if declared)."""
    tenant = admission.queue_name(lane, owner)
    return tenant if owner and tenant in consumed_queues(app) else lane


def make_celery(settings: Settings, max_connections: int = 200) -> Celery:
    """A Celery app on the configured broker, tuned for long, I/O-bound, late-acked jobs."""
    url = broker_url(settings)
    sentinels = bool(settings.redis_sentinels and not settings.broker_url)
    app = Celery(
        "chatq", broker=sentinel_broker_url(settings) if sentinels else url, set_as_current=False
    )
    app.conf.update(
        task_ignore_result=True,
        # No result backend, so one for the whole process: else Celery builds one per thread,
        # and a gevent pool's greenlets are threads to it (~4.6 % of a busy worker's CPU).
        result_backend_thread_safe=True,
        task_acks_late=True,
        task_reject_on_worker_lost=False,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        task_create_missing_queues=False,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        worker_enable_remote_control=False,
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=2.0,
        # None would mean a new broker connection per message sent: keep a pool.
        broker_pool_limit=max(10, min(max_connections, 100)),
        task_publish_retry_policy={
            "max_retries": 2,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": 0.5,
        },
    )
    if rabbit.is_amqp(url):
        app.conf.update(_rabbitmq_conf(url))
    else:
        app.conf.update(_redis_conf(settings, url, max_connections))
        kombu_clients.install()
    if sentinels:
        app.conf.broker_transport_options.update(_sentinel_options(settings))
    return app


def sentinel_broker_url(settings: Settings) -> str:
    """kombu's URL of the Redis behind CHATQ_REDIS_SENTINELS: one `sentinel://` per Sentinel,
    with the user, password and database of CHATQ_REDIS_URL."""
    parts = urllib.parse.urlsplit(settings.redis_url)
    userinfo = parts.netloc.rpartition("@")[0]
    credentials = f"{userinfo}@" if userinfo else ""
    return ";".join(
        f"sentinel://{credentials}{_netloc_host(host)}:{port}{parts.path}"
        for host, port in settings.redis_sentinels
    )


def _netloc_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _sentinel_options(settings: Settings) -> dict[str, Any]:
    return {
        "master_name": settings.redis_master_name,
        "sentinel_kwargs": sentinel_options(settings),
    }


def _queue(name: str) -> Queue:
    return Queue(name, Exchange(name), routing_key=name)


def _queue_order(settings: Settings) -> Any:
    """kombu's queue cycle: lanes in order, tenants round-robin within each
    (chatq/admission/fairness.py); with fair dispatch off, the lanes' own queues in fixed order."""
    plan = admission.plan(settings)
    if not plan.tenants:
        return "priority"
    running = admission.RunningCounts(plan, lambda: topology.connect_state(settings, 2))
    return functools.partial(admission.TenantCycle, plan, running)


def _redis_conf(settings: Settings, url: str, max_connections: int) -> dict[str, Any]:
    plan = admission.plan(settings)
    jobs = [q for lane in QUEUES for q in plan.lane_queues(lane)]
    return {
        "task_queues": [_queue(name) for name in jobs],
        "task_default_queue": QUEUES[0],
        # A primary demoted by a failover answers UNBLOCKED, then READONLY, to the consumer's
        # BRPOP: reconnect until Redis serves again instead of the worker exiting.
        "broker_channel_error_retry": True,
        # Without it kombu connects to a rediss:// broker with CERT_NONE: any certificate.
        "broker_use_ssl": tls_options(url, settings.redis_ca_file) or False,
        "broker_transport_options": {
            # No record in Redis of each message a worker reserves, nor its removal at the ack
            # (8 commands and 2 round trips a job): our own lease and the sweeper's search
            # for missing messages recover a lost worker's jobs in seconds, where kombu gave
            # them back only after a visibility timeout longer than a job.
            "ack_emulation": False,
            # `interactive` always drained first; within a lane, tenants take turns.
            "queue_order_strategy": _queue_order(settings),
            # kombu's default of 10 starves a pool of 100 slots acking at once.
            "max_connections": max_connections,
            "socket_timeout": 5.0,
            "socket_connect_timeout": 2.0,
        },
    }


BROKER_HEARTBEAT_S = 5.0


def _rabbitmq_conf(url: str) -> dict[str, Any]:
    parts = urllib.parse.urlsplit(url)
    tls = parts.scheme.lower() == "amqps"
    return {
        "task_queues": [rabbit.jobs_queue()],
        "task_default_queue": rabbit.JOBS_QUEUE,
        # A send returns once RabbitMQ has the message in the durable queue (on disk).
        "broker_transport_options": {"confirm_publish": True},
        # A job whose connection broke runs on; its message, redelivered at once, finds it
        # running and is dropped (the lease, not the broker, hands over a lost job).
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        # A worker host lost without closing its connection (power, network) keeps receiving
        # deliveries, sent-again jobs included, until RabbitMQ sees its heartbeats stop: 5 s
        # (Celery's default is 120) has them requeued within ~15 s, not ~3 minutes (measured in
        # tests/multihost). Celery uses it for the workers' consuming connection only.
        "broker_heartbeat": BROKER_HEARTBEAT_S,
        # The certificate and the host name checked against the system's CAs.
        "broker_use_ssl": {"cert_reqs": ssl.CERT_REQUIRED, "server_hostname": parts.hostname}
        if tls
        else False,
    }


def message_for_create(
    app: Celery, settings: Settings, job_id: str, priority: str, owner: str, traceparent: str = ""
) -> tuple[str, str]:
    """The run message for the script that creates the job to push with it
    (chatq/jobs/create.lua), as run_message gives it, where the broker is Redis and the very
    Redis of the job store; elsewhere ("", ""): the caller sends it after the create
    (enqueue)."""
    if is_amqp(app) or settings.broker_url or settings.state_url:
        return "", ""
    return run_message(app, job_id, priority, owner, traceparent)


def _trace_headers(traceparent: str) -> dict[str, str]:
    """The run message's own headers: the job's traceparent, if it has one."""
    return {"traceparent": traceparent} if traceparent else {}


def run_message(
    app: Celery, job_id: str, priority: str, owner: str, traceparent: str = ""
) -> tuple[str, str]:
    """The run message of `job_id` as kombu's Redis transport would push it onto the list of
    its queue: (that list, the message). Celery writes the task message; the envelope is
    kombu's (tests/test_run_message.py holds it to what `enqueue` sends)."""
    queue = _queue_of(app, priority, owner)
    # The reprs given, as saferepr writes them for these arguments: it costs ~40 µs a submit.
    headers, properties, body, _ = app.amqp.create_task_message(
        job_id,
        RUN_JOB_TASK,
        [job_id],
        {},
        reply_to=app.thread_oid,
        ignore_result=None,
        argsrepr=repr([job_id]),
        kwargsrepr="{}",
    )
    content_type, encoding, data = serialization.dumps(body, serializer="json")
    envelope = {
        "body": base64.b64encode(data.encode() if isinstance(data, str) else data).decode(),
        "content-encoding": encoding,
        "content-type": content_type,
        "headers": {**headers, **_trace_headers(traceparent)},
        "properties": {
            **properties,
            "delivery_mode": 2,  # persistent, as a Queue's exchange sends by default
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }
    return queue, json.dumps(envelope)


def enqueue(
    app: Celery,
    job_id: str,
    priority: str,
    state: redis.Redis | None = None,
    owner: str = "",
    traceparent: str = "",
) -> None:
    """Send the run message for `job_id`, carrying nothing but the id (and the job's `traceparent`
    header, if given), to its lane's queue of `owner` (on Redis). On RabbitMQ, once the broker
    confirms it, the job's record in `state` says so (see chatq/broker/rabbitmq.py)."""
    if not is_amqp(app):
        queue = _queue_of(app, priority, owner)
        app.send_task(
            RUN_JOB_TASK,
            args=[job_id],
            task_id=job_id,
            queue=queue,
            routing_key=queue,
            retry=True,
            headers=_trace_headers(traceparent),
        )
        return
    if state is None:
        raise ValueError("a job sent through RabbitMQ needs the job store's client")
    app.send_task(
        RUN_JOB_TASK,
        args=[job_id],
        task_id=job_id,
        queue=rabbit.JOBS_QUEUE,
        routing_key=rabbit.JOBS_QUEUE,
        priority=rabbit.LANE_PRIORITY[priority],
        retry=True,
        confirm_timeout=rabbit.CONFIRM_TIMEOUT_S,
        headers=_trace_headers(traceparent),
    )
    rabbit.SentMarks(state).mark(job_id)
