"""The Celery app both sides share: broker settings, queue names, task names."""

from __future__ import annotations

from celery import Celery
from kombu import Exchange, Queue

from chatq.config import Settings
from chatq.redis_conn import tls_options

RUN_JOB_TASK = "chatq.run_job"
QUEUES = ("interactive", "batch")
# Webhook deliveries: a queue of their own, consumed after the job queues, never counted
# in their depths (QUEUES is for job queues only).
WEBHOOK_TASK = "chatq.deliver_webhook"
WEBHOOK_QUEUE = "webhooks"


def make_celery(settings: Settings, max_connections: int = 200) -> Celery:
    """A Celery app on the Redis broker, tuned for long, I/O-bound, late-acked jobs."""
    app = Celery("chatq", broker=settings.redis_url, set_as_current=False)
    app.conf.update(
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=False,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        task_queues=[Queue(name, Exchange(name), routing_key=name)
                     for name in (*QUEUES, WEBHOOK_QUEUE)],
        task_default_queue=QUEUES[0],
        task_create_missing_queues=False,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        worker_enable_remote_control=False,
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=2.0,
        # A primary demoted by a failover answers UNBLOCKED, then READONLY, to the consumer's
        # BRPOP: reconnect until Redis serves again instead of the worker exiting.
        broker_channel_error_retry=True,
        # Without it kombu connects to a rediss:// broker with CERT_NONE: any certificate.
        broker_use_ssl=tls_options(settings.redis_url, settings.redis_ca_file) or False,
        # None would mean a new broker connection per message sent: keep a pool.
        broker_pool_limit=max(10, min(max_connections, 100)),
        task_publish_retry_policy={
            "max_retries": 2,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": 0.5,
        },
        broker_transport_options={
            # Our own lease recovers lost jobs in seconds; this only has to outlast a job.
            "visibility_timeout": int(settings.job_timeout_s + 2 * settings.lease_s + 60),
            # Fixed order, not round robin: `interactive` is always drained first.
            "queue_order_strategy": "priority",
            # kombu's default of 10 starves a pool of 100 slots acking at once.
            "max_connections": max_connections,
            "socket_timeout": 5.0,
            "socket_connect_timeout": 2.0,
        },
    )
    return app


def enqueue(app: Celery, job_id: str, priority: str) -> None:
    """Send the run message for `job_id`, carrying nothing but the id."""
    app.send_task(
        RUN_JOB_TASK, args=[job_id], task_id=job_id, queue=priority, routing_key=priority,
        retry=True,
    )


def enqueue_webhook(app: Celery, delivery_id: str, token: str) -> None:
    """Send the message of one attempt of a delivery: its id and dispatch token only."""
    app.send_task(
        WEBHOOK_TASK, args=[delivery_id, token], queue=WEBHOOK_QUEUE,
        routing_key=WEBHOOK_QUEUE, retry=True,
    )
