"""The Celery app and its broker (Redis via kombu, or RabbitMQ): lanes, backlog."""

from chatq.broker.backlog import Broker, RedisBroker, make
from chatq.broker.celery_app import (
    QUEUES,
    RUN_JOB_TASK,
    enqueue,
    is_amqp,
    make_celery,
    message_for_create,
    worker_queues,
)
from chatq.broker.rabbitmq import BrokerUnavailable

__all__ = [
    "QUEUES",
    "RUN_JOB_TASK",
    "Broker",
    "BrokerUnavailable",
    "RedisBroker",
    "enqueue",
    "is_amqp",
    "make",
    "make_celery",
    "message_for_create",
    "worker_queues",
]
