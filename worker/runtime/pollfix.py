"""Let the gevent pool's broker loop take the next job as soon as a slot frees up.

Under gevent Celery runs its blocking loop (`synloop`), which waits up to 2 s for broker
events. A worker whose slots are all busy does not ask Redis for messages, and no ack ends
kombu's wait, so a slot that frees up stayed idle for the rest of it (measured here: one-slot
workers ran one job every 2.0 s). Two changes to that wait: it is capped at MAX_POLL_S, so the
loop re-checks its slots at least that often; and a worker with no free slot waits for an ack
or a reject instead, so it reads the next message at once (with the cap alone, a one-slot
worker still lost about MAX_POLL_S between two jobs: tests/test_slot_wake.py).
Not installed on RabbitMQ, which pushes each message as soon as a slot's ack frees room for it
(measured: no stall with or without it).
"""

from __future__ import annotations

import threading
from typing import Any

from kombu import Connection
from kombu.transport import redis as redis_transport
from kombu.transport import virtual

MAX_POLL_S = 0.1
_installed = False


def install() -> None:
    """Cap every `drain_events` wait of this process; a worker with no free slot waits for
    an ack instead of polling."""
    global _installed
    if _installed:
        return
    # Set by every ack or reject (a slot may be free), cleared by the wait it ends; made here,
    # after gevent has patched `threading`, so that waiting on it lets the tasks run.
    slot_freed = threading.Event()
    original = Connection.drain_events

    def drain_events(self: Connection, **kwargs: Any) -> Any:
        timeout = kwargs.get("timeout")
        timeout_s = MAX_POLL_S if timeout is None else min(timeout, MAX_POLL_S)
        if _no_free_slot(self):
            # Nothing to read until a slot frees up: wait here for that (or the timeout),
            # not in kombu's poll, which no ack ends; then a poll that does not wait, and
            # the next loop reads again (kombu checks its credit first).
            slot_freed.wait(timeout_s)
            slot_freed.clear()
            timeout_s = 0.0
        kwargs["timeout"] = timeout_s
        return original(self, **kwargs)

    Connection.drain_events = drain_events  # type: ignore[method-assign]
    _wake_on_ack(slot_freed)
    _installed = True


def _no_free_slot(connection: Connection) -> bool:
    """Whether every consuming channel of `connection` has used up its prefetch credit."""
    poller = getattr(connection.transport, "cycle", None)
    consuming = [c for c in getattr(poller, "_channels", ()) if c.active_queues]
    return bool(consuming) and not any(c.qos.can_consume() for c in consuming)


def _wake_on_ack(slot_freed: threading.Event) -> None:
    # kombu's base QoS: the one a Redis channel without ack emulation uses (chatq's), and the
    # one whose `ack` the Redis transport's own QoS ends with (for its ack and its reject).
    qos = virtual.QoS
    ack, reject = qos.ack, qos.reject

    def ack_and_wake(self: Any, delivery_tag: Any) -> None:
        ack(self, delivery_tag)
        slot_freed.set()

    def reject_and_wake(self: Any, delivery_tag: Any, requeue: bool = False) -> None:
        reject(self, delivery_tag, requeue=requeue)
        slot_freed.set()

    qos.ack = ack_and_wake  # type: ignore[method-assign]
    qos.reject = reject_and_wake  # type: ignore[method-assign]


def end_reads_within(seconds: float) -> None:
    """Make every BRPOP of this process's Redis transport time out after `seconds` (kombu's
    default: 1 s), so that the queue cycle, asked before each read, is asked that often."""
    redis_transport.Transport.brpop_timeout = seconds  # type: ignore[assignment]  # kombu: int
