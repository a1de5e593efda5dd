"""One redis-py client per kombu channel and pool, not one per message.

kombu's Redis channel builds a new `redis.Redis` around its connection pool each time it
sends (`Channel.conn_or_acquire`; with ack emulation, which chatq turns off, also each time
it records an unacked message or acks one), and each build fills about 170 response
callbacks: measured in process, 8 % of the web's CPU per submitted job. A client holds no
connection of its own (its pool does), so one per channel serves every greenlet; a channel
whose pool is replaced gets a new one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis as redis_transport

_CACHE = "_chatq_client"


def install() -> None:
    """Make every kombu Redis channel of this process reuse its client (again: no change)."""
    redis_transport.Channel.conn_or_acquire = _conn_or_acquire  # type: ignore[method-assign, assignment]


@contextmanager
def _conn_or_acquire(channel: Any, client: Any = None) -> Iterator[Any]:
    if client:
        yield client
        return
    pool = channel.pool
    cached = channel.__dict__.get(_CACHE)
    if cached is None or cached[0] is not pool:
        cached = (pool, channel._create_client())
        channel.__dict__[_CACHE] = cached
    yield cached[1]
