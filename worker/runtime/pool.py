"""The tuning a worker's gevent pool gets, however the pool was chosen (`python -m worker`,
`celery -P gevent`, the bench's twins of the worker)."""

from __future__ import annotations

from kombu.utils.compat import detect_environment

from worker.runtime.greenlets import install_greenlet_fix
from worker.runtime.pollfix import install_pollfix


def tune_gevent_pool(shorten_poll: bool) -> None:
    """Under gevent: each task's greenlet freed by reference counting and, when
    `shorten_poll`, the Redis transport's poll shortened (RabbitMQ pushes: no poll to
    shorten). Nothing in another pool. Called from Celery's `worker_init` signal."""
    if detect_environment() != "gevent":
        return
    if shorten_poll:
        install_pollfix()
    install_greenlet_fix()
