"""The one pub/sub listener of a web process, against a real Redis that goes away: an outage
is one warning line, however many times the listener tries again, and the end of a listener
stopped on purpose is none."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from chatq.notify import RECONNECT_DELAY_S, Listener
from scripts.localredis import LocalRedis
from tests.procs import wait_until


@contextmanager
def _subscribed(caplog: pytest.LogCaptureFixture) -> Iterator[tuple[LocalRedis, Listener]]:
    """A listener subscribed to a Redis of its own, its warnings in `caplog`."""
    server = LocalRedis().start()
    listener = Listener(redis.Redis.from_url(server.url, socket_connect_timeout=0.5))
    try:
        with caplog.at_level(logging.WARNING, logger="chatq.notify"):
            listener.start()
            wait_until(listener.connected.is_set, 10, "listener subscribed")
            yield server, listener
    finally:
        listener.stop()
        server.stop()


def _lines(caplog: pytest.LogCaptureFixture, earlier: set[int | None]) -> list[str]:
    # Listeners that earlier tests of this process left behind may log too: not theirs.
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "chatq.notify" and r.thread not in earlier
    ]


def test_a_redis_outage_is_one_warning_line_not_one_per_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    earlier = {thread.ident for thread in threading.enumerate()}
    with _subscribed(caplog) as (server, _):
        server.stop()
        # Enough for several tries again (one every RECONNECT_DELAY_S).
        time.sleep(6 * RECONNECT_DELAY_S)
    assert _lines(caplog, earlier) == ["notification listener lost Redis: ConnectionError"]


def test_a_stopped_listener_says_nothing_of_its_redis_going(
    caplog: pytest.LogCaptureFixture,
) -> None:
    earlier = {thread.ident for thread in threading.enumerate()}
    with _subscribed(caplog) as (server, listener):
        listener.stop()  # a web shutting down, or a test's app at its end
        server.stop()
        time.sleep(4 * RECONNECT_DELAY_S)
    assert _lines(caplog, earlier) == []
